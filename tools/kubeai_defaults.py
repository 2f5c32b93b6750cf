"""Write components/gpustrata/catalog/data/kubeai-defaults.yaml: the defaults the KubeAI Helm
chart's ``charts/kubeai/values.yaml`` gives the Pods KubeAI builds for a vLLM ``Model``, at
each chart release tag (``helm-chart-kubeai-X.Y.Z``), read from a git mirror of
substratusai/kubeai with ``git show TAG:path``.

Only facts are kept: ``modelServers.VLLM.images`` (the image per ``imageName``, ``default``
when a profile names none or an unknown one) and each ``resourceProfiles`` entry's fields the
controller applies (``ResourceProfile`` in internal/config/system.go: imageName, requests,
limits, nodeSelector, affinity, tolerations, runtimeClassName). Consecutive releases whose
facts are equal share a row; each release cites its own tag (``source`` at the top).

    python tools/kubeai_defaults.py KUBEAI_GIT_DIR \
        > components/gpustrata/catalog/data/kubeai-defaults.yaml
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import yaml

PATH = "charts/kubeai/values.yaml"
TAG = re.compile(r"^helm-chart-kubeai-(\d+)\.(\d+)\.(\d+)$")
PROFILE_KEYS = (
    "imageName",
    "requests",
    "limits",
    "nodeSelector",
    "affinity",
    "tolerations",
    "runtimeClassName",
)


def _tags(git_dir: str) -> list[str]:
    out = subprocess.check_output(["git", "--git-dir", git_dir, "tag"], text=True).split()
    found = [(tuple(int(p) for p in m.groups()), t) for t in out if (m := TAG.match(t))]
    return [t for _, t in sorted(found)]


def _facts(git_dir: str, tag: str) -> dict[str, Any] | None:
    text = subprocess.check_output(["git", "--git-dir", git_dir, "show", f"{tag}:{PATH}"])
    values = yaml.safe_load(text) or {}
    images = ((values.get("modelServers") or {}).get("VLLM") or {}).get("images")
    profiles = values.get("resourceProfiles")
    if not isinstance(images, dict) or not isinstance(profiles, dict):
        return None
    return {
        "vllm_images": {str(k): str(v) for k, v in images.items()},
        "resource_profiles": {
            str(name): {k: p[k] for k in PROFILE_KEYS if k in p}
            for name, p in profiles.items()
            if isinstance(p, dict)
        },
    }


def main(git_dir: str) -> None:
    rows: list[dict[str, Any]] = []
    for tag in _tags(git_dir):
        facts = _facts(git_dir, tag)
        if facts is None:
            continue
        version = tag.removeprefix("helm-chart-kubeai-")
        if rows and {k: rows[-1][k] for k in facts} == facts:
            rows[-1]["kubeai"].append(version)
            continue
        rows.append({"kubeai": [version], **facts})
    head = (
        "# The KubeAI Helm chart's default values that decide the Pod KubeAI builds for a vLLM\n"
        "# Model, per chart release (helm-chart-kubeai-X.Y.Z tags): modelServers.VLLM.images and\n"
        "# resourceProfiles (substratusai/kubeai internal/modelcontroller/model_controller.go\n"
        "# applies a profile's requests and limits times the Model's NAME:COUNT multiple, its\n"
        "# nodeSelector, affinity, tolerations and runtimeClassName, and picks the image by its\n"
        "# imageName, else `default`). Facts only; each chart release's were read from `source`\n"
        "# with {release} filled in, and the releases of one row are equal in them. Written by\n"
        "# tools/kubeai_defaults.py; read by catalog/kubeai.py.\n"
    )
    doc = {"source": f"substratusai/kubeai@helm-chart-kubeai-{{release}}:{PATH}", "releases": rows}
    sys.stdout.write(head + yaml.safe_dump(doc, sort_keys=False, width=100))


if __name__ == "__main__":
    main(sys.argv[1])
