"""tools/release_rows.py, the release loop of the catalogue generators: tags in version
order (not text order), consecutive releases with equal facts in one row, skipped tags not
breaking a run; run on a real git repository."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
from release_rows import release_rows, release_tags


def _repo(tmp_path: Path, tags: dict[str, str]) -> str:
    """A repository with one commit per tag, its file ``facts`` holding the tag's text."""
    work = tmp_path / "repo"
    work.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(work), *args], check=True, capture_output=True)

    git("init", "-q")
    for tag, text in tags.items():
        (work / "facts").write_text(text, "utf-8")
        git("add", "facts")
        git("-c", "user.name=t", "-c", "user.email=t@e", "commit", "--allow-empty", "-qm", tag)
        git("tag", tag)
    return str(work / ".git")


def test_rows_group_consecutive_equal_releases(tmp_path: Path) -> None:
    git_dir = _repo(
        tmp_path,
        {
            "v0.9.0": "a",
            "v0.10.0": "a",
            "chart-1.0.0": "x",  # another tag grammar: not read
            "v0.10.1": "skip",
            "v0.11.0": "a",
            "v0.12.0": "b",
        },
    )
    assert release_tags(git_dir, "v") == ["v0.9.0", "v0.10.0", "v0.10.1", "v0.11.0", "v0.12.0"]

    def facts(tag: str) -> dict[str, Any] | None:
        text = subprocess.check_output(
            ["git", "--git-dir", git_dir, "show", f"{tag}:facts"], text=True
        )
        return None if text == "skip" else {"value": text}

    assert release_rows(git_dir, "v", "tool", facts) == [
        {"tool": ["0.9.0", "0.10.0", "0.11.0"], "value": "a"},
        {"tool": ["0.12.0"], "value": "b"},
    ]
