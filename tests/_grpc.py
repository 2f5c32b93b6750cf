"""Helper for tests: a Pulumi plugin started the way the engine starts it, over gRPC."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def plugin_channel(
    argv: Sequence[str],
    *,
    cwd: Path,
    no_port: str,
    timeout: float,
    env: Mapping[str, str] | None = None,
) -> Iterator[Any]:
    """Run *argv* (a plugin that prints its port on its first stdout line), and yield a
    ready gRPC channel to that port; the plugin is stopped on exit. *no_port* starts the
    assertion message when the first line is not a port."""
    import grpc  # type: ignore[import-untyped]

    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=None if env is None else dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        assert port.isdigit(), f"{no_port}: {port!r} {proc.stderr.read() if proc.stderr else ''}"
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout)
            yield channel
        finally:
            channel.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@contextmanager
def policy_pack(repo: Path, env: Mapping[str, str]) -> Iterator[Any]:
    """The repository's policy pack, started as `pulumi preview --policy-pack` starts it,
    with *env* (plus a PYTHONPATH for the repository's packages); yields an Analyzer stub."""
    from pulumi.runtime.proto import analyzer_pb2_grpc

    full = {**env, "PYTHONPATH": f"{repo / 'components'}:{repo / 'policies'}"}
    with plugin_channel(
        [sys.executable, "-m", "pulumi.policy", "127.0.0.1:1", "policies"],
        cwd=repo,
        env=full,
        no_port="pack did not print a port",
        timeout=20,
    ) as channel:
        yield analyzer_pb2_grpc.AnalyzerStub(channel)


# --- what the engine sends: one object as a Pulumi resource, and what the pack says back --


def resource_token(obj: Mapping[str, Any]) -> str:
    """The Pulumi type token of a Kubernetes-shaped fixture object (``GpuNodePool``: the
    gpustrata component's)."""
    if obj["kind"] == "GpuNodePool":
        return "gpustrata:index:GpuNodePool"
    api = obj["apiVersion"]
    return f"kubernetes:{api if '/' in api else 'core/' + api}:{obj['kind']}"


def resource_props(token: str, obj: Mapping[str, Any]) -> dict[str, Any]:
    """The inputs the engine sends for *obj* under *token* (a gpustrata component takes the
    object as its ``description``)."""
    return {"description": dict(obj)} if token.startswith("gpustrata:") else dict(obj)


def to_struct(data: Mapping[str, Any]) -> Any:
    """*data* as the protobuf Struct of the gRPC wire."""
    from google.protobuf import struct_pb2

    s = struct_pb2.Struct()
    s.update(dict(data))
    return s


def resource_urn(token: str, name: str) -> str:
    """A stack-``prod`` URN for a resource."""
    return f"urn:pulumi:prod::gpustrata::{token}::{name}"


def diagnostic_findings(diags: Any) -> set[tuple[str, str, str]]:
    """(rule, resource, message) of each diagnostic the pack returned."""
    out = set()
    for d in diags:
        head = d.message.split("\n")[1]  # line 0 is the policy description
        rule, rest = head.split("] ", 1)
        resource, message = rest.split(": ", 1)
        out.add((rule.lstrip("["), resource, message))
    return out
