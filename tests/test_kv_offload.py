"""KV cache on the host (vLLM native offload, LMCache, CPU weight offload): what
``gpustrata.vllm.offload.host_memory`` counts, the capacity command's host figures and
K020 beyond its fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _release import REFERENCE_IMAGE

from gpustrata.cli.app import main
from gpustrata.vllm.offload import GIB, LMCACHE_DEFAULT_CPU_GIB, host_memory
from gpustrata_policies import evaluate

LLAMA8B_TOKEN = 131_072  # KV bytes per token per GPU of Llama-3.1-8B at TP 1 (bf16)


def test_native_offload_is_the_total_over_the_ranks() -> None:
    one = host_memory({"kv_offloading_size": "64"}, {}, 1, LLAMA8B_TOKEN)
    four = host_memory({"kv_offloading_size": 64}, {}, 4, LLAMA8B_TOKEN // 4)
    assert not isinstance(one, str) and not isinstance(four, str)
    assert one.kv_bytes == four.kv_bytes == 64 * GIB
    assert one.kv_tokens == four.kv_tokens == 64 * GIB // LLAMA8B_TOKEN  # 524,288


def test_lmcache_backend_lives_in_its_own_server() -> None:
    found = host_memory({"kv_offloading_size": 64, "kv_offloading_backend": "lmcache"}, {}, 2)
    assert not isinstance(found, str)
    assert found.total_bytes == 0 and "LMCache server process" in found.parts[0]


def test_lmcache_in_process_is_per_rank_with_its_default() -> None:
    config = {"kv_transfer_config": '{"kv_connector": "LMCacheConnectorV1"}'}
    default = host_memory(config, {}, 4, 32_768)
    sized = host_memory(config, {"LMCACHE_MAX_LOCAL_CPU_SIZE": "20"}, 4, 32_768)
    off = host_memory(config, {"LMCACHE_LOCAL_CPU": "False"}, 4, 32_768)
    assert not isinstance(default, str) and not isinstance(sized, str)
    assert default.kv_bytes == int(LMCACHE_DEFAULT_CPU_GIB * GIB) * 4
    assert sized.kv_bytes == 80 * GIB and sized.kv_tokens == 20 * GIB // 32_768
    assert not isinstance(off, str) and off.total_bytes == 0
    assert isinstance(host_memory(config, {"LMCACHE_CONFIG_FILE": "/etc/lm.yaml"}, 4), str)


def test_offloading_connector_bytes_and_weight_offload() -> None:
    config = {
        "kv_transfer_config": json.dumps(
            {
                "kv_connector": "OffloadingConnector",
                "kv_connector_extra_config": {"cpu_bytes_to_use": 10 * GIB},
            }
        ),
        "cpu_offload_gb": "8",
    }
    found = host_memory(config, {}, 2)
    assert not isinstance(found, str)
    assert (found.kv_bytes, found.weight_bytes, found.kv_tokens) == (10 * GIB, 16 * GIB, None)


@pytest.mark.parametrize(
    "values",
    [{"kv_offloading_size": "lots"}, {"kv_offloading_size": "-1"}, {"kv_transfer_config": "{"}],
)
def test_unreadable_settings_say_why(values: dict[str, str]) -> None:
    assert isinstance(host_memory(values, {}, 1), str)


def test_capacity_reports_tokens_on_gpu_and_host(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "capacity",
        "--model",
        "meta-llama/Llama-3.1-8B-Instruct",
        "--gpu",
        "l40s",
        "--max-model-len",
        "32768",
        "--format",
        "json",
    ]
    main(argv)
    plain = json.loads(capsys.readouterr().out)
    assert "kv_cache_host_tokens" not in plain
    main([*argv, "--kv-offloading-size", "64"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["kv_cache_tokens"] == plain["kv_cache_tokens"]
    assert doc["kv_cache_host_bytes"]["value"] == 64 * GIB
    assert doc["kv_cache_host_tokens"]["value"] == 64 * GIB // LLAMA8B_TOKEN
    together = doc["kv_cache_tokens"]["value"] + doc["kv_cache_host_tokens"]["value"]
    assert f"together {together:,}" in doc["kv_cache_host_tokens"]["explanation"]


def _engine(args: list[str], memory: str, env: list[dict[str, str]] | None = None) -> dict:  # type: ignore[type-arg]
    container = {
        "name": "vllm",
        "image": REFERENCE_IMAGE,
        "args": ["--model", "mistralai/Mistral-7B-Instruct-v0.3", *args],
        "resources": {"limits": {"nvidia.com/gpu": "1", "memory": memory}},
        "env": env or [],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "llm"},
        "spec": {"containers": [container]},
    }


def _k020(doc: dict) -> list[str]:  # type: ignore[type-arg]
    return [f.message for f in evaluate([doc]).findings if f.rule == "K020"]


def test_k020_limit_at_the_buffer_passes_and_below_fails() -> None:
    assert _k020(_engine(["--kv-offloading-size", "16"], "16Gi")) == []
    (found,) = _k020(_engine(["--kv-offloading-size", "16"], "15Gi"))
    assert "16.0 GiB" in found and "15.0 GiB" in found


def test_k020_without_a_limit_or_offload_is_silent() -> None:
    assert _k020(_engine([], "1Gi")) == []
    doc = _engine(["--kv-offloading-size", "16"], "1Gi")
    del doc["spec"]["containers"][0]["resources"]["limits"]["memory"]
    assert _k020(doc) == []


def test_k020_lmcache_config_file_is_not_evaluated() -> None:
    doc = _engine(
        ["--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1"}'],
        "1Gi",
        [{"name": "LMCACHE_CONFIG_FILE", "value": "/config/lmcache.yaml"}],
    )
    report = evaluate([doc])
    assert [f for f in report.findings if f.rule == "K020"] == []
    assert any(n.rule == "K020" and "lmcache.yaml" in n.reason for n in report.not_evaluated)


def test_the_docs_table_is_the_capacity_commands(capsys: pytest.CaptureFixture[str]) -> None:
    """docs/howto/kv-offload-capacity.md states its measured rows; each is recomputed here
    with `gpustrata capacity --kv-offloading-size`."""
    from pathlib import Path

    page = Path(__file__).resolve().parents[1] / "docs" / "howto" / "kv-offload-capacity.md"
    rows = [
        [c.strip() for c in line.strip("|").split("|")]
        for line in page.read_text(encoding="utf-8").splitlines()
        if line.startswith("| Llama-")
    ]
    gpus = {"L40S": "l40s", "H100 SXM": "NVIDIA-H100-80GB-HBM3"}
    assert len(rows) == 2
    for model, gpu, mml, per_token, on_gpu, offload, on_host, together in rows:
        count, _, name = gpu.partition(" x ")
        name = name.split(" (")[0]
        main(
            [
                "capacity",
                "--model",
                f"meta-llama/{model}",
                "--gpu",
                gpus[name],
                "--tp",
                count,
                "--max-model-len",
                mml,
                "--kv-offloading-size",
                offload.removesuffix(" GiB"),
                "--format",
                "json",
            ]
        )
        got = json.loads(capsys.readouterr().out)
        gpu_tokens = got["kv_cache_tokens"]["value"]
        host_tokens = got["kv_cache_host_tokens"]["value"]
        assert per_token == f"{got['kv_bytes_per_token_per_gpu']['value']:,} B", model
        assert (on_gpu, on_host) == (f"{gpu_tokens:,}", f"{host_tokens:,}"), model
        assert together == f"{gpu_tokens + host_tokens:,}", model


def test_capacity_reads_a_stack_models_offload(capsys: pytest.CaptureFixture[str]) -> None:
    """`capacity -f` counts the native offload a stack model sets in engine.extra_args."""
    from pathlib import Path

    example = Path(__file__).resolve().parents[1] / "stacks" / "examples" / "Pulumi.kv-offload.yaml"
    argv = ["capacity", "-f", str(example), "--format", "json", "--model-name"]
    main([*argv, "llama-8b"])
    native = json.loads(capsys.readouterr().out)
    assert native["kv_cache_host_bytes"]["value"] == 64 * GIB
    assert native["kv_cache_host_tokens"]["value"] == 64 * GIB // LLAMA8B_TOKEN
    main([*argv, "llama-8b", "--kv-offloading-size", "8"])  # the flag wins
    assert json.loads(capsys.readouterr().out)["kv_cache_host_bytes"]["value"] == 8 * GIB
    main([*argv, "llama-8b-connector"])  # a connector's buffer: not counted in tokens yet
    assert "kv_cache_host_tokens" not in json.loads(capsys.readouterr().out)


def test_a_bad_stack_offload_names_its_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    source = Path(__file__).resolve().parents[1] / "stacks" / "examples" / "Pulumi.kv-offload.yaml"
    data = yaml.safe_load(source.read_text(encoding="utf-8"))
    data["config"]["gpustrata:stack"]["models"][0]["engine"]["extra_args"]["kv_offloading_size"] = (
        "lots"
    )
    bad = tmp_path / "Pulumi.kv-offload.yaml"
    bad.write_text(yaml.safe_dump(data), encoding="utf-8")
    code = main(["capacity", "-f", str(bad), "--model-name", "llama-8b"])
    err = capsys.readouterr().err
    assert code == 2
    assert "models.llama-8b.engine.extra_args.kv_offloading_size 'lots'" in err
    assert "Traceback" not in err


def test_the_docs_state_the_examples_figures(capsys: pytest.CaptureFixture[str]) -> None:
    page = Path(__file__).resolve().parents[1] / "docs" / "howto" / "kv-offload-capacity.md"
    example = Path(__file__).resolve().parents[1] / "stacks" / "examples" / "Pulumi.kv-offload.yaml"
    main(["capacity", "-f", str(example), "--model-name", "llama-8b", "--format", "json"])
    got = json.loads(capsys.readouterr().out)
    text = " ".join(page.read_text(encoding="utf-8").split())
    gpu, host = got["kv_cache_tokens"]["value"], got["kv_cache_host_tokens"]["value"]
    assert f"{gpu:,} tokens on the GPU, 64 GiB and {host:,} tokens on the host" in text
