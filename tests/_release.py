"""The vLLM release the tests take as current: the catalogue's reference, never a literal.

A vLLM upgrade bumps ``reference`` in ``catalog/data/vllm-releases.yaml``; tests that
build an engine of "the release gpustrata follows" use these, so they follow it too.
"""

from __future__ import annotations

from gpustrata.catalog.vllm_releases import reference_release

REFERENCE = reference_release()
"""The reference vLLM release (``X.Y.Z``)."""
REFERENCE_IMAGE = f"vllm/vllm-openai:v{REFERENCE}"
"""The upstream server image of the reference release."""


def _next_unread() -> str:
    from gpustrata.catalog.vllm_releases import load_vllm_releases
    from gpustrata.core.versions import parse_version

    cat = load_vllm_releases()
    read = [r.version for r in cat.scheduler] + [r.version for r in cat.block_size]
    read += [v for v, _ in cat.memory_defaults]
    major, minor = parse_version(max(read, key=parse_version))[:2]
    return f"{major}.{minor + 1}.0"


NEXT_UNREAD = _next_unread()
"""A release newer than every release the catalogue read (the next minor)."""
