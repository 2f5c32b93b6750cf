"""The release loop the catalogue generators share (tools/kaito_presets.py,
tools/kubeai_defaults.py, tools/llmaz_defaults.py): the release tags of a git mirror in
version order, read one by one, consecutive releases with equal facts in one row.

A generator gives the tag grammar (its prefix: ``v``, ``helm-chart-kubeai-``), the reader of
one tag's facts (None: nothing kept for that tag) and the row key naming the releases.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from typing import Any


def release_tags(git_dir: str, prefix: str) -> list[str]:
    """The tags ``<prefix>X.Y.Z`` of the mirror *git_dir*, oldest first (by number)."""
    grammar = re.compile(rf"^{re.escape(prefix)}(\d+)\.(\d+)\.(\d+)$")
    out = subprocess.check_output(["git", "--git-dir", git_dir, "tag"], text=True).split()
    found = [(tuple(int(p) for p in m.groups()), t) for t in out if (m := grammar.match(t))]
    return [t for _, t in sorted(found)]


def release_rows(
    git_dir: str, prefix: str, key: str, facts: Callable[[str], dict[str, Any] | None]
) -> list[dict[str, Any]]:
    """One row per run of consecutive releases whose *facts* (read per tag) are equal:
    ``{key: [release, ...], **facts}``, releases written without *prefix*; tags whose facts
    are None are left out (and do not break a run)."""
    rows: list[dict[str, Any]] = []
    for tag in release_tags(git_dir, prefix):
        found = facts(tag)
        if found is None:
            continue
        release = tag.removeprefix(prefix)
        if rows and {k: rows[-1][k] for k in found} == found:
            rows[-1][key].append(release)
            continue
        rows.append({key: [release], **found})
    return rows
