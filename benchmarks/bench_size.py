"""How long ``gpustrata size`` takes, and what judging the head by the simulation changes.

One cold CLI run, then every catalogue model in-process twice, alternating: the screen alone
(``SIMULATED_TOP = 0``: the closed form ranks and judges every candidate, as ``size`` did
until session 22) and the shipped search (the head of the ranking judged by the event-level
simulation). Prints each model's seconds both ways and whether the top candidate changed.

Done-when: under 3 s per answer. Not a test (timings vary with the machine).

    python benchmarks/bench_size.py
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import gpustrata.planning.sizing as sizing
from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.cli.app import main

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--input-tokens", "2048", "--output-tokens", "256", "--concurrency", "64"]
SLO = ["--ttft", "2", "--tpot", "0.05"]


def _size(model: str, head: int) -> tuple[float, dict[str, Any]]:
    sizing.SIMULATED_TOP = head
    out = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stdout(out):
        main(["size", "--model", model, *ARGS, *SLO, "--format", "json"])
    return time.perf_counter() - t, json.loads(out.getvalue())


def _top(doc: dict[str, Any]) -> str:
    c = (doc["candidates"] or [None])[0]
    if c is None:
        return "none"
    cost = c["cost_per_hour"]["value"] if c["cost_per_hour"] else float("nan")
    ok = "meets" if c["meets_slo"] else "misses"
    return (
        f"{c['instance_type']} TP{c['tensor_parallel_size']} x{c['replicas']} ${cost:,.2f}/h {ok}"
    )


def run() -> int:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'components'}:{ROOT / 'policies'}"}
    t = time.perf_counter()
    subprocess.run(
        [
            sys.executable,
            "-m",
            "gpustrata.cli.app",
            "size",
            "--model",
            "meta-llama/Llama-3.1-70B-Instruct",
            *ARGS,
            *SLO,
            "--format",
            "json",
        ],
        check=False,
        capture_output=True,
        env=env,
    )
    print(f"cold CLI run (imports included), 70B: {time.perf_counter() - t:.2f} s")
    shipped = sizing.SIMULATED_TOP
    screen_s: list[float] = []
    head_s: list[float] = []
    changed = 0
    models = load_model_catalog()
    for arch in models:
        s0, screen = _size(arch.id, 0)
        s1, head = _size(arch.id, shipped)
        screen_s.append(s0)
        head_s.append(s1)
        a, b = _top(screen), _top(head)
        changed += a != b
        note = "" if a == b else f"   screen: {a} -> simulated: {b}"
        print(f"{arch.id:50} screen {s0:5.2f} s  head simulated {s1:5.2f} s{note}")
    sizing.SIMULATED_TOP = shipped
    ratio = statistics.median(head_s) / statistics.median(screen_s)
    print(
        f"{len(head_s)} models; seconds per answer, median / max: screen alone "
        f"{statistics.median(screen_s):.2f} / {max(screen_s):.2f}, head simulated "
        f"{statistics.median(head_s):.2f} / {max(head_s):.2f} (x{ratio:.1f} median); "
        f"top candidate changed on {changed} of {len(head_s)} (goal < 3 s per answer)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(run())
