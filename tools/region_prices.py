"""Generate catalog/data/instance-regions.yaml: per-region on-demand prices of the catalogued
AWS and Azure instance types, from the same Karpenter pricing files (at the same commits)
that catalog/data/instances.yaml cites for its single-region prices.

A one-off extraction, documented here so it can be repeated: each file is a Go map literal
with one map per region, ``"REGION": { "TYPE": PRICE, ... }`` (AWS) or
``initialOnDemandPrices["REGION"] = map[string]float64{ "TYPE": PRICE, ... }`` (Azure); a
regex finds the region headers and the ``"TYPE": PRICE`` pairs between them. Only the types
instances.yaml catalogues are written. AWS's China file (cn-north-1) is skipped: its prices
are in CNY, not USD. GCP has no such per-region source, so GCP types get no entry. Usage::

    python tools/region_prices.py \
        /work/.mirror/aws+karpenter-provider-aws/repo \
        /work/.mirror/Azure+karpenter-provider-azure/repo \
        > components/gpustrata/catalog/data/instance-regions.yaml
"""

from __future__ import annotations

import re
import subprocess
import sys
from datetime import date
from pathlib import Path

import yaml

AWS_COMMIT = "1d927085dd81a9df9301e613f371dac5b4d16bfe"
AZURE_COMMIT = "352646f599290c3a6d2f9710fb535a7b288f88ed"
_PRICING = "pkg/providers/pricing/"
_AWS = "aws/karpenter-provider-aws"
FILES = (
    ("aws", _AWS, AWS_COMMIT, _PRICING + "zz_generated.pricing_aws.go"),
    ("aws", _AWS, AWS_COMMIT, _PRICING + "zz_generated.pricing_aws_us_gov.go"),
    ("azure", "Azure/karpenter-provider-azure", AZURE_COMMIT, _PRICING + "zz_generated.pricing.go"),
)  # fmt: skip
_HEADER = re.compile(
    r'^\s*(?:"(?P<aws>[a-z0-9-]+)":\s*\{|initialOnDemandPrices\["(?P<az>[a-z0-9]+)"\]\s*=)',
    re.MULTILINE,
)
_PAIR = re.compile(r'"([A-Za-z0-9_.-]+)":\s*([0-9.]+)')
_GENERATED = re.compile(r"// generated at (\d{4}-\d\d-\d\d)T")
INSTANCES = Path("components/gpustrata/catalog/data/instances.yaml")


def region_maps(text: str) -> dict[str, dict[str, float]]:
    """Region -> type -> USD/h of one Go pricing file."""
    heads = list(_HEADER.finditer(text))
    out: dict[str, dict[str, float]] = {}
    for h, nxt in zip(heads, [*heads[1:], None], strict=True):
        body = text[h.end() : nxt.start() if nxt else len(text)]
        out[h["aws"] or h["az"]] = {k: float(v) for k, v in _PAIR.findall(body)}
    return out


def main(aws_git: str, azure_git: str) -> str:
    """The YAML text of instance-regions.yaml."""
    catalogued = yaml.safe_load(INSTANCES.read_text("utf-8"))["instances"]
    gits = {"aws": aws_git, "azure": azure_git}
    sources = []
    prices: dict[str, dict[str, float]] = {}
    for provider, repo, commit, path in FILES:
        text = subprocess.run(
            ["git", "--git-dir", gits[provider], "show", f"{commit}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        found = _GENERATED.search(text)
        assert found, f"{path}: no 'generated at' line"
        maps = region_maps(text)
        sources.append(
            {
                "provider": provider,
                "source": f"{repo}@{commit}:{path}",
                "read_on": date.fromisoformat(found[1]),
                "regions": sorted(maps),
            }
        )
        for inst in catalogued:
            name = inst["name"]
            if inst["provider"] != provider:
                continue
            for region, table in maps.items():
                if name in table:
                    prices.setdefault(name, {})[region] = table[name]
    head = (
        "# Per-region on-demand list prices (USD per instance-hour, Linux) of the AWS and Azure\n"
        "# instance types in instances.yaml, written by tools/region_prices.py from the Karpenter\n"
        "# pricing files instances.yaml cites, at the same commits (each source's read_on is\n"
        "# the file's own 'generated at' date). A type absent from a region's map is not\n"
        "# offered there as far as that file says. AWS's cn-north-1 file is skipped (CNY).\n"
        "# GCP: no per-region source, so no GCP type appears here.\n"
    )
    doc = {
        "sources": sources,
        "instance_regions": {n: dict(sorted(r.items())) for n, r in sorted(prices.items())},
    }
    return head + yaml.safe_dump(doc, sort_keys=False, width=100)


if __name__ == "__main__":
    sys.stdout.write(main(sys.argv[1], sys.argv[2]))
