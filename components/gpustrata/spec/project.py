"""The Pulumi project file (``Pulumi.yaml``), read as the Pulumi CLI reads it.

Pulumi requires ``name`` and ``runtime`` (a name, or a mapping with ``name`` and
``options``), and finds stack files ``Pulumi.<stack>.yaml`` in ``stackConfigDir``,
relative to the project folder; without it, in the project folder itself. ``main``
names the program's folder or file (default: the project folder, ``__main__.py``).
A project file Pulumi would refuse is an :class:`~gpustrata.core.errors.InputError`
naming the file (exit 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from gpustrata.core.errors import InputError
from gpustrata.core.terminal import clipped
from gpustrata.core.textfiles import TextFileError, read_text_file
from gpustrata.core.yamlguard import YamlShapeError
from gpustrata.core.yamlio import safe_load

__all__ = ["PROJECT_FILES", "Project", "read_project"]

PROJECT_FILES = ("Pulumi.yaml", "Pulumi.yml")
"""The names Pulumi looks for in a project folder, in its order."""

_STRING_KEYS = ("name", "description", "main", "stackConfigDir")
_MAX_PROJECT_BYTES = 1 << 20
"""The largest Pulumi.yaml read (a project file is a few hundred bytes)."""


@dataclass(frozen=True, slots=True)
class Project:
    """What gpustrata needs of a Pulumi project."""

    dir: Path
    """The project folder."""
    name: str
    """The project name (Pulumi.yaml ``name``): the ``project`` part of every URN."""
    runtime: str
    """The language runtime's name (``python``)."""
    stack_config_dir: Path
    """Where ``Pulumi.<stack>.yaml`` files are."""
    file: Path | None
    """The Pulumi.yaml read, or None when the folder has none."""
    main: Path | None = None
    """``main`` resolved against the project folder, when set."""

    def stack_file(self, stack: str) -> Path:
        """The stack file Pulumi reads for *stack*."""
        return self.stack_config_dir / f"Pulumi.{stack}.yaml"

    def program(self) -> Path:
        """The program file Pulumi runs: ``main`` (a file, or a folder's ``__main__.py``),
        else ``__main__.py`` in the project folder."""
        main = self.main if self.main is not None else self.dir
        return main / "__main__.py" if main.suffix != ".py" else main


def _fail(path: Path, message: str) -> InputError:
    return InputError(f"{path}: {message}")


def read_project(project_dir: Path) -> Project:
    """Read and validate the project file in *project_dir*.

    A folder without a project file is not a Pulumi project; for the commands that still
    plan it, stack files are looked for in ``stacks/`` when that folder exists (this
    repository's layout), else in the folder itself.
    """
    project_dir = Path(project_dir)
    path = next((project_dir / n for n in PROJECT_FILES if (project_dir / n).is_file()), None)
    if path is None:
        stacks = project_dir / "stacks"
        return Project(
            project_dir, "gpustrata", "python", stacks if stacks.is_dir() else project_dir, None
        )
    try:  # from a pull request: the guards of every untrusted file (size, NUL, aliases)
        text = read_text_file(path, max_bytes=_MAX_PROJECT_BYTES)
        data: Any = safe_load(text)
    except TextFileError as exc:
        raise InputError(str(exc)) from None
    except YamlShapeError as exc:  # repeated keys (`main:` twice), alias bombs
        line = f":{exc.line}" if exc.line else ""
        raise InputError(f"{path}{line}: {exc}") from None
    except (yaml.YAMLError, RecursionError) as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise InputError(f"{where}: not valid YAML; Pulumi cannot read this project") from None
    if not isinstance(data, dict):
        raise _fail(path, "expected a mapping with at least name and runtime")
    for key in _STRING_KEYS:
        if key in data and not isinstance(data[key], str):
            raise _fail(path, f"{key}: expected a string, got {data[key]!r}")
    name = data.get("name")
    if not name or not name.strip():
        raise _fail(path, "name: required (the project name, e.g. name: gpustrata)")
    runtime = data.get("runtime")
    if isinstance(runtime, dict):
        runtime = runtime.get("name")
        if not isinstance(data["runtime"].get("options", {}), dict):
            raise _fail(path, "runtime.options: expected a mapping")
    if not isinstance(runtime, str) or not runtime:
        raise _fail(path, "runtime: required, a name (python) or a mapping with name and options")
    if "config" in data and not isinstance(data["config"], dict | type(None)):
        raise _fail(path, "config: expected a mapping of config keys")
    config_dir = _inside(path, project_dir, "stackConfigDir", data.get("stackConfigDir", "."))
    if not config_dir.is_dir():
        raise _fail(path, f"stackConfigDir: {config_dir} is not a folder")
    main = _inside(path, project_dir, "main", data["main"]) if data.get("main") else None
    return Project(project_dir, name, runtime, config_dir, path, main)


def _inside(path: Path, project_dir: Path, key: str, value: str) -> Path:
    """*value* (``main`` or ``stackConfigDir``) under *project_dir*, refused when it leads
    out of the project: absolute, through ``..`` or a symbolic link. A project file from
    a pull request must not make ``plan`` run or read a file elsewhere, as a stack's
    ``models[].model`` may not."""
    target = project_dir / value
    try:
        leaves = Path(value).is_absolute() or not target.resolve().is_relative_to(
            project_dir.resolve()
        )
    except (OSError, RuntimeError):  # a link loop
        leaves = True
    if leaves:
        raise _fail(
            path,
            f"{key}: {clipped(value)!r} leads outside the project; Pulumi.yaml may only "
            f"name a {'file or folder' if key == 'main' else 'folder'} inside it: move it in",
        )
    return target
