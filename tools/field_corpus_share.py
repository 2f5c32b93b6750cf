"""The share of "not evaluated" records on the field corpora, as docs/field-corpus.md and
docs/field-corpus-3.md give it.

Each corpus file is checked on its own (one file, one sample cluster), with the cluster
context its own repository publishes where tests/data/field-corpus-2-context/SOURCES.md
records one (:data:`CONTEXT`); records = findings + "not evaluated" records, as
``gpustrata check --format json`` counts them (check lists no passes). A file that cannot
be read is counted as refused, with no records.

    python tools/field_corpus_share.py            # the share per corpus and overall
    python tools/field_corpus_share.py --causes   # and the not-evaluated causes per corpus
    python tools/field_corpus_share.py --records  # and every "not evaluated" record

Run from the repository root.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from gpustrata.core.errors import InputError
from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_paths

CORPORA = (
    Path("tests/data/field-corpus-1"),
    Path("tests/data/field-corpus-2"),
    Path("tests/data/field-corpus-3"),
)
CONTEXT_ROOT = Path("tests/data/field-corpus-2-context")
CONTEXT = {
    # ai-on-eks's g5/x86 Karpenter NodePools, rendered from its Terraform (SOURCES.md)
    "ai-on-eks-ray-vllm-deepseek.yaml": CONTEXT_ROOT / "ai-on-eks",
    "ai-on-eks-nim-service-llama3-8b.yaml": CONTEXT_ROOT / "ai-on-eks",
    # data-on-eks's jark-stack NodePools, the same way
    "awslabs-data-on-eks-ray-service-vllm.yaml": CONTEXT_ROOT / "data-on-eks",
}
CAUSES: tuple[tuple[str, str], ...] = (
    # (cause, pattern on the reason, case-insensitive); the first match wins
    ("kind not read", r"is not one gpustrata reads"),
    (
        "GPU model unknown",
        r"GPU model is unknown|GPU is unknown|which GPU|instance type .* not catalogued"
        r"|instance types the hardware catalogue does not know|not in the hardware catalogue",
    ),
    ("image not recognised as vLLM / build unknown", r"is not a vLLM image|vLLM build it runs"),
    ("model not catalogued", r"not in the model catalogue|model .* not catalogued"),
    (
        "controller presets / operator fills values",
        r"preset|controller chooses|completed by the .* controller|picks its engine",
    ),
    ("vLLM release unknown", r"vLLM release|vLLM version|names no release"),
    ("KubeRay / Ray version", r"KubeRay \d|from KubeRay|rayVersion"),
    ("Serve app with its own code", r"not a Ray Serve LLM application|import_path|custom Serve"),
    ("Ray executor GPUs", r"Ray executor|Ray cluster it joins"),
    ("no pool data", r"GpuNodePool|GPU pool .* states no|NodePool"),
    ("engine args not visible", r"further flags from outside|\$@|unresolved variables"),
)


def cause_of(reason: str) -> str:
    """The cause group of a "not evaluated" reason (:data:`CAUSES`), or ``other``."""
    for name, pattern in CAUSES:
        if re.search(pattern, reason, re.IGNORECASE):
            return name
    return "other"


def share(folder: Path, records: bool, causes: Counter[str]) -> tuple[int, int, list[str]]:
    """(not-evaluated records, all records, refused files) of the corpus in *folder*."""
    not_evaluated = total = 0
    refused: list[str] = []
    for path in sorted(folder.glob("*.yaml")):
        context = CONTEXT.get(path.name)
        try:
            objects = load_paths([str(path)])
        except InputError as exc:
            refused.append(f"{path.name}: {exc}")
            continue
        report = evaluate(objects, context=load_paths([str(context)]) if context else ())
        not_evaluated += len(report.not_evaluated)
        total += len(report.findings) + len(report.not_evaluated)
        for n in report.not_evaluated:
            causes[cause_of(n.reason)] += 1
            if records:
                print(f"  {path.name} | {n.rule} | {n.resource} | {n.reason}")
    return not_evaluated, total, refused


def main() -> None:
    """Print the share per corpus and for all."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", action="store_true", help="list every record")
    parser.add_argument("--causes", action="store_true", help="count the causes per corpus")
    args = parser.parse_args()
    sums = [0, 0]
    for folder in CORPORA:
        causes: Counter[str] = Counter()
        n, t, refused = share(folder, args.records, causes)
        sums[0] += n
        sums[1] += t
        print(f"{folder}: {n} / {t} = {100 * n / max(t, 1):.1f} %")
        for line in refused:
            print(f"  refused {line}")
        if args.causes:
            for cause, count in causes.most_common():
                print(f"  {count:4d}  {cause}")
    print(f"all: {sums[0]} / {sums[1]} = {100 * sums[0] / max(sums[1], 1):.1f} %")


if __name__ == "__main__":
    main()
