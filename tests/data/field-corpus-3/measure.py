"""Share of "not evaluated" records in `gpustrata check --format json` output.

A record is a finding or a "not evaluated" entry (check's JSON has the two lists
``findings`` and ``not_evaluated``; it lists no passes). This script counts both,
gives the not-evaluated share, and groups the not-evaluated reasons into causes by
keyword (first matching cause wins; edit CAUSES to refine).

Usage (stdlib only):

    gpustrata check tests/data/field-corpus-3 --format json > c3.json
    python3 tests/data/field-corpus-3/measure.py c3.json [more.json ...]

    # per file (a folder check stops at the first invalid file, exit 2):
    for f in tests/data/field-corpus-3/*.yaml; do
      gpustrata check "$f" --format json > "out/$(basename "$f" .yaml).json" 2>"out/$(basename "$f" .yaml).err"
    done
    python3 tests/data/field-corpus-3/measure.py --per-file out/*.json

Several JSON files are summed (use this for per-file runs). Empty or unreadable
JSON (a refused file) is reported as refused and counts no records. ``--per-file``
also prints one line per input. ``--reasons`` prints every reason with its cause.
"""
from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

# (cause, regex on the reason text, case-insensitive). Order matters.
CAUSES: list[tuple[str, str]] = [
    ("kind not read", r"is not one gpustrata reads"),
    ("GPU model unknown", r"GPU model is unknown|GPU is unknown|which GPU|instance type .* not catalogued|instance types the hardware catalogue does not know"),
    ("image not recognised as vLLM / build unknown", r"is not a vLLM image|vLLM build it runs"),
    ("model not catalogued", r"not in the model catalogue|model .* not catalogued"),
    ("controller presets / operator fills values", r"preset|controller chooses|completed by the .* controller|picks its engine"),
    ("vLLM release unknown", r"vLLM release|vLLM version|names no release"),
    ("KubeRay / Ray version", r"KubeRay \d|from KubeRay|rayVersion"),
    ("Serve app with its own code", r"not a Ray Serve LLM application|import_path|custom Serve"),
    ("Ray executor GPUs", r"Ray executor|Ray cluster to join"),
    ("no pool data", r"GpuNodePool is described|GPU pool .* states no|NodePool"),
    ("engine args not visible", r"further flags from outside|\$@|unresolved variables"),
    ("object not in the input", r"not in the input"),
]


def cause_of(reason: str) -> str:
    for name, pattern in CAUSES:
        if re.search(pattern, reason, re.I):
            return name
    return "other"


def load(path: Path) -> dict | None:
    try:
        text = path.read_text(encoding="utf-8")
        data = json.loads(text) if text.strip() else None
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or "findings" not in data:
        return None
    return data


def main(argv: list[str]) -> int:
    per_file = "--per-file" in argv
    show_reasons = "--reasons" in argv
    paths = [Path(a) for a in argv if not a.startswith("--")]
    if not paths:
        print(__doc__)
        return 2
    findings = not_eval = 0
    mandatory = advisory = 0
    causes: Counter[str] = Counter()
    refused: list[str] = []
    for path in paths:
        data = load(path)
        if data is None:
            refused.append(path.name)
            if per_file:
                print(f"{path.stem}: refused (no JSON)")
            continue
        f, n = data.get("findings", []), data.get("not_evaluated", [])
        findings += len(f)
        not_eval += len(n)
        mandatory += sum(1 for x in f if x.get("enforcement") == "mandatory")
        advisory += sum(1 for x in f if x.get("enforcement") != "mandatory")
        for rec in n:
            c = cause_of(rec.get("reason", ""))
            causes[c] += 1
            if show_reasons:
                print(f"  [{c}] {rec.get('rule')} {rec.get('resource')}: {rec.get('reason')}")
        if per_file:
            rules = ",".join(sorted(x.get("rule", "?") for x in f)) or "-"
            print(f"{path.stem}: records {len(f) + len(n)}, not evaluated {len(n)}, findings {len(f)} ({rules})")
    total = findings + not_eval
    share = 100.0 * not_eval / total if total else 0.0
    print(f"records {total} = findings {findings} (mandatory {mandatory}, advisory {advisory}) + not evaluated {not_eval}")
    print(f"not-evaluated share {not_eval}/{total} = {share:.1f} %")
    if refused:
        print(f"refused / no output: {len(refused)}: {', '.join(refused)}")
    for name, count in causes.most_common():
        print(f"  {count:3d}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
