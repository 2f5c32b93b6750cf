"""llmaz's vLLM BackendRuntime per release (catalog/data/llmaz-defaults.yaml, written by
tools/llmaz_defaults.py from InftyAI/llmaz's vX.Y.Z tags)."""

from __future__ import annotations

from gpustrata.catalog.llmaz import llmaz_backend, llmaz_backends
from gpustrata.core.versions import parse_version


def test_releases_are_ordered_and_cited_per_tag() -> None:
    backends = llmaz_backends()
    releases = [b.release for b in backends]
    assert releases[0] == "0.0.7"  # the first chart with a vLLM BackendRuntime
    assert releases == sorted(releases, key=parse_version)
    for b in backends:
        assert b.source == f"InftyAI/llmaz@v{b.release}:chart/templates/backends/vllm.yaml"
        assert b.command == ("python3", "-m", "vllm.entrypoints.openai.api_server")
        args = b.configs["default"]["args"]
        assert args[:2] == ["--model", "{{ .ModelPath }}"]  # llmaz's placeholder, kept


def test_image_per_release() -> None:
    """v0.1.1's template names vllm/vllm-openai v0.6.0 itself; from v0.1.2 the chart's
    values.global.yaml gives backendRuntime.vllm.image tag v0.7.3."""
    old, new = llmaz_backend("0.1.1"), llmaz_backend("v0.1.4")
    assert old is not None and new is not None
    assert old.image() == "vllm/vllm-openai:v0.6.0"
    assert new.image() == "vllm/vllm-openai:v0.7.3"
    assert new.image("v0.8.5") == "vllm/vllm-openai:v0.8.5"  # backendRuntimeConfig.version
    assert new.configs["default"]["sharedMemorySize"] == "2Gi"
    assert "sharedMemorySize" not in old.configs["default"]
    assert llmaz_backend("0.0.9") is not None and not llmaz_backend("0.0.9").probes  # type: ignore[union-attr]
    assert llmaz_backend("0.9.9") is None
