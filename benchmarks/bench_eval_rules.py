"""The evaluation's CPU time and each rule's share, for one or more checkouts alternated
in fresh interpreters (issue 35, session 22).

    python benchmarks/bench_eval_rules.py [ROOT ...] [--rounds 4] [--objects 5000]

Writes ``bench_check.py``'s GPU-dense corpus as YAML once, then per round and per checkout
(default: this one) starts an interpreter with that checkout first on the path, reads the
objects once, and prints the best of 3 ``evaluate`` calls in CPU seconds, then one more
evaluation with each rule's checks timed (the facts a rule is the first to ask for are
charged to it). On a shared machine two checkouts of the same code differ by up to 10 % a
round: compare medians over rounds, and a change of a few percent only in-process.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_check import REPO, corpus

_CHILD = r"""
import collections, dataclasses, json, sys, time
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.evaluate import all_rules, evaluate
objs = load_paths([sys.argv[1]])
evaluate(objs)  # imports, catalogues
best = float("inf")
for _ in range(3):
    start = time.process_time()
    evaluate(objs)
    best = min(best, time.process_time() - start)
spent = collections.Counter()
def timed(rule):
    rule_id, check = rule.meta.id, rule.check
    def run(ctx, obj):
        start = time.process_time()
        try:
            return list(check(ctx, obj))
        finally:
            spent[rule_id] += time.process_time() - start
    return dataclasses.replace(rule, check=run)
evaluate(objs, rules=[timed(r) for r in all_rules()])
print(json.dumps({"evaluate": best, **spent}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("roots", nargs="*", type=Path, default=[REPO])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--objects", type=int, default=5000)
    parser.add_argument("--top", type=int, default=10, help="rules shown, by time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.yaml"
        path.write_text(yaml.safe_dump_all(corpus(args.objects), sort_keys=False))
        found: dict[Path, list[dict[str, float]]] = {root: [] for root in args.roots}
        for _ in range(args.rounds):
            for root in args.roots:
                env = {**os.environ, "PYTHONPATH": f"{root / 'components'}:{root / 'policies'}"}
                argv = [sys.executable, "-c", _CHILD, str(path)]
                out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True)
                found[root].append(json.loads(out.stdout.strip().splitlines()[-1]))
    first = found[args.roots[0]]
    rules = sorted(
        (k for k in first[0] if k != "evaluate"),
        key=lambda k: -statistics.median(r[k] for r in first),
    )
    for key in ["evaluate", *rules[: args.top]]:
        cells = []
        for root, rounds in found.items():
            ms = [r.get(key, 0.0) * 1000 for r in rounds]
            shown = " / ".join(f"{m:.0f}" for m in ms)
            cells.append(f"{root.name}: {shown} (median {statistics.median(ms):.0f}) ms")
        print(f"{key:<9} " + "   ".join(cells))


if __name__ == "__main__":
    main()
