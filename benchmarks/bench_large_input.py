"""Time and peak memory of `gpustrata check` on a 50 MB input (YAML file, JSON file, stdin).

    python benchmarks/bench_large_input.py [--mb 50] [--keep DIR]

Builds ~50 MB of Helm-style output (``# Source:`` comments, ``---`` separators, empty
documents, ``null`` values) from the rule fixtures, with unique object names, and a
JSON ``kind: List`` of the same objects. Each input is checked by a fresh interpreter
(`python -m gpustrata.cli.app check --format json`), which reports its own peak RSS
(``VmHWM`` from ``/proc/self/status``: ``ru_maxrss`` of an exec'ed child can
report its parent's peak). The generated files
live in a temporary directory and are removed afterwards (not committed).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
# Every rule folder's good-*.yaml and bad-*.yaml fixtures (not its expected.yaml).
FIXTURES = sorted(
    p
    for kind in ("good", "bad")
    for p in (REPO / "policies" / "gpustrata_policies" / "rules").glob(f"*/{kind}-*.yaml")
)

_CHILD = """
import resource, sys
from gpustrata.cli.app import main
src = sys.argv[1]
args = ["check", "--format", "json", src]
if src == "-":
    sys.stdin = open(sys.argv[2], encoding="utf-8")
code = main(args)
# VmHWM is this process's own peak; ru_maxrss can carry the parent's peak across exec.
status = open("/proc/self/status").read().split("VmHWM:")
peak_kib = int(status[1].split()[0]) if len(status) > 1 else resource.getrusage(
    resource.RUSAGE_SELF).ru_maxrss
print(f"{code} {peak_kib}", file=sys.stderr)
"""


# A cluster has a few pools and one GPU Operator: these appear once, workloads repeat.
_CLUSTER_KINDS = (
    "GpuNodePool",
    "NodePool",
    "EC2NodeClass",
    "GpuOperator",
    "HelmRelease",
    "ClusterPolicy",
)


def _documents() -> tuple[list[dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
    cluster, workloads = [], []
    for path in FIXTURES:
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if not isinstance(doc, dict):
                continue
            if doc.get("kind") in _CLUSTER_KINDS:
                if len(cluster) < 8:
                    cluster.append(doc)
            else:
                workloads.append((f"{path.parent.name}/templates/{path.stem}.yaml", doc))
    return cluster, workloads


def write_inputs(directory: Path, megabytes: float) -> tuple[Path, Path, int]:
    """A Helm-style multi-document YAML file and a JSON List of about *megabytes* MB each.

    Written as a stream, so this process stays small (its peak is not the one measured).
    """
    cluster, base = _documents()
    target = int(megabytes * 1024 * 1024)
    yaml_path, json_path = directory / "big.yaml", directory / "big.json"
    size = count = 0
    with yaml_path.open("w", encoding="utf-8") as out, json_path.open("w") as js:
        js.write('{"apiVersion": "v1", "kind": "List", "items": [')
        for doc in cluster:
            text = "---\n" + yaml.safe_dump(doc, sort_keys=False)
            out.write(text)
            js.write(("," if count else "") + json.dumps(doc))
            size += len(text.encode())
            count += 1
        while size < target:
            source, doc = base[count % len(base)]
            doc = json.loads(json.dumps(doc))
            meta = doc.setdefault("metadata", {})
            meta["name"] = f"{meta.get('name', 'x')}-{count}"
            meta.setdefault("annotations", None)  # Helm leaves empty values as null
            text = f"---\n# Source: chart/{source}\n" + yaml.safe_dump(doc, sort_keys=False)
            if count % 50 == 0:
                text += "---\n# an empty document, as `{{- if }}` blocks leave them\n"
            out.write(text)
            js.write("," + json.dumps(doc))
            size += len(text.encode())
            count += 1
        js.write("]}")
    return yaml_path, json_path, count


def check(source: str, stdin_file: Path | None = None) -> tuple[int, float, float]:
    """Exit code, seconds, and peak RSS in MiB of `check` in a fresh interpreter."""
    argv = [sys.executable, "-c", _CHILD, source]
    if stdin_file is not None:
        argv.append(str(stdin_file))
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - start
    code, peak_kib = proc.stderr.strip().splitlines()[-1].split()
    return int(code), took, int(peak_kib) / 1024


def baseline() -> float:
    """Peak RSS in MiB of an interpreter that only imports the check command."""
    code = (
        "import resource, gpustrata.cli.app, gpustrata_policies.output.formats;"
        "import gpustrata_policies.evaluate;"
        "gpustrata_policies.evaluate.all_rules();"
        "print(open('/proc/self/status').read().split('VmHWM:')[1].split()[0])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(out.stdout) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--keep", type=Path, help="write the inputs here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.keep or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        yaml_path, json_path, count = write_inputs(directory, args.mb)
        print(
            f"inputs: {count} objects; {yaml_path.stat().st_size / 2**20:.1f} MiB YAML, "
            f"{json_path.stat().st_size / 2**20:.1f} MiB JSON"
        )
        print(f"baseline (imports + rules loaded): {baseline():.0f} MiB peak RSS")
        for label, source, stdin in (
            ("YAML file", str(yaml_path), None),
            ("YAML on stdin", "-", yaml_path),
            ("JSON file", str(json_path), None),
        ):
            code, took, peak = check(source, stdin)
            print(f"{label:<14} exit {code}  {took:6.1f} s  peak RSS {peak:6.0f} MiB")


if __name__ == "__main__":
    main()
