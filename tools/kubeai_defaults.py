"""Write components/gpustrata/catalog/data/kubeai-defaults.yaml: the defaults the KubeAI Helm
chart's ``charts/kubeai/values.yaml`` gives the Pods KubeAI builds for a vLLM ``Model``, at
each chart release tag (``helm-chart-kubeai-X.Y.Z``), read from a git mirror of
substratusai/kubeai with ``git show TAG:path``.

Only facts are kept: ``modelServers.VLLM.images`` (the image per ``imageName``, ``default``
when a profile names none or an unknown one) and each ``resourceProfiles`` entry's fields the
controller applies (``ResourceProfile`` in internal/config/system.go: imageName, requests,
limits, nodeSelector, affinity, tolerations, runtimeClassName); and the same facts of the
chart's own values files beside it (``values-gke.yaml``, ``values-eks.yaml`` ...: node
selectors per profile, which an installation opts into with ``-f``). Consecutive releases whose
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
from release_rows import release_rows

FOLDER = "charts/kubeai"
PATH = f"{FOLDER}/values.yaml"
OVERLAY = re.compile(r"^values-[\w.-]+\.yaml$")
PREFIX = "helm-chart-kubeai-"
PROFILE_KEYS = (
    "imageName",
    "requests",
    "limits",
    "nodeSelector",
    "affinity",
    "tolerations",
    "runtimeClassName",
)


def _show(git_dir: str, tag: str, path: str) -> Any:
    text = subprocess.check_output(["git", "--git-dir", git_dir, "show", f"{tag}:{path}"])
    return yaml.safe_load(text) or {}


def _kept(values: Any) -> dict[str, Any]:
    """The facts of one values file: its VLLM images and resource profiles' fields."""
    images = ((values.get("modelServers") or {}).get("VLLM") or {}).get("images")
    profiles = values.get("resourceProfiles")
    out: dict[str, Any] = {}
    if isinstance(images, dict):
        out["vllm_images"] = {str(k): str(v) for k, v in images.items()}
    if isinstance(profiles, dict):
        out["resource_profiles"] = {
            str(name): {k: p[k] for k in PROFILE_KEYS if k in p}
            for name, p in profiles.items()
            if isinstance(p, dict)
        }
    return out


def _facts(git_dir: str, tag: str) -> dict[str, Any] | None:
    base = _kept(_show(git_dir, tag, PATH))
    if set(base) != {"vllm_images", "resource_profiles"}:
        return None
    listing = subprocess.check_output(
        ["git", "--git-dir", git_dir, "ls-tree", "--name-only", tag, f"{FOLDER}/"], text=True
    ).split()
    overlays = {}
    for path in sorted(listing):
        name = path.rsplit("/", 1)[-1]
        if OVERLAY.match(name):
            kept = _kept(_show(git_dir, tag, path))
            if kept:
                overlays[name] = kept
    return {**base, "overlays": overlays}


def main(git_dir: str) -> None:
    rows = release_rows(git_dir, PREFIX, "kubeai", lambda tag: _facts(git_dir, tag))
    head = (
        "# The KubeAI Helm chart's default values that decide the Pod KubeAI builds for a vLLM\n"
        "# Model, per chart release (helm-chart-kubeai-X.Y.Z tags): modelServers.VLLM.images and\n"
        "# resourceProfiles (substratusai/kubeai internal/modelcontroller/model_controller.go\n"
        "# applies a profile's requests and limits times the Model's NAME:COUNT multiple, its\n"
        "# nodeSelector, affinity, tolerations and runtimeClassName, and picks the image by its\n"
        "# imageName, else `default`). `overlays`: the same facts of the chart's own\n"
        "# values-*.yaml files beside values.yaml, which an installation opts into (helm -f).\n"
        "# Facts only; each chart release's were read from `source` (an overlay: the file of\n"
        "# that name in the same folder) with {release} filled in, and the releases of one row\n"
        "# are equal in them.\n"
        "# Written by tools/kubeai_defaults.py; read by catalog/kubeai.py.\n"
    )
    doc = {"source": f"substratusai/kubeai@helm-chart-kubeai-{{release}}:{PATH}", "releases": rows}
    sys.stdout.write(head + yaml.safe_dump(doc, sort_keys=False, width=100))


if __name__ == "__main__":
    main(sys.argv[1])
