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
