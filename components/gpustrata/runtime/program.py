"""The Pulumi program: read `gpustrata:stack` from config and build an InferenceStack.

``__main__.py`` at the project root calls :func:`main`; ``gpustrata plan`` runs that
same file under Pulumi's mocks.
"""

from __future__ import annotations

from pathlib import Path

import pulumi

from gpustrata.components.inference_stack import InferenceStack, InferenceStackArgs
from gpustrata.core.errors import InputError, StackError
from gpustrata.spec.loader import stack_file
from gpustrata.spec.project import read_project


def main() -> InferenceStack:
    """Build the stack for the current Pulumi stack; a bad stack fails before registering."""
    config = pulumi.Config("gpustrata")
    document = config.require_object("stack")
    try:  # Pulumi runs the program in the project folder: name the file it read
        source = str(read_project(Path(".")).stack_file(pulumi.get_stack()))
    except InputError:
        source = str(stack_file(pulumi.get_stack()))
    args: InferenceStackArgs = {"stack": document, "source": source}
    token = config.get_secret("hfToken")  # only ever a Pulumi secret Output
    if token is not None:
        args["hf_token_value"] = token
    try:
        stack = InferenceStack("gpustrata", args)
    except StackError as exc:
        # RunError prints the message without a Python traceback.
        raise pulumi.RunError(exc.render()) from None
    pulumi.export("environment", stack.plan.spec.environment)
    pulumi.export("kubeconfig", pulumi.Output.secret(stack.kubeconfig))
    pulumi.export(
        "models",
        {
            m.name: {"runtime": m.spec.runtime, "gpus_per_replica": m.gpus_per_replica}
            for m in stack.plan.models.values()
        },
    )
    return stack
