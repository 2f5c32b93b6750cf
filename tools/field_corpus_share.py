"""The share of "not evaluated" records on the field corpora, as docs/field-corpus.md gives it.

Each corpus file is checked on its own (one file, one sample cluster), with the cluster
context its own repository publishes where tests/data/field-corpus-2-context/SOURCES.md
records one (:data:`CONTEXT`); records = findings + "not evaluated" records, as
``gpustrata check --format json`` counts them.

    python tools/field_corpus_share.py            # the share per corpus and overall
    python tools/field_corpus_share.py --records  # and every "not evaluated" record

Run from the repository root with ``../shared`` next to it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_paths

CORPUS_1 = Path("../shared/field-corpus")
CORPUS_2 = Path("tests/data/field-corpus-2")
CONTEXT_ROOT = Path("tests/data/field-corpus-2-context")
CONTEXT = {
    # ai-on-eks's g5/x86 Karpenter NodePools, rendered from its Terraform (SOURCES.md)
    "ai-on-eks-ray-vllm-deepseek.yaml": CONTEXT_ROOT / "ai-on-eks",
    "ai-on-eks-nim-service-llama3-8b.yaml": CONTEXT_ROOT / "ai-on-eks",
    # data-on-eks's jark-stack NodePools, the same way
    "awslabs-data-on-eks-ray-service-vllm.yaml": CONTEXT_ROOT / "data-on-eks",
}


def share(folder: Path, records: bool) -> tuple[int, int]:
    """(not-evaluated records, all records) of the corpus in *folder*."""
    not_evaluated = total = 0
    for path in sorted(folder.glob("*.yaml")):
        context = CONTEXT.get(path.name)
        report = evaluate(
            load_paths([str(path)]), context=load_paths([str(context)]) if context else ()
        )
        not_evaluated += len(report.not_evaluated)
        total += len(report.findings) + len(report.not_evaluated)
        if records:
            for n in report.not_evaluated:
                print(f"  {path.name} | {n.rule} | {n.resource} | {n.reason}")
    return not_evaluated, total


def main() -> None:
    """Print the share per corpus and for both."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", action="store_true", help="list every record")
    args = parser.parse_args()
    sums = [0, 0]
    for folder in (CORPUS_1, CORPUS_2):
        n, t = share(folder, args.records)
        sums[0] += n
        sums[1] += t
        print(f"{folder}: {n} / {t} = {100 * n / t:.1f} %")
    print(f"both: {sums[0]} / {sums[1]} = {100 * sums[0] / sums[1]:.1f} %")


if __name__ == "__main__":
    main()
