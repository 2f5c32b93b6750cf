"""Speed and memory of `gpustrata check` and the policy pack, as ratios measured in one run
(issues 18, 35).

    python benchmarks/bench_check.py [--objects 5000] [--rounds 3] [--against DIR]
                                     [--skip pack,memory,start,checkov]

The input is about 5,000 real-shaped objects (the field corpus and every rule fixture,
replicated, each copy in its own namespace so its HPAs, PDBs and Services still point at
its workloads; node pools, operators and other cluster-wide objects once), written as
one multi-document YAML file and as the ``kind: List`` that ``kubectl get -A -o json``
prints. Each round measures, for this checkout and for ``--against DIR`` (another
checkout, e.g. ``git worktree add /tmp/base main``) one after the other:

- **parse floor**: ``yaml.load_all`` with libyaml's ``CSafeLoader``, the bare parse;
- **check YAML / parse**, **check JSON / parse**: ``gpustrata check --format json`` in a
  warm interpreter (reading, lines, every rule, the JSON report) over the floor
  (targets <= 1.0 and <= 0.5);
- **pack / check per object**: the CrossGuard pack's AnalyzeStack over gRPC (the pack
  started as ``pulumi preview --policy-pack`` starts it) on the same objects, CPU of the
  pack process per object over check YAML's per object (target <= 2); and the CPU of the
  pack's start, until it serves (it runs while the Pulumi program does);
- **memory per input MB**: peak RSS (``VmHWM``) of `check` in a fresh interpreter on
  1/5 and all of the YAML corpus, the slope in MiB per MB of input (target <= 6), the
  report written to /dev/null as `check` writes it to a pipe or file; and the same with
  the report held in an ``io.StringIO`` (how sessions before 21 measured it: the
  benchmark's copy of a 17 MB report, about 3.3 MiB per MB);
- **small check**: `gpustrata check` of one fixture in a fresh interpreter, bytecode
  cached as an installed package has it: wall and CPU seconds (target < 0.5 s);
- **checkov** (once, this checkout only, when it installs into a throwaway virtualenv
  under /tmp): its time on the corpus folder over gpustrata's cold check of it.

In-process times are the best of ``--repeat`` runs in CPU seconds and each figure is
printed as the median over ``--rounds`` rounds: on a shared machine CPU time is what
the work costs and wall time what the neighbours leave; ratios taken within one round
cancel most of the drift.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
FIELD_CORPUS = REPO.parent / "shared" / "field-corpus"
if not FIELD_CORPUS.is_dir():
    FIELD_CORPUS = REPO / "tests" / "data" / "field-corpus-1"
# Every rule folder's good-*.yaml and bad-*.yaml fixtures (not its expected.yaml).
FIXTURES = sorted(
    p
    for kind in ("good", "bad")
    for p in (REPO / "policies" / "gpustrata_policies" / "rules").glob(f"*/{kind}-*.yaml")
)
SMALL = "policies/gpustrata_policies/rules/k001_gpu_requests_equal_limits/good-limits-only.yaml"
# What a cluster has once, not once per workload.
CLUSTER_WIDE = frozenset(
    {"GpuNodePool", "GpuOperator", "HelmRelease", "ClusterPolicy", "Namespace", "Node"}
    | {"NodePool", "EC2NodeClass", "NVIDIADriver", "DeviceClass"}
    | {"ClusterServingRuntime", "ClusterRole", "ClusterRoleBinding"}
)
Doc = dict[str, Any]

# Run in a fresh interpreter of one checkout: the in-process figures, as JSON.
_WARM = """
import contextlib, io, json, sys, time, yaml
from gpustrata.cli.app import main
yaml_path, json_path, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
def check(path):
    with contextlib.redirect_stdout(io.StringIO()):
        return main(["check", "--format", "json", path])
def best(fn):
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)
check(sys.argv[4])  # imports, catalogues and rules loaded once
text = open(yaml_path, encoding="utf-8").read()
print(json.dumps({
    "parse": best(lambda: list(yaml.load_all(text, yaml.CSafeLoader))),
    "yaml": best(lambda: check(yaml_path)),
    "json": best(lambda: check(json_path)),
}))
"""

# Peak RSS of `check` in a fresh interpreter (VmHWM: ru_maxrss can carry a parent's peak).
# The report goes to /dev/null, as `check`'s stdout goes to a pipe or a file; with
# "held", to an io.StringIO, whose 17 MB copy of the report is the benchmark's, not check's.
_PEAK = """
import contextlib, io, os, sys
from gpustrata.cli.app import main
sink = io.StringIO() if sys.argv[2] == "held" else open(os.devnull, "w")
with contextlib.redirect_stdout(sink):
    main(["check", "--format", "json", sys.argv[1]])
print(open("/proc/self/status").read().split("VmHWM:")[1].split()[0])
"""


def _sources() -> list[Path]:
    return [*sorted(FIELD_CORPUS.glob("*.yaml")), *FIXTURES]


def corpus(n: int) -> list[Doc]:
    """About *n* objects: cluster-wide objects once, then the rest replicated by namespace."""
    once: dict[tuple[str, str], Doc] = {}
    groups: list[list[Doc]] = []
    for path in _sources():
        docs = [d for d in yaml.load_all(path.read_text(), yaml.CSafeLoader) if isinstance(d, dict)]
        group = []
        for doc in docs:
            if doc.get("kind") in CLUSTER_WIDE:
                key = (str(doc.get("kind")), str((doc.get("metadata") or {}).get("name")))
                once.setdefault(key, doc)
            else:
                group.append(doc)
        if group:
            groups.append(group)
    out = list(once.values())
    copy_no = 0
    while len(out) < n:
        for group in groups:
            for doc in group:
                doc = copy.deepcopy(doc)
                meta = doc.get("metadata")
                meta = doc["metadata"] = dict(meta) if isinstance(meta, dict) else {}
                meta["namespace"] = f"{meta.get('namespace') or 'default'}-{copy_no}"
                out.append(doc)
            copy_no += 1
            if len(out) >= n:
                break
    return out


def _env(root: Path, cache: Path | None = None) -> dict[str, str]:
    """The environment of a fresh interpreter importing *root*'s checkout; with *cache*,
    bytecode is written and read there (as an installed package has it compiled)."""
    env = {**os.environ, "PYTHONPATH": f"{root / 'components'}:{root / 'policies'}"}
    if cache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache)
    return env


def _child_cpu(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds and stdout of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return wall, cpu, proc.stdout


def warm(root: Path, yaml_path: Path, json_path: Path, repeat: int) -> dict[str, float]:
    """Parse floor, check YAML and check JSON in CPU seconds, in one interpreter."""
    argv = [sys.executable, "-c", _WARM, str(yaml_path), str(json_path), str(repeat)]
    proc = subprocess.run(
        [*argv, str(root / SMALL)], env=_env(root), capture_output=True, text=True, check=True
    )
    found: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def peak_mib(root: Path, path: Path, sink: str = "null") -> float:
    """Peak RSS in MiB of `check` on *path* in a fresh interpreter, its report written to
    /dev/null (*sink* ``"held"``: kept in memory, as this benchmark measured before
    session 21)."""
    argv = [sys.executable, "-c", _PEAK, str(path), sink]
    proc = subprocess.run(argv, env=_env(root), capture_output=True, text=True, check=True)
    return int(proc.stdout.strip().splitlines()[-1]) / 1024


def small_check(root: Path, cache: Path, runs: int = 7) -> tuple[float, float]:
    """Median wall and CPU seconds of `check` of one fixture in a fresh interpreter."""
    argv = [sys.executable, "-m", "gpustrata.cli.app", "check", str(root / SMALL)]
    env = _env(root, cache)
    _child_cpu(argv, env, root)  # writes the bytecode
    runs_ = [_child_cpu(argv, env, root) for _ in range(runs)]
    return statistics.median(r[0] for r in runs_), statistics.median(r[1] for r in runs_)


def _token(obj: Doc) -> str:
    if obj["kind"] in ("GpuNodePool", "GpuOperator"):
        return f"gpustrata:index:{obj['kind']}"
    api = str(obj.get("apiVersion") or "v1")
    return f"kubernetes:{api if '/' in api else 'core/' + api}:{obj['kind']}"


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of process *pid* (Linux ``/proc``), else ``None``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pack_cpu(root: Path, docs: list[Doc]) -> tuple[float, float] | None:
    """CPU seconds of the pack process (*root*'s) for one AnalyzeStack of *docs*, the pack
    started as ``pulumi preview --policy-pack`` starts it, and for its start (until it
    serves); ``None`` without grpc."""
    try:
        import grpc  # type: ignore[import-untyped]
        from google.protobuf import struct_pb2
        from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
    except ImportError as exc:
        print(f"pack: skipped ({exc})")
        return None
    resources = []
    for i, obj in enumerate(
        d for d in docs if isinstance(d.get("kind"), str) and d.get("apiVersion")
    ):
        token = _token(obj)
        props = {"description": obj} if token.startswith("gpustrata:") else obj
        struct = struct_pb2.Struct()
        struct.update(json.loads(json.dumps(props)))
        urn = f"urn:pulumi:prod::bench::{token}::r{i}"
        resources.append(
            analyzer_pb2.AnalyzerResource(type=token, properties=struct, urn=urn, name=f"r{i}")
        )
    request = analyzer_pb2.AnalyzeStackRequest(resources=resources)
    env = {**_env(root), "GPUSTRATA_ENVIRONMENT": "prod"}
    argv = [sys.executable, "-m", "pulumi.policy", "127.0.0.1:1", "policies"]
    proc = subprocess.Popen(argv, cwd=root, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        # The diagnostics of 5,000 resources exceed gRPC's default 4 MiB reply.
        options = [("grpc.max_receive_message_length", -1)]
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
        grpc.channel_ready_future(channel).result(timeout=60)
        before = _cpu_seconds(proc.pid)
        analyzer_pb2_grpc.AnalyzerStub(channel).AnalyzeStack(request, timeout=1800)
        after = _cpu_seconds(proc.pid)
        channel.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if before is None or after is None:
        return None
    return after - before, before


def measure(
    root: Path, files: dict[str, Path], docs: list[Doc], repeat: int, skip: set[str], cache: Path
) -> dict[str, float]:
    """One round of every figure for the checkout at *root*."""
    out: dict[str, float] = {}
    got = warm(root, files["yaml"], files["json"], repeat)
    out["parse floor (s CPU)"] = got["parse"]
    out["check YAML / parse"] = got["yaml"] / got["parse"]
    out["check JSON / parse"] = got["json"] / got["parse"]
    if "pack" not in skip:
        cpu = pack_cpu(root, docs)
        if cpu is not None:
            out["pack / check YAML, per object"] = cpu[0] / got["yaml"]
            out["  pack start (s CPU)"] = cpu[1]
    if "memory" not in skip:
        mb = (files["yaml"].stat().st_size - files["fifth"].stat().st_size) / 2**20
        low, high = peak_mib(root, files["fifth"]), peak_mib(root, files["yaml"])
        out["peak memory per input MB (MiB)"] = (high - low) / mb
        low, high = peak_mib(root, files["fifth"], "held"), peak_mib(root, files["yaml"], "held")
        out["  same, report held in memory"] = (high - low) / mb
    if "start" not in skip:
        wall, cpu = small_check(root, cache)
        out["small check (s wall)"] = wall
        out["small check (s CPU)"] = cpu
    return out


def bench_checkov(folder: Path, root: Path, venv: Path) -> None:
    exe = venv / "bin" / "checkov"
    if not exe.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True)
        pip = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "checkov"], capture_output=True, text=True
        )
        if made.returncode or pip.returncode or not exe.exists():
            print(f"checkov: skipped (cannot install: {(pip.stderr or '').strip()[-200:]})")
            return
    subprocess.run([str(exe), "--version"], capture_output=True)  # first start compiles
    argv = [str(exe), "-d", str(folder), "--framework", "kubernetes", "-o", "json", "--quiet"]
    checkov_wall, checkov_cpu, _ = _child_cpu(argv, dict(os.environ), folder)
    ours = [sys.executable, "-m", "gpustrata.cli.app", "check", "--format", "json", str(folder)]
    _, ours_cpu, _ = _child_cpu(ours, _env(root), root)
    print(
        f"checkov: {checkov_cpu:.1f} s CPU ({checkov_wall:.1f} s wall) on the corpus folder; "
        f"gpustrata check {ours_cpu:.1f} s CPU: {ours_cpu / checkov_cpu:.2f}x checkov's"
    )


def _table(results: dict[str, list[dict[str, float]]]) -> None:
    labels = list(results)
    names: list[str] = []
    for rounds in results.values():
        for found in rounds:
            names.extend(n for n in found if n not in names)
    print(f"{'median of rounds':<34}" + "".join(f"{label:>14}" for label in labels))
    for name in names:
        cells = []
        for label in labels:
            values = [r[name] for r in results[label] if name in r]
            cells.append(f"{statistics.median(values):14.2f}" if values else f"{'-':>14}")
        print(f"{name:<34}" + "".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--against", type=Path, help="another checkout, measured alongside")
    parser.add_argument(
        "--checkov-venv",
        type=Path,
        default=Path(tempfile.gettempdir()) / "gpustrata-bench-checkov",
        help="throwaway virtualenv for checkov (created when missing)",
    )
    parser.add_argument("--skip", default="", help="comma-separated: pack,memory,start,checkov")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    roots = {"this": REPO} | ({"against": args.against.resolve()} if args.against else {})
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        docs = corpus(args.objects)
        folder = tmp / "corpus"
        folder.mkdir()
        files = {
            "yaml": folder / "cluster.yaml",
            "json": tmp / "cluster.json",
            "fifth": tmp / "fifth.yaml",
        }
        files["yaml"].write_text(yaml.safe_dump_all(docs, sort_keys=False))
        files["fifth"].write_text(yaml.safe_dump_all(docs[: len(docs) // 5], sort_keys=False))
        # `kubectl get -A -o json`: one List, four-space indentation.
        listed = {"apiVersion": "v1", "kind": "List", "items": docs}
        files["json"].write_text(json.dumps(listed, indent=4))
        mib = files["yaml"].stat().st_size / 2**20
        js_mib = files["json"].stat().st_size / 2**20
        print(f"corpus: {len(docs)} objects, {mib:.1f} MiB YAML, {js_mib:.1f} MiB JSON")
        results: dict[str, list[dict[str, float]]] = {label: [] for label in roots}
        for number in range(args.rounds):
            for label, root in roots.items():
                cache = tmp / f"pyc-{label}"
                found = measure(root, files, docs, args.repeat, skip, cache)
                results[label].append(found)
                shown = ", ".join(f"{k} {v:.2f}" for k, v in found.items())
                print(f"round {number + 1} {label}: {shown}", flush=True)
        _table(results)
        if "checkov" not in skip:
            bench_checkov(folder, REPO, args.checkov_venv)


if __name__ == "__main__":
    main()
