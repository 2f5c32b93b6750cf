"""Write components/gpustrata/catalog/data/llmaz-defaults.yaml: the vLLM BackendRuntime the
llmaz Helm chart installs (``chart/templates/backends/vllm.yaml``), at each llmaz release
tag (``vX.Y.Z``), read from a git mirror of InftyAI/llmaz with ``git show TAG:path``.

The template's only Helm values are the image (``{{ .Values.backendRuntime.vllm.image.* }}``
from v0.1.2), read from the chart's values as its published package has them: the
``helm-package`` target of the Makefile appends ``chart/values.global.yaml`` to
``chart/values.yaml``. The ``{{`{{ .ModelPath }}`}}`` escapes stay llmaz's own placeholders
(``{{ .ModelPath }}``), which the controller fills. Any other template construct refuses the
release (no fact kept). Facts kept, normalised over the field renames between releases
(``commands`` -> ``command``, ``args[].flags`` -> ``recommendedConfigs[].args``):

- ``image``: the BackendRuntime's ``image`` and ``version``; the container runs
  ``image:version``, with a Playground's ``backendRuntimeConfig.version`` instead of
  ``version`` (``pkg/controller/inference/playground_controller.go``);
- ``command``; ``configs``: each recommended config's args (placeholders kept),
  ``sharedMemorySize`` and resources; ``probes``: the startup, liveness and readiness
  probes.

Releases whose chart has no vLLM BackendRuntime (before v0.0.7) are not kept; consecutive
releases with equal facts share a row (tools/release_rows.py).

    python tools/llmaz_defaults.py LLMAZ_GIT_DIR \
        > components/gpustrata/catalog/data/llmaz-defaults.yaml
"""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import yaml
from release_rows import release_rows

TEMPLATE = "chart/templates/backends/vllm.yaml"
VALUES = ("chart/values.yaml", "chart/values.global.yaml")
ESCAPED = re.compile(r"\{\{`(\{\{ \.\w+ \}\})`\}\}")
VALUE = re.compile(r"\{\{ \.Values\.([\w.]+) \}\}")
GUARD = re.compile(r"^\{\{- (if .*|end) -?\}\}$")
PROBES = ("startupProbe", "livenessProbe", "readinessProbe")


class _Dumper(yaml.SafeDumper):
    """Writes a value shared by two configs out twice, not as a YAML alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _show(git_dir: str, tag: str, path: str) -> str | None:
    try:
        return subprocess.check_output(
            ["git", "--git-dir", git_dir, "show", f"{tag}:{path}"],
            text=True,
            stderr=subprocess.DEVNULL,
        )
    except subprocess.CalledProcessError:
        return None


def _value(values: Any, path: str) -> Any:
    for key in path.split("."):
        values = values.get(key) if isinstance(values, dict) else None
    return values


def _rendered(text: str, values: Any) -> Any:
    """The template with its guard lines dropped and its ``.Values`` references filled in;
    None where a value is missing or another template construct is left."""
    lines = [line for line in text.splitlines() if not GUARD.match(line.strip())]
    body = "\n".join(lines)
    missing: list[str] = []

    def fill(found: re.Match[str]) -> str:
        value = _value(values, found[1])
        if value is None:
            missing.append(found[1])
        return str(value)

    body = VALUE.sub(fill, body)
    placeholders = ESCAPED.findall(body)
    body = ESCAPED.sub(lambda m: f"@@{placeholders.index(m[1])}@@", body)
    if missing or "{{" in body:
        return None
    doc = yaml.safe_load(body)
    text = yaml.safe_dump(doc)
    for i, placeholder in enumerate(placeholders):
        text = text.replace(f"@@{i}@@", placeholder)
    return yaml.safe_load(text)


def _facts(git_dir: str, tag: str) -> dict[str, Any] | None:
    template = _show(git_dir, tag, TEMPLATE)
    if template is None:
        return None
    values = yaml.safe_load("\n".join(_show(git_dir, tag, p) or "" for p in VALUES)) or {}
    doc = _rendered(template, values)
    spec = doc.get("spec") if isinstance(doc, dict) else None
    if not isinstance(spec, dict) or doc.get("metadata", {}).get("name") != "vllm":
        return None
    configs = {}
    for config in spec.get("recommendedConfigs") or spec.get("args") or []:
        kept = {"args": [str(a) for a in config.get("args", config.get("flags")) or []]}
        for key in ("sharedMemorySize", "resources"):
            if key in config:
                kept[key] = config[key]
        if "resources" not in kept and "resources" in spec:
            kept["resources"] = spec["resources"]  # before v0.1.0: one for every config
        configs[str(config["name"])] = kept
    return {
        "image": {"repository": str(spec["image"]), "version": str(spec["version"])},
        "command": [str(c) for c in spec.get("command", spec.get("commands")) or []],
        "configs": configs,
        "probes": {p: spec[p] for p in PROBES if p in spec},
    }


def main(git_dir: str) -> None:
    rows = release_rows(git_dir, "v", "llmaz", lambda tag: _facts(git_dir, tag))
    head = (
        "# The vLLM BackendRuntime the llmaz Helm chart installs, per llmaz release (vX.Y.Z\n"
        "# tags from v0.0.7, the first chart with one): the Pod llmaz builds for a Playground\n"
        "# on backend 'vllm' runs image.repository:<version> (the Playground's\n"
        "# backendRuntimeConfig.version, else image.version), the command, the recommended\n"
        "# config's args ({{ .ModelPath }} etc. filled by the controller), its\n"
        "# sharedMemorySize and resources, and the probes. From v0.1.2 the image comes from the\n"
        "# chart's values (backendRuntime.vllm.image.repository / .tag, values.global.yaml,\n"
        "# which the Makefile's helm-package appends to values.yaml): an installation may\n"
        "# override it. Facts only; each release's were read from `source` with {release} and\n"
        "# {path} filled in; the releases of one row are equal in them.\n"
        "# Written by tools/llmaz_defaults.py; read by catalog/llmaz.py.\n"
    )
    doc = {
        "source": "InftyAI/llmaz@v{release}:{path}",
        "paths": [TEMPLATE, *VALUES, "Makefile"],
        "releases": rows,
    }
    sys.stdout.write(head + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=100))


if __name__ == "__main__":
    main(sys.argv[1])
