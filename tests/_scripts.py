"""Import a repository script that is not in a package (tools/, benchmarks/) by its path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def load_script(relative: str, name: str) -> ModuleType:
    """The module at ``ROOT/relative``, registered in ``sys.modules`` as *name* (so its
    dataclasses and pickling find it); its folder is importable, as when it runs as a
    script (``tools/release_rows.py`` for the generators)."""
    folder = str((ROOT / relative).parent)
    if folder not in sys.path:
        sys.path.append(folder)
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
