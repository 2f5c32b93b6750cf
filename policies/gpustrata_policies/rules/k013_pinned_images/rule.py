"""K013 pinned-images."""

from __future__ import annotations

from collections.abc import Iterator

from gpustrata.core.unknown import known
from gpustrata_policies.findings import Outcome, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.vllm_args import moving_tag, split_image


def check(ctx: RuleContext, obj: K8sObject) -> Iterator[Outcome]:
    """Images carry a tag other than ``latest`` (or a digest)."""
    for c in obj.containers():
        image = known(c.image, f"image of {c.label}")
        if not isinstance(image, str) or not image:
            continue  # filled in by a controller (KServe presets) or invalid anyway
        _, tag, digest = split_image(image)
        if digest:
            continue
        word = moving_tag(tag)
        if tag is None:
            problem = "has no tag, so it pulls :latest"
        elif tag == "latest":
            problem = "uses the :latest tag"
        elif word is not None:
            problem = f"uses the moving tag :{tag} ({word!r} names a channel, not a release)"
        else:
            continue
        yield ctx.violation(
            obj,
            f"{c.label} image {image} {problem}; what runs changes without a change here",
            (*c.path, "image"),
        )


RULE = folder_rule(__name__, check)
