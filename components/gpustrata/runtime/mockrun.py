"""Run a Pulumi program offline under Pulumi's own mocks and record what it registers.

No Pulumi CLI, no cloud credentials: ``pulumi.runtime.set_mocks`` stands in for the
engine, config is supplied the way the CLI supplies it (JSON strings per key), and a
recording monitor keeps each registration's type, name, parent and inputs.

:func:`run_project` is the public entry point for a user's own project (its Pulumi.yaml,
program and stack files; ``gpustrata plan --project-dir`` runs the same):

.. code-block:: python

    from gpustrata.runtime.mockrun import run_project

    resources = run_project("path/to/project", stack="dev")
    assert any(r.type == "kubernetes:apps/v1:Deployment" for r in resources)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import runpy
import sys
import traceback
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi.runtime
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.stack import wait_for_rpcs

from gpustrata.core.errors import GpustrataError, InputError, StackError
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
    # Zones as the region's DescribeAvailabilityZones lists them; every zone offers every
    # instance type here (a real account's offerings are only known there: plan says so).
    "aws:index/getAvailabilityZones:getAvailabilityZones": {
        "names": ["mock-zone-a", "mock-zone-b", "mock-zone-c", "mock-zone-d"]
    },
}
_AUTONAMED = {"aws:eks/cluster:Cluster", "aws:ec2/placementGroup:PlacementGroup"}
_ALL_ZONES = "aws:ec2/getInstanceTypeOfferings:getInstanceTypeOfferings"


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
        if args.typ in _AUTONAMED:  # the provider names it (auto-naming) when no name is given
            state.setdefault("name", args.name)
        if args.typ == "aws:eks/cluster:Cluster":
            # EKS fills in the VPC and the cluster security group it creates.
            state["vpcConfig"] = {
                **(state.get("vpcConfig") or {}),
                "vpcId": "vpc-mock",
                "clusterSecurityGroupId": "sg-mock-cluster",
            }
        if args.typ == "aws:ec2/subnet:Subnet":  # ids in AWS's form (CRD patterns check it)
            return f"subnet-{zlib.crc32(args.name.encode()):08x}", state
        return (f"{args.name}-id" if args.custom else None), state

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        if args.token == _ALL_ZONES:
            zones = _CALLS["aws:index/getAvailabilityZones:getAvailabilityZones"]["names"]
            return {"locations": list(zones), "instanceTypes": []}, []
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
    stack_doc: dict[str, Any] | None,
    *,
    stack: str,
    project: str = PROJECT,
    program: Path | None = None,
    extra_config: dict[str, str] | None = None,
    secret_keys: list[str] | None = None,
) -> list[Registered]:
    """Run the program for ``stack`` with ``gpustrata:stack`` = ``stack_doc``; return resources.

    ``stack_doc`` None sets no ``gpustrata:stack`` (a program that builds components
    itself). ``project`` is the Pulumi project's name (Pulumi.yaml ``name``: the URNs'
    project). ``program`` is the project's ``__main__.py``, run as Pulumi runs it: in its
    folder, which is also first on ``sys.path`` (so its own modules import); without it
    the packaged program runs. ``extra_config`` maps full config keys (``team:owner``)
    to the strings the CLI would pass; ``secret_keys`` names those that are Pulumi
    secrets (as ``pulumi config set --secret`` makes them). Raises :class:`StackError`
    for a bad stack or a ``pulumi.RunError``, :class:`ProgramError` naming the file and
    line where the program raised anything else.
    """
    config = dict(extra_config or {})
    if stack_doc is not None:
        config["gpustrata:stack"] = json.dumps(stack_doc)
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
                main_file = program.resolve()  # before the folder changes: it may be relative
                with _in_folder(main_file.parent):
                    runpy.run_path(str(main_file), run_name="__main__")
            else:
                from gpustrata.runtime.program import main

                main()
            loop.run_until_complete(wait_for_rpcs())
        except pulumi.RunError as exc:
            _drain(loop)
            raise StackError.from_rendered(str(exc)) from None
        except (GpustrataError, KeyboardInterrupt):
            raise
        except Exception as exc:  # the user's program failed: name where, not a traceback
            _drain(loop)
            raise ProgramError(program, exc) from None
    finally:
        loop.close()
        asyncio.set_event_loop(None)
    return _collect(monitor)


class ProgramError(GpustrataError):
    """The Pulumi program raised an exception (not a ``pulumi.RunError``): the message
    names the program's file and line and the exception, without a traceback."""

    def __init__(self, program: Path | None, exc: BaseException) -> None:
        where = str(program) if program is not None else "the Pulumi program"
        frames = traceback.extract_tb(exc.__traceback__)
        mine = [f for f in frames if program is not None and Path(f.filename) == program.resolve()]
        last = (mine or frames)[-1:]
        if last and last[0].lineno is not None:
            where = f"{last[0].filename}:{last[0].lineno}"
        super().__init__(f"{where}: the program raised {type(exc).__name__}: {exc}")


@contextlib.contextmanager
def _in_folder(folder: Path) -> Iterator[None]:
    """Run with *folder* as the working directory and first on ``sys.path``, as Pulumi's
    Python language host runs a program (its modules beside it import)."""
    cwd = Path.cwd()
    sys.path.insert(0, str(folder))
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(cwd)
        with contextlib.suppress(ValueError):
            sys.path.remove(str(folder))


def stack_config(file: Path, project: str) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """The config of a stack file as Pulumi passes it to the program.

    Returns the ``gpustrata:stack`` document (``{}`` when absent), every other key as
    the CLI passes it (a string, JSON for other values; a key without a namespace is the
    project's, ``<project>:<key>``), and the keys that are secrets. A ``secure:`` value is
    never decrypted: the program gets a stand-in secret, so it registers what it would
    (a Secret) with no value to leak.
    """
    import yaml

    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"{file}: cannot read the stack file: {exc}") from None
    config = data.get("config") if isinstance(data, Mapping) else None
    if not isinstance(config, Mapping):
        config = {}
    document: dict[str, Any] = {}
    out: dict[str, str] = {}
    secret: list[str] = []
    for key, value in config.items():
        full = str(key) if ":" in str(key) else f"{project}:{key}"
        if full == "gpustrata:stack":
            document = value if isinstance(value, dict) else {}
        elif isinstance(value, Mapping) and set(value) == {"secure"}:
            out[full] = "<encrypted in the stack file>"
            secret.append(full)
        else:
            out[full] = value if isinstance(value, str) else json.dumps(value)
    return document, out, secret


def run_project(
    project_dir: str | Path = ".",
    stack: str = "dev",
    *,
    config: Mapping[str, str] | None = None,
) -> list[Registered]:
    """Run the Pulumi program of a project folder under Pulumi's mocks; return what it
    registers (parents before children).

    The project is read as Pulumi reads it: ``Pulumi.yaml`` (name, ``main``,
    ``stackConfigDir``) and the stack file ``Pulumi.<stack>.yaml``, whose config the
    program gets (``pulumi.Config``; secrets as stand-ins). ``config`` adds or overrides
    keys (full names, string values). The program is any Python Pulumi program, for
    example one that imports :mod:`gpustrata.components`; a bad stack raises
    :class:`StackError`, an exception in the program :class:`ProgramError`, a broken
    Pulumi.yaml :class:`InputError`. No Pulumi CLI and no credentials are needed.
    """
    from gpustrata.spec.project import read_project

    project = read_project(Path(project_dir))
    file = project.stack_file(stack)
    document, extra, secret = stack_config(file, project.name) if file.is_file() else ({}, {}, [])
    extra.update(config or {})
    program = project.program()
    if not program.is_file():
        raise InputError(f"{program}: no Pulumi program (Pulumi.yaml main, or __main__.py)")
    return run_program(
        document or None,
        stack=stack,
        project=project.name,
        program=program,
        extra_config=extra,
        secret_keys=secret,
    )


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


__all__ = [
    "GpustrataError",
    "ProgramError",
    "Registered",
    "run_program",
    "run_project",
    "stack_config",
]
