"""The share of "not evaluated" records on the field corpora, as docs/field-corpus.md and
docs/field-corpus-3.md give it, in two columns.

Each corpus file is checked on its own (one file, one sample cluster), with the cluster
context its own repository publishes where tests/data/field-corpus-2-context/SOURCES.md
records one (:data:`CONTEXT`); records = findings + "not evaluated" records, as
``gpustrata check --format json`` counts them (check lists no passes). A file that cannot
be read is counted as refused, with no records.

- *without profile*: no cluster profile, as a new user runs ``check`` on the file;
- *with documented profiles*: the file checked with the cluster profile its own repository
  documents (:data:`DOCUMENTED`, tests/data/profiles/documented/, each key citing the README,
  guide or Terraform it was read from); a file whose repository states no cluster fact is
  checked as in the first column.

    python tools/field_corpus_share.py            # both shares per corpus and overall
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
from gpustrata.spec.profile_file import load_profile_file
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
    "ai-on-eks-vllm-rayserve-gpu.yaml": CONTEXT_ROOT / "ai-on-eks",  # corpus 3, same commit
    # data-on-eks's jark-stack NodePools, the same way
    "awslabs-data-on-eks-ray-service-vllm.yaml": CONTEXT_ROOT / "data-on-eks",
    # data-on-eks's `gpu` NodePool at the corpus file's commit (SOURCES.md)
    "data-on-eks-rayservice-deepseek-r1-8b.yaml": CONTEXT_ROOT / "data-on-eks-a546a19",
}
PROFILES = Path("tests/data/profiles/documented")
DOCUMENTED = {
    # corpus file -> the cluster profile its repository documents (sources in each profile)
    "awslabs-ai-on-eks-ministral-8b-vllm.yaml": PROFILES / "ai-on-eks-ministral-8b.yaml",
    "ai-on-eks-nim-service-llama3-8b.yaml": PROFILES / "ai-on-eks-41a979ee.yaml",
    "ai-on-eks-ray-vllm-deepseek.yaml": PROFILES / "ai-on-eks-41a979ee.yaml",
    "ai-on-eks-vllm-rayserve-gpu.yaml": PROFILES / "ai-on-eks-41a979ee.yaml",
    "awslabs-data-on-eks-ray-service-vllm.yaml": PROFILES / "data-on-eks-jark-stack-115b236.yaml",
    "data-on-eks-rayservice-deepseek-r1-8b.yaml": PROFILES / "data-on-eks-ray-batch-inference.yaml",
    "kubeai-llama-3.1-405b-fp8-a100-80gb.yaml": PROFILES / "kubeai-2f32ef4.yaml",
    "kubeai-llama-3.1-70b-fp8-h100.yaml": PROFILES / "kubeai-2f32ef4.yaml",
    "kaito-workspace-gemma-3-27b.yaml": PROFILES / "kaito-056b828.yaml",
    "kaito-inferenceset-mistral-7b.yaml": PROFILES / "kaito-056b828.yaml",
    "kaito-workspace-deepseek-r1.yaml": PROFILES / "kaito-056b828.yaml",
    "kaito-inferenceset-mig-single.yaml": PROFILES / "kaito-056b828.yaml",
    "kaito-workspace-gpt-oss-120b.yaml": PROFILES / "kaito-056b828.yaml",
    "kaito-workspace-llama-3.3-70b.yaml": PROFILES / "kaito-056b828.yaml",
    "kserve-kserve-llmisvc-dp-ep-deepseek-r1.yaml": PROFILES / "kserve-35e18e8.yaml",
}
COLUMNS = ("without profile", "with documented profiles")

CAUSES: tuple[tuple[str, str], ...] = (
    # (cause, pattern on the reason, case-insensitive). A reason is counted under the cause
    # it names first (the earliest match; ties go to the earlier row): a V010 reason that
    # lacks the release and, in brackets, the GPU counts as the release's.
    ("kind not read", r"is not one gpustrata reads"),
    (
        "GPU model unknown: the Pod selects no GPU label (cluster: gpu_products or pools)",
        r"GPU model is unknown(?!.*it selects only)|GPU is unknown|which GPU",
    ),
    (
        "GPU model unknown: it selects only labels naming no catalogued GPU (gpu_products)",
        r"GPU model is unknown(?=.*it selects only)",
    ),
    (
        "GPU model unknown: label or instance type not catalogued",
        r"instance type .* not catalogued|instance types the hardware catalogue does not know"
        r"|not in the hardware catalogue",
    ),
    (
        "GPU model unknown: a family label names several catalogued GPUs (gpu_products)",
        r"the value names a family",
    ),
    (
        "GPU model unknown: bring-your-own nodes (KAITO labelSelector)",
        r"bring-your-own nodes",
    ),
    (
        "vLLM release unknown: moving tag (latest)",
        r"is unpinned \(",
    ),
    (
        "vLLM release unknown: vendor or other publisher's build not mapped",
        r"tagged with the vendor's version|tagged with \w+'s version|build tagged"
        r"|tag '[^']*' names no vLLM release",
    ),
    (
        "vLLM release unknown: image names none (placeholder, variable, digest, plain OS)",
        r"does not name a vLLM version|names no vLLM release",
    ),
    (
        "vLLM release outside the releases read",
        r"outside the releases whose flags were read|engine of vLLM [\w.]+ was not read",
    ),
    ("image not recognised as vLLM / build unknown", r"is not a vLLM image|vLLM build it runs"),
    ("model not catalogued", r"not in the model catalogue|model '[^']+' is not catalogued"),
    (
        "KAITO preset: release not stated (image, engine layout per release)",
        r"^KAITO preset '[^']+': the KAITO controller builds.*differs across those releases",
    ),
    (
        "controller presets / operator fills values",
        # not the label of an engine KServe's preset writes ("the KServe preset's vLLM
        # command (template...): <reason>"): its reason is the cause
        r"preset(?!'s vLLM command \()|controller chooses|completed by the .* controller"
        r"|picks its engine|controller builds|kthena builds|resourceProfile",
    ),
    (
        "the controller's installation sets it (KubeAI image, tolerations)",
        r"is set by the [\w ]*installation|is set by the llmaz BackendRuntime"
        r"|differs across the KubeAI chart releases|differs? across the catalogued llmaz releases"
        r"|unknown until the deployment runs",
    ),
    (
        "framework worker, not vLLM's CLI (Dynamo)",
        r"Dynamo's workers mix",
    ),
    (
        "ServingRuntime template: GPUs come from its InferenceService",
        r"ServingRuntime template",
    ),
    (
        "KubeRay release's minimum Ray not catalogued (R004)",
        r"documents no minimum Ray version",
    ),
    (
        "KubeRay ignores the field (decided by the KubeRay release)",
        r"KubeRay \d|from KubeRay|rayVersion",
    ),
    ("Serve app with its own code", r"not a Ray Serve LLM application|import_path|custom Serve"),
    ("Ray executor GPUs", r"Ray executor|Ray cluster it joins"),
    ("no pool data", r"GpuNodePool|GPU pool .* states no|NodePool"),
    ("engine args not visible", r"further flags from outside|\$@|unresolved variables"),
    (
        "the planner does not model it (expert parallelism across data-parallel ranks)",
        r"is not modelled",
    ),
    ("object only the cluster holds (ServiceAccount)", r"not in the input \(it may exist"),
)


def cause_of(reason: str) -> str:
    """The cause group of a "not evaluated" reason (:data:`CAUSES`): the one it names first,
    or ``other``."""
    found = [
        (m.start(), i, name)
        for i, (name, pattern) in enumerate(CAUSES)
        if (m := re.search(pattern, reason, re.IGNORECASE))
    ]
    return min(found)[2] if found else "other"


def share(
    folder: Path, documented: bool, records: bool, causes: Counter[str]
) -> tuple[int, int, list[str]]:
    """(not-evaluated records, all records, refused files) of the corpus in *folder*, with
    the repositories' documented profiles when *documented*."""
    not_evaluated = total = 0
    refused: list[str] = []
    for path in sorted(folder.glob("*.yaml")):
        context = CONTEXT.get(path.name)
        profile_file = DOCUMENTED.get(path.name) if documented else None
        try:
            objects = load_paths([str(path)])
        except InputError as exc:
            refused.append(f"{path.name}: {exc}")
            continue
        report = evaluate(
            objects,
            context=load_paths([str(context)]) if context else (),
            profile=load_profile_file(profile_file) if profile_file else None,
            profile_file=str(profile_file) if profile_file else None,
        )
        not_evaluated += len(report.not_evaluated)
        total += len(report.findings) + len(report.not_evaluated)
        for n in report.not_evaluated:
            cause = cause_of(n.reason)
            causes[cause] += 1
            if records:
                print(f"  {path.name} | {n.rule} | {n.resource} | {cause} | {n.reason}")
    return not_evaluated, total, refused


def _pct(n: int, t: int) -> str:
    return f"{n} / {t} = {100 * n / max(t, 1):.1f} %"


def main() -> None:
    """Print both shares per corpus and for all."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", action="store_true", help="list every record")
    parser.add_argument("--causes", action="store_true", help="count the causes per corpus")
    args = parser.parse_args()
    sums = [[0, 0], [0, 0]]
    for folder in CORPORA:
        shares = []
        for column, documented in enumerate((False, True)):
            causes: Counter[str] = Counter()
            if args.records:
                print(f"{folder} ({COLUMNS[column]}):")
            n, t, refused = share(folder, documented, args.records, causes)
            sums[column][0] += n
            sums[column][1] += t
            shares.append((n, t, refused, causes))
        (n0, t0, refused, causes0), (n1, t1, _, causes1) = shares
        print(f"{folder}: {COLUMNS[0]} {_pct(n0, t0)}; {COLUMNS[1]} {_pct(n1, t1)}")
        for line in refused:
            print(f"  refused {line}")
        if args.causes:
            for cause in sorted({*causes0, *causes1}, key=lambda c: (-causes0[c], c)):
                print(f"  {causes0[cause]:4d} {causes1[cause]:4d}  {cause}")
    (n0, t0), (n1, t1) = sums
    print(f"all: {COLUMNS[0]} {_pct(n0, t0)}; {COLUMNS[1]} {_pct(n1, t1)}")


if __name__ == "__main__":
    main()
