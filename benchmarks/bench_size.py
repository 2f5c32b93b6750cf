"""How long ``gpustrata size`` takes: one cold CLI run, then every catalogue model in-process.

Done-when: under 3 s per answer. Not a test (timings vary with the machine).

    python benchmarks/bench_size.py
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import time
from pathlib import Path

from gpustrata.catalog.architectures import load_model_catalog
from gpustrata.cli.app import main

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--input-tokens", "2048", "--output-tokens", "256", "--concurrency", "64"]
SLO = ["--ttft", "2", "--tpot", "0.05"]


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
    worst = 0.0
    for arch in load_model_catalog():
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()):
            main(["size", "--model", arch.id, *ARGS, *SLO, "--format", "json"])
        dt = time.perf_counter() - t
        worst = max(worst, dt)
        print(f"{arch.id:50} {dt:5.2f} s")
    print(f"slowest in-process answer: {worst:.2f} s (goal < 3 s)")
    return 0


if __name__ == "__main__":
    sys.exit(run())
