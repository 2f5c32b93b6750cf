"""Cold wall time of `gpustrata plan` per reference stack and for 1, 10, 100 served models.

Each run is a fresh interpreter (`python -m gpustrata.cli.app plan ...`), so imports count.
Prints a table and the least-squares slope in seconds per added model.
Usage: python benchmarks/bench_plan.py [--repeat N]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def cold_run(args: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "gpustrata.cli.app", "plan", *args, "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"plan failed ({proc.returncode}): {proc.stderr}")
    return elapsed


def generated_stack(models: int, directory: Path) -> Path:
    """The dev stack with `models` copies of its model (deployment runtime)."""
    data = yaml.safe_load((ROOT / "stacks" / "Pulumi.dev.yaml").read_text())
    stack = data["config"]["gpustrata:stack"]
    template = stack["models"][0]
    stack["node_pools"][0]["max_size"] = models
    stack["models"] = []
    for i in range(models):
        model = copy.deepcopy(template)
        model["name"] = f"model-{i}"
        stack["models"].append(model)
    path = directory / f"Pulumi.gen{models}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="runs per case (median shown)")
    opts = parser.parse_args()
    rows: list[tuple[str, float]] = []
    for env in ("dev", "staging", "prod"):
        times = [cold_run(["--stack", env]) for _ in range(opts.repeat)]
        rows.append((f"stack {env}", statistics.median(times)))
    sizes = (1, 10, 100)
    medians: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sizes:
            path = generated_stack(n, Path(tmp))
            times = [cold_run(["--file", str(path)]) for _ in range(opts.repeat)]
            medians.append(statistics.median(times))
            rows.append((f"generated, {n} models", medians[-1]))
    slope = statistics.linear_regression(sizes, medians).slope
    print(f"{'case':<24} cold wall time (median of {opts.repeat})")
    for name, seconds in rows:
        print(f"{name:<24} {seconds:6.2f} s")
    print(f"slope: {slope * 1000:.1f} ms per added model (least squares over 1/10/100 models)")


if __name__ == "__main__":
    main()
