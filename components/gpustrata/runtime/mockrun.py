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

from gpustrata.core.errors import GpustrataError, StackError
from gpustrata.core.unknown import PULUMI_SECRET_SIG, PULUMI_SIG_KEY, SECRET_PLACEHOLDER

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
    """Inputs as registered; each Pulumi secret is replaced by ``SECRET_PLACEHOLDER``."""
    depends_on: tuple[str, ...] = ()
    """Names of the resources this one waits for (``depends_on`` and input dependencies,
    component dependencies expanded to their children, as the engine receives them)."""
    protect: bool = False
    """``protect``: ``pulumi destroy`` and replacements refuse to delete it."""
    retain_on_delete: bool = False
    """``retain_on_delete``: removing it from the program leaves it in the cluster."""
    secret_paths: tuple[str, ...] = ()
    """Where in ``inputs`` Pulumi secrets were (``stringData.token``), redacted."""

    def as_dict(self) -> dict[str, Any]:
        """JSON form for ``plan --format json``."""
        out: dict[str, Any] = {
            "type": self.type,
            "name": self.name,
            "parent": self.parent,
            "inputs": self.inputs,
        }
        out["depends_on"] = list(self.depends_on)
        if self.protect or self.retain_on_delete:
            out["protect"], out["retain_on_delete"] = self.protect, self.retain_on_delete
        return out


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


@dataclass(frozen=True)
class _Record:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    dependencies: tuple[str, ...]
    protect: bool
    retain_on_delete: bool


class _RecordingMonitor(MockMonitor):
    """Pulumi's MockMonitor, also keeping each registration's parent, dependencies and
    options. MockResourceArgs carries none of these; the RegisterResourceRequest the SDK
    sends (pulumi/runtime/resource.py) does: ``dependencies`` holds the URNs of explicit
    ``depends_on`` and of input dependencies, with local components expanded to their
    children (pulumi/runtime/rpc.py ``_add_dependency``)."""

    def __init__(self, mocks: pulumi.runtime.Mocks) -> None:
        super().__init__(mocks)
        self.records: list[_Record] = []

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)  # type: ignore[no-untyped-call]
        self.records.append(
            _Record(
                response.urn,
                request.type,
                request.name,
                bool(request.custom),
                request.parent,
                tuple(request.dependencies),
                bool(request.protect),
                bool(request.retainOnDelete),
            )
        )
        return response


def run_program(
    stack_doc: dict[str, Any],
    *,
    stack: str,
    project: str = PROJECT,
    program: Path | None = None,
    extra_config: dict[str, str] | None = None,
    secret_keys: list[str] | None = None,
) -> list[Registered]:
    """Run the program for ``stack`` with ``gpustrata:stack`` = ``stack_doc``; return resources.

    ``project`` is the Pulumi project's name (Pulumi.yaml ``name``: the URNs' project).
    ``program`` is the project's ``__main__.py``; without it the packaged program runs.
    ``secret_keys`` names keys of ``extra_config`` that are Pulumi secrets (as
    ``pulumi config set --secret`` makes them). Raises :class:`StackError` for a bad
    stack (nothing is recorded then).
    """
    config = {"gpustrata:stack": json.dumps(stack_doc), **(extra_config or {})}
    mocks = _Mocks()
    monitor = _RecordingMonitor(mocks)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        pulumi.runtime.settings.reset_options()
        pulumi.runtime.set_all_config(config, secret_keys)
        pulumi.runtime.set_mocks(
            mocks, project=project, stack=stack, preview=False, monitor=monitor
        )
        try:
            if program is not None:
                runpy.run_path(str(program), run_name="__main__")
            else:
                from gpustrata.runtime.program import main

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
    names = {r.urn: r.name for r in monitor.records}
    states = {urn: reg.state for urn, reg in monitor.resources.items()}
    out = []
    for r in monitor.records:
        secrets: list[str] = []
        inputs = _plain(states.get(r.urn, {}), "", secrets)
        out.append(
            Registered(
                r.type,
                r.name,
                names.get(r.parent),
                r.custom,
                inputs,
                tuple(sorted(names.get(d, d) for d in r.dependencies)),
                r.protect,
                r.retain_on_delete,
                tuple(secrets),
            )
        )
    return _tree_order(out)


def _tree_order(resources: list[Registered]) -> list[Registered]:
    """Parents before their children, siblings by name: Pulumi registers concurrently, so
    the order registrations arrive in differs between runs and would make ``plan`` output
    (and the diff of two plans) change with nothing changed."""
    children: dict[str | None, list[Registered]] = {}
    for r in resources:
        children.setdefault(r.parent, []).append(r)
    out: list[Registered] = []
    seen: set[int] = set()  # parents are named, and two types may share a name
    todo = sorted(children.get(None, []), key=_sibling_key, reverse=True)
    while todo:
        r = todo.pop()
        if id(r) in seen:
            continue
        seen.add(id(r))
        out.append(r)
        todo.extend(sorted(children.get(r.name, []), key=_sibling_key, reverse=True))
    # Children of a parent that was never registered keep a place too.
    return out + sorted((r for r in resources if id(r) not in seen), key=_sibling_key)


def _sibling_key(r: Registered) -> tuple[str, str]:
    return r.name, r.type


def _plain(value: Any, path: str = "", secrets: list[str] | None = None) -> Any:
    """Protobuf Structs carry every number as a float: give integral floats back as ints.

    A Pulumi secret (``rpc.wrap_rpc_secret``'s signature map) becomes the placeholder
    and its path is noted: no plaintext secret leaves this module (plan text/json).
    """
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        if value.get(PULUMI_SIG_KEY) == PULUMI_SECRET_SIG:
            if secrets is not None:
                secrets.append(path)
            return SECRET_PLACEHOLDER
        return {k: _plain(v, f"{path}.{k}" if path else str(k), secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v, f"{path}[{i}]", secrets) for i, v in enumerate(value)]
    return value


__all__ = ["GpustrataError", "Registered", "run_program"]
