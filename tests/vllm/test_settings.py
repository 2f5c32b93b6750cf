"""EngineSettings: one typed settings object from vllm serve flags or Ray engine_kwargs."""

from __future__ import annotations

import pytest

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.vllm.flags import AUTO_FIT
from gpustrata.vllm.settings import EngineSettings


def test_flags_and_engine_kwargs_give_the_same_settings() -> None:
    flags = EngineSettings.from_flags(
        [
            "meta-llama/Llama-3.1-8B-Instruct",
            "-tp",
            "2",
            "--max-model-len=8k",
            "--max_num_batched_tokens",
            "8K",
            "--gpu-memory-utilization",
            "0.9",
            "--no-enable-chunked-prefill",
            "--enforce-eager",
            "--kv-cache-dtype",
            "fp8",
        ]
    )
    kwargs = EngineSettings.from_values(
        {
            "tensor_parallel_size": 2,
            "max-model-len": "8k",
            "max_num_batched_tokens": 8192,
            "gpu_memory_utilization": 0.9,
            "enable_chunked_prefill": False,
            "enforce_eager": True,
            "kv_cache_dtype": "fp8",
        }
    )
    assert flags == kwargs
    assert flags.max_model_len == 8000
    assert flags.max_num_batched_tokens == 8192
    assert flags.pipeline_parallel_size is None
    assert flags.unreadable() is None


def test_bad_values_are_kept_as_written() -> None:
    s = EngineSettings.from_values(
        {"max_num_seqs": "lots", "gpu_memory_utilization": "most", "enforce_eager": "maybe"}
    )
    assert s.max_num_seqs == "lots"
    assert s.gpu_memory_utilization == "most"
    assert s.enforce_eager == "maybe"
    assert s.unreadable() == ("max_num_seqs", "lots")
    assert EngineSettings.from_values({"max_model_len": "auto"}).max_model_len == AUTO_FIT


def test_unknown_modelled_setting_raises_and_replace_changes_one() -> None:
    with pytest.raises(UnknownInput):
        EngineSettings.from_values({"block_size": UNKNOWN})
    base = EngineSettings(max_model_len=4096)
    assert base.replace(max_num_seqs=8) == EngineSettings(max_model_len=4096, max_num_seqs=8)
    with pytest.raises(TypeError):
        base.replace(not_a_setting=1)


def test_estimate_takes_the_settings_object() -> None:
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.catalog.hardware import load_hardware_catalog
    from gpustrata.vllm.capacity import CapacityError, estimate_capacity

    arch = load_model_catalog().get("meta-llama/Llama-3.1-8B-Instruct")
    gpu = load_hardware_catalog().gpus["l40s"]
    assert arch is not None
    settings = EngineSettings(max_model_len=8192)
    assert estimate_capacity(arch, gpu, settings) == estimate_capacity(
        arch, gpu, max_model_len=8192
    )
    with pytest.raises(CapacityError):
        estimate_capacity(arch, gpu, EngineSettings(max_num_seqs="lots"))
