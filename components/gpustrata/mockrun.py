"""Run the Pulumi program offline under Pulumi's own mocks and record what it registers.

No Pulumi CLI, no cloud credentials: ``pulumi.runtime.set_mocks`` stands in for the
engine, config is supplied the way the CLI supplies it (JSON strings per key), and a
recording monitor keeps each registration's type, name, parent and inputs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import runpy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.stack import wait_for_rpcs

from gpustrata.errors import GpustrataError, StackError

PROJECT = "gpustrata"

# Outputs the real providers compute that the program reads (everything else echoes inputs).
_COMPUTED: dict[str, dict[str, Any]] = {
    "aws:iam/role:Role": {"arn": "arn:aws:iam::123456789012:role/mock"},
    "aws:eks/cluster:Cluster": {
        "endpoint": "https://mock.eks.amazonaws.com",
        "certificateAuthority": {"data": "bW9jaw=="},
    },
    "aws:ec2/launchTemplate:LaunchTemplate": {"latestVersion": 1},
}
_CALLS: dict[str, dict[str, Any]] = {
    "aws:ec2/getVpc:getVpc": {"id": "vpc-mock"},
    "aws:ec2/getSubnets:getSubnets": {"ids": ["subnet-mock-a", "subnet-mock-b"]},
}


@dataclass(frozen=True)
class Registered:
    """One resource the program registered."""

    type: str
    name: str
    parent: str | None
    custom: bool
    inputs: dict[str, Any]

    def as_dict(self) -> dict[str, Any]:
        """JSON form for ``plan --format json``."""
        return {"type": self.type, "name": self.name, "parent": self.parent, "inputs": self.inputs}


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(
        self, args: pulumi.runtime.MockResourceArgs
    ) -> tuple[str | None, dict[str, Any]]:
        state = dict(args.inputs)
        state.update(_COMPUTED.get(args.typ, {}))
        if args.typ == "aws:eks/cluster:Cluster":
            state.setdefault("name", args.name)
        return (f"{args.name}-id" if args.custom else None), state

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return dict(_CALLS.get(args.token, {})), []


class _RecordingMonitor(MockMonitor):
    """Pulumi's MockMonitor, also keeping each registration with its parent."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.records: list[tuple[str, str, str, bool, str]] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        self.records.append(
            (response.urn, request.type, request.name, bool(request.custom), request.parent)
        )
        return response


def run_program(
    stack_doc: dict[str, Any],
    *,
    stack: str,
    program: Path | None = None,
    extra_config: dict[str, str] | None = None,
) -> list[Registered]:
    """Run the program for ``stack`` with ``gpustrata:stack`` = ``stack_doc``; return resources.

    ``program`` is the project's ``__main__.py``; without it the packaged program runs.
    Raises :class:`StackError` for a bad stack (nothing is recorded then).
    """
    config = {"gpustrata:stack": json.dumps(stack_doc), **(extra_config or {})}
    mocks = _Mocks()
    monitor = _RecordingMonitor(mocks)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.settings.reset_options()
        pulumi.runtime.set_all_config(config)
        pulumi.runtime.set_mocks(
            mocks, project=PROJECT, stack=stack, preview=False, monitor=monitor
        )
        try:
            if program is not None:
                runpy.run_path(str(program), run_name="__main__")
            else:
                from gpustrata.program import main

                main()
            loop.run_until_complete(wait_for_rpcs())
        except pulumi.RunError as exc:
            _drain(loop)
            raise StackError.from_rendered(str(exc)) from None
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    return _collect(monitor)


def _drain(loop: asyncio.AbstractEventLoop) -> None:
    """Let the registrations already queued (the root Stack) finish before the loop closes."""
    with contextlib.suppress(Exception):  # the program already failed; that is reported
        loop.run_until_complete(wait_for_rpcs())


def _collect(monitor: _RecordingMonitor) -> list[Registered]:
    names = {urn: name for urn, _, name, _, _ in monitor.records}
    states = {urn: reg.state for urn, reg in monitor.resources.items()}
    out = []
    for urn, typ, name, custom, parent in monitor.records:
        inputs = _plain(states.get(urn, {}))
        out.append(Registered(typ, name, names.get(parent), custom, inputs))
    return out


def _plain(value: Any) -> Any:
    """Protobuf Structs carry every number as a float: give integral floats back as ints."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


__all__ = ["GpustrataError", "Registered", "run_program"]
