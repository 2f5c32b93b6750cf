"""Speed of `gpustrata check` against the speed of parsing its input (issue 18).

    python benchmarks/bench_check.py [--objects 5000] [--skip 50mb,checkov,...]

One run reports:

- **corpus**: about 5,000 real-shaped objects (the field corpus and every rule fixture,
  replicated, each copy in its own namespace so its HPAs, PDBs and Services still point
  at its workloads; node pools, operators and other cluster-wide objects once), written
  as one multi-document YAML file and as the ``kind: List`` that ``kubectl get -A -o
  json`` prints. For each: the parse-only time (libyaml's ``CSafeLoader`` for YAML,
  ``json.loads`` for JSON), the check time (``gpustrata check --format json`` in this
  warm interpreter: reading, line numbers, every rule, the JSON report) and their ratio.
  Targets: YAML check / YAML parse <= 1.5; JSON check / YAML parse < 0.75.
- **pod**: one Pod with 2,000 GPU containers (about 100 KB). Target: < 2 s.
- **pack**: the CrossGuard pack's AnalyzeStack over gRPC (the pack started as
  ``pulumi preview --policy-pack`` starts it) with 500 / 1,000 / 2,000 / 5,000 resources
  from the same corpus. Target: 5,000 within 1.2x of 5x the time at 1,000.
- **50mb**: ``benchmarks/bench_large_input.py``'s 50 MB Helm-style YAML and JSON List,
  each checked by a fresh interpreter (time, peak RSS).
- **checkov**: checkov on the corpus folder, for the ratio; installed into its own
  throwaway virtualenv under /tmp (skipped when it cannot be installed).

Each in-process time is the best of ``--repeat`` runs in CPU seconds (the machine may be
shared); fresh interpreters and checkov are timed by the wall clock.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "components"), str(REPO / "policies"), str(REPO / "benchmarks")]

from gpustrata.cli.check import check_command  # noqa: E402
from gpustrata.core.yamlio import SAFE_LOADER  # noqa: E402

FIELD_CORPUS = REPO.parent / "shared" / "field-corpus"
# Every rule folder's good-*.yaml and bad-*.yaml fixtures (not its expected.yaml).
FIXTURES = sorted(
    p
    for kind in ("good", "bad")
    for p in (REPO / "policies" / "gpustrata_policies" / "rules").glob(f"*/{kind}-*.yaml")
)
# What a cluster has once, not once per workload.
CLUSTER_WIDE = frozenset(
    {"GpuNodePool", "GpuOperator", "HelmRelease", "ClusterPolicy", "Namespace", "Node"}
    | {"NodePool", "EC2NodeClass", "NVIDIADriver", "DeviceClass"}
    | {"ClusterServingRuntime", "ClusterRole", "ClusterRoleBinding"}
)
Doc = dict[str, Any]


def _sources() -> list[Path]:
    field = sorted(FIELD_CORPUS.glob("*.yaml")) if FIELD_CORPUS.is_dir() else []
    return [*field, *FIXTURES]


def corpus(n: int) -> list[Doc]:
    """About *n* objects: cluster-wide objects once, then the rest replicated by namespace."""
    once: dict[tuple[str, str], Doc] = {}
    groups: list[list[Doc]] = []
    for path in _sources():
        docs = [d for d in yaml.load_all(path.read_text(), SAFE_LOADER) if isinstance(d, dict)]
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


def best(fn: Callable[[], object], repeat: int) -> float:
    """Fastest of *repeat* calls, in CPU seconds of this process (the machine may be
    shared: CPU time is what the work costs, wall time what the neighbours leave)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def run_check(path: Path) -> int:
    """`gpustrata check --format json PATH` in this interpreter; its exit code."""
    args = argparse.Namespace(paths=[str(path)], config=None, environment="prod", format="json")
    return check_command(args, out=io.StringIO())


def bench_corpus(tmp: Path, n: int, repeat: int) -> tuple[Path, list[Doc]]:
    docs = corpus(n)
    folder = tmp / "corpus"
    folder.mkdir()
    yaml_path, json_path = folder / "cluster.yaml", tmp / "cluster.json"
    yaml_path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    # `kubectl get -A -o json`: one List, four-space indentation.
    json_path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}, indent=4))
    yaml_text, json_text = yaml_path.read_text(), json_path.read_text()
    run_check(FIXTURES[0])  # imports, catalogues and rules loaded once
    parse_yaml = best(lambda: list(yaml.load_all(yaml_text, SAFE_LOADER)), repeat)
    parse_json = best(lambda: json.loads(json_text), repeat)
    check_yaml = best(lambda: run_check(yaml_path), repeat)
    check_json = best(lambda: run_check(json_path), repeat)
    mib = yaml_path.stat().st_size / 2**20
    js_mib = json_path.stat().st_size / 2**20
    print(f"corpus: {len(docs)} objects, {mib:.1f} MiB YAML, {js_mib:.1f} MiB JSON")
    print(f"  YAML parse only       {parse_yaml:7.2f} s")
    ratio = check_yaml / parse_yaml
    print(f"  YAML check            {check_yaml:7.2f} s   {ratio:5.2f}x YAML parse (target <= 1.5)")
    print(f"  JSON parse only       {parse_json:7.2f} s")
    ratio = check_json / parse_yaml
    print(f"  JSON check            {check_json:7.2f} s   {ratio:5.2f}x YAML parse (target < 0.75)")
    rate = len(docs) / max(check_yaml - parse_yaml, 1e-9)
    print(f"  evaluation rate       {rate:7,.0f} objects/s beyond parsing (YAML)")
    return folder, docs


def bench_pod(tmp: Path, repeat: int) -> None:
    containers = [
        {
            "name": f"c{i}",
            "image": "vllm/vllm-openai:v0.8.5",
            "resources": {"limits": {"nvidia.com/gpu": 1}},
        }
        for i in range(2000)
    ]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "wide"},
        "spec": {"containers": containers},
    }
    path = tmp / "wide-pod.yaml"
    path.write_text(yaml.safe_dump(pod, sort_keys=False))
    took = best(lambda: run_check(path), repeat)
    kib = path.stat().st_size / 1024
    print(f"pod: 2,000 GPU containers ({kib:.0f} KiB): check {took:.2f} s (target < 2)")


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


def bench_pack(docs: list[Doc], sizes: list[int]) -> None:
    """AnalyzeStack of the pack started as ``pulumi preview --policy-pack`` starts it."""
    try:
        import grpc  # type: ignore[import-untyped]
        from google.protobuf import struct_pb2
        from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc
    except ImportError as exc:
        print(f"pack: skipped ({exc})")
        return
    items = [d for d in docs if isinstance(d.get("kind"), str) and d.get("apiVersion")]
    env = {
        **os.environ,
        "GPUSTRATA_ENVIRONMENT": "prod",
        "PYTHONPATH": f"{REPO / 'components'}:{REPO / 'policies'}",
    }
    argv = [sys.executable, "-m", "pulumi.policy", "127.0.0.1:1", "policies"]
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
    times: dict[int, float] = {}
    try:
        assert proc.stdout is not None
        port = proc.stdout.readline().strip()
        # The diagnostics of 5,000 resources exceed gRPC's default 4 MiB reply.
        options = [("grpc.max_receive_message_length", -1)]
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=options)
        grpc.channel_ready_future(channel).result(timeout=60)
        analyzer = analyzer_pb2_grpc.AnalyzerStub(channel)
        for n in sizes:
            resources = []
            for i, obj in enumerate(items[:n]):
                token = _token(obj)
                props = {"description": obj} if token.startswith("gpustrata:") else obj
                s = struct_pb2.Struct()
                s.update(json.loads(json.dumps(props)))
                name = f"r{i}"
                urn = f"urn:pulumi:prod::bench::{token}::{name}"
                resources.append(
                    analyzer_pb2.AnalyzerResource(type=token, properties=s, urn=urn, name=name)
                )
            request = analyzer_pb2.AnalyzeStackRequest(resources=resources)
            cpu = _cpu_seconds(proc.pid)
            start = time.perf_counter()
            reply = analyzer.AnalyzeStack(request, timeout=1800)
            wall = time.perf_counter() - start
            after = _cpu_seconds(proc.pid)
            used = after - cpu if cpu is not None and after is not None else None
            times[n] = used if used is not None else wall
            shown = f"{used:7.2f} s CPU, " if used is not None else ""
            print(
                f"pack: AnalyzeStack {n:>5} resources {shown}{wall:7.2f} s wall, "
                f"{len(reply.diagnostics)} diagnostics"
            )
        channel.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    if 1000 in times and 5000 in times:
        ratio = times[5000] / (5 * times[1000])
        print(f"pack: 5,000 / (5 x 1,000) = {ratio:.2f} (target <= 1.2)")


def bench_50mb(tmp: Path) -> None:
    import bench_large_input as large

    yaml_path, json_path, count = large.write_inputs(tmp, 50)
    # The fresh interpreters must import this checkout, not an installed gpustrata.
    os.environ["PYTHONPATH"] = f"{REPO / 'components'}:{REPO / 'policies'}"
    for label, path in (("YAML", yaml_path), ("JSON", json_path)):
        code, took, peak = large.check(str(path))
        mib = path.stat().st_size / 2**20
        print(
            f"50mb: {label} ({count} objects, {mib:.0f} MiB), fresh interpreter: "
            f"exit {code} {took:6.1f} s, peak RSS {peak:5.0f} MiB"
        )


def bench_checkov(folder: Path, gpustrata_s: float | None, venv: Path) -> None:
    exe = venv / "bin" / "checkov"
    if not exe.exists():
        made = subprocess.run([sys.executable, "-m", "venv", str(venv)], capture_output=True)
        pip = subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "checkov"], capture_output=True, text=True
        )
        if made.returncode or pip.returncode or not exe.exists():
            print(f"checkov: skipped (cannot install: {(pip.stderr or '').strip()[-200:]})")
            return
    argv = [str(exe), "-d", str(folder), "--framework", "kubernetes", "-o", "json", "--quiet"]
    subprocess.run([str(exe), "--version"], capture_output=True)  # first start compiles
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, timeout=1800)
    took = time.perf_counter() - start
    ratio = f", {took / gpustrata_s:.1f}x gpustrata's cold check" if gpustrata_s else ""
    print(f"checkov: same folder {took:6.1f} s{ratio}")


def cold_check(folder: Path) -> float:
    """`gpustrata check` on *folder* in a fresh interpreter, seconds."""
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'components'}:{REPO / 'policies'}"}
    argv = [sys.executable, "-m", "gpustrata.cli.app", "check", "--format", "json", str(folder)]
    start = time.perf_counter()
    subprocess.run(argv, env=env, capture_output=True, check=False)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--checkov-venv",
        type=Path,
        default=Path(tempfile.gettempdir()) / "gpustrata-bench-checkov",
        help="throwaway virtualenv for checkov (created when missing)",
    )
    parser.add_argument("--skip", default="", help="comma-separated: corpus,pod,pack,50mb,checkov")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        folder, docs = bench_corpus(tmp, args.objects, args.repeat)
        if "pod" not in skip:
            bench_pod(tmp, args.repeat)
        if "pack" not in skip:
            bench_pack(docs, [500, 1000, 2000, 5000])
        if "50mb" not in skip:
            bench_50mb(tmp)
        if "checkov" not in skip:
            cold = cold_check(folder)
            print(f"cold: gpustrata check on the corpus folder, fresh interpreter {cold:.1f} s")
            bench_checkov(folder, cold, args.checkov_venv)


if __name__ == "__main__":
    main()
