"""Write components/gpustrata/catalog/data/kserve-presets.yaml: the facts of KServe's
well-known LLMInferenceServiceConfig presets (config/llmisvcconfig/) at each release tag
(``vX.Y.Z`` with that folder: 0.16.0 on), read from a git mirror of kserve/kserve with
``git show TAG:path``; consecutive releases with equal facts share a row
(tools/release_rows.py), each preset citing the row's first release.

Only facts are kept, never the preset's script: per Pod part, the ``main`` container's
image, ports, probes (their ``scheme`` is a Go template on KServe's TLS setting: left out,
so HTTP) and the mounts of its emptyDir volumes, those volumes, and the Pod's
terminationGracePeriodSeconds. The command line is read by
``gpustrata_policies.view.kserve_llmisvc.llmisvc_engine`` as the preset writes it.

    python tools/kserve_presets.py KSERVE_GIT_DIR \
        > components/gpustrata/catalog/data/kserve-presets.yaml
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import yaml
from release_rows import release_rows

FILES = (
    "config-llm-template.yaml",
    "config-llm-worker-data-parallel.yaml",
    "config-llm-decode-template.yaml",
    "config-llm-decode-worker-data-parallel.yaml",
    "config-llm-prefill-template.yaml",
    "config-llm-prefill-worker-data-parallel.yaml",
)
PARTS = (("template",), ("worker",), ("prefill", "template"), ("prefill", "worker"))
_CONTAINER_KEYS = ("image", "ports", "livenessProbe", "readinessProbe", "startupProbe")


def _pod(pod: Any) -> dict[str, Any] | None:
    if not isinstance(pod, dict):
        return None
    empty = {v["name"]: v for v in pod.get("volumes") or [] if "emptyDir" in v}
    out: dict[str, Any] = {}
    for c in pod.get("containers") or []:
        if c.get("name") != "main":
            continue
        main: dict[str, Any] = {"name": "main"}
        for key in _CONTAINER_KEYS:
            if key in c:
                value = c[key]
                if key.endswith("Probe") and "httpGet" in value:
                    value = {
                        **value,
                        "httpGet": {k: v for k, v in value["httpGet"].items() if k != "scheme"},
                    }
                main[key] = value
        mounts = [m for m in c.get("volumeMounts") or [] if m.get("name") in empty]
        if mounts:
            main["volumeMounts"] = mounts
        out["containers"] = [main]
    if empty:
        out["volumes"] = list(empty.values())
    if "terminationGracePeriodSeconds" in pod:
        out["terminationGracePeriodSeconds"] = pod["terminationGracePeriodSeconds"]
    return out


def _facts(git_dir: str, tag: str) -> dict[str, Any] | None:
    """The presets of one release tag; None where it has no config/llmisvcconfig."""
    presets = []
    for name in FILES:
        path = f"config/llmisvcconfig/{name}"
        try:
            text = subprocess.check_output(
                ["git", "--git-dir", git_dir, "show", f"{tag}:{path}"], stderr=subprocess.DEVNULL
            )
        except subprocess.CalledProcessError:
            return None
        doc = yaml.safe_load(text)
        spec = doc["spec"]
        parts = {}
        for part in PARTS:
            node: Any = spec
            for key in part:
                node = node.get(key) if isinstance(node, dict) else None
            facts = _pod(node)
            if facts:
                parts[".".join(part)] = facts
        presets.append({"name": doc["metadata"]["name"], "path": path, "parts": parts})
    return {"presets": presets}


def main(git_dir: str) -> None:
    releases = release_rows(git_dir, "v", "kserve", lambda tag: _facts(git_dir, tag))
    for row in releases:  # each preset cites the first release of its row
        row["presets"] = [
            {
                "name": p["name"],
                "source": f"kserve/kserve@v{row['kserve'][0]}:{p['path']}",
                "parts": p["parts"],
            }
            for p in row["presets"]
        ]
    head = (
        "# KServe's well-known LLMInferenceServiceConfig presets per release: what the controller\n"
        "# merges under an LLMInferenceService's own spec (kserve/kserve@v0.20.0:pkg/controller/\n"
        "# v1alpha2/llmisvc/config_merge.go combineBaseRefsConfig). Facts only (image, ports,\n"
        "# probes, emptyDir volumes and their mounts, terminationGracePeriodSeconds), each preset\n"
        "# citing the file it was read from; written by tools/kserve_presets.py. Read by\n"
        "# catalog/kserve.py.\n"
    )
    sys.stdout.write(head + yaml.safe_dump({"releases": releases}, sort_keys=False, width=100))


if __name__ == "__main__":
    main(sys.argv[1])
