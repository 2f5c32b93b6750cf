"""Shared paths and helpers for the policy tests."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
FIELD_CORPUS = REPO / ".." / "shared" / "field-corpus"

for extra in (REPO / "components", REPO / "policies"):
    if str(extra) not in sys.path:
        sys.path.insert(0, str(extra))
