"""Throughput of `gpustrata check`: warm objects/second and cold time for 20 manifests.

    python benchmarks/bench_check.py

Warm: evaluate() on 100 / 1,000 / 10,000 in-memory objects (parsing excluded, then
included). Cold: a fresh interpreter running `check` on a 20-manifest folder.
Targets: >= 5,000 objects/s warm, < 1 s cold.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "components"), str(REPO / "policies")]

from gpustrata_policies import evaluate  # noqa: E402
from gpustrata_policies.inputs.manifests import load_paths, load_text  # noqa: E402

# Every rule folder's good-*.yaml and bad-*.yaml fixtures (not its expected.yaml).
FIXTURES = sorted(
    p
    for kind in ("good", "bad")
    for p in (REPO / "policies" / "gpustrata_policies" / "rules").glob(f"*/{kind}-*.yaml")
)


def _corpus() -> list[dict[str, object]]:
    docs = []
    for path in FIXTURES:
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict))
    return docs


def _objects(n: int, base: list[dict[str, object]]) -> list[dict[str, object]]:
    pools = [d for d in base if d.get("kind") == "GpuNodePool"]  # a cluster has few pools
    workloads = [d for d in base if d.get("kind") != "GpuNodePool"]
    out = list(pools)
    for i in range(n - len(pools)):
        doc = dict(workloads[i % len(workloads)])
        meta = dict(doc.get("metadata") or {})  # type: ignore[call-overload]
        meta["name"] = f"{meta.get('name', 'x')}-{i}"
        doc["metadata"] = meta
        out.append(doc)
    return out


def main() -> None:
    base = _corpus()
    evaluate(_objects(50, base))  # warm up imports and caches
    for n in (100, 1_000, 10_000):
        objs = _objects(n, base)
        start = time.perf_counter()
        report = evaluate(objs)
        took = time.perf_counter() - start
        text = yaml.safe_dump_all(objs)
        start = time.perf_counter()
        evaluate(load_text(text, "bench.yaml"))
        took_parse = time.perf_counter() - start
        print(
            f"warm {n:>6} objects: {n / took:>9,.0f} objects/s evaluate, "
            f"{n / took_parse:>8,.0f} objects/s parse+evaluate ({len(report.findings)} findings)"
        )
    with tempfile.TemporaryDirectory() as tmp:
        files = FIXTURES[:20]
        for i, f in enumerate(files):
            (Path(tmp) / f"{i:02d}-{f.name}").write_text(f.read_text())
        code = "import sys; from gpustrata.cli.check import main; sys.exit(main(sys.argv[1:]))"
        env = {"PYTHONPATH": f"{REPO / 'components'}:{REPO / 'policies'}", "PATH": "/usr/bin:/bin"}
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run(
                [sys.executable, "-c", code, "check", "--format", "json", tmp],
                env=env,
                capture_output=True,
                check=False,
            )
            runs.append(time.perf_counter() - start)
        n_objects = len(load_paths([tmp]))
        print(
            f"cold  {len(files)} manifests ({n_objects} objects), fresh interpreter: "
            f"best {min(runs):.2f} s, worst {max(runs):.2f} s"
        )


if __name__ == "__main__":
    main()
