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
