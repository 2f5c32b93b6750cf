"""vLLM's flag grammar (gpustrata.vllm.flags) against what vLLM's own parser accepts.

The semantics are vLLM's ``vllm/utils/argparse_utils.py`` ``human_readable_int`` and
``FlexibleArgumentParser``; ``tests/engines`` compares with the installed package.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata.vllm.flags import (
    AUTO_FIT,
    flag_bool,
    human_readable_int,
    human_readable_int_or_auto,
    int_setting,
    json_setting,
    parse_flags,
    setting_name,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("8k", 8000),
        ("8K", 8192),
        ("25.6k", 25600),
        ("1m", 1_000_000),
        ("1M", 2**20),
        ("2g", 2 * 10**9),
        ("1T", 2**40),
        (" 42 ", 42),
        ("-3", -3),
    ],
)
def test_human_readable_int(text: str, value: int) -> None:
    assert human_readable_int(text) == value


@pytest.mark.parametrize("text", ["1.5K", "8kb", "k", "", "eight", "8 k"])
def test_human_readable_int_refuses_what_vllm_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        human_readable_int(text)


def test_auto_is_only_for_max_model_len() -> None:
    assert human_readable_int_or_auto("auto") == AUTO_FIT
    assert human_readable_int_or_auto("AUTO") == AUTO_FIT
    assert human_readable_int_or_auto("-1") == AUTO_FIT
    assert int_setting({"max_model_len": "auto"}, "max_model_len") == AUTO_FIT
    assert int_setting({"max_num_seqs": "auto"}, "max_num_seqs") == "auto"


def _flags(*tokens: str) -> tuple[str | None, dict[str, Any]]:
    values: dict[str, Any] = {}
    return parse_flags(list(tokens), values), values


def test_dash_underscore_and_equals_spellings_are_one_setting() -> None:
    for tokens in (
        ("--max-model-len", "8k"),
        ("--max_model_len", "8k"),
        ("--max-model-len=8k",),
        ("--max_model-len=8k",),
    ):
        assert _flags(*tokens)[1] == {"max_model_len": "8k"}
    assert setting_name("--max-num-seqs") == "max_num_seqs"
    assert setting_name("-tp") == "tensor_parallel_size"


def test_positional_model_short_flags_and_negative_values() -> None:
    model, values = _flags("meta-llama/Llama-3.1-8B", "-tp", "2", "--max-model-len", "-1")
    assert model == "meta-llama/Llama-3.1-8B"
    assert values == {"tensor_parallel_size": "2", "max_model_len": "-1"}


def test_booleans() -> None:
    _, values = _flags(
        "--enforce-eager", "--no-enable-chunked-prefill", "--trust-remote-code=false"
    )
    assert flag_bool(values, "enforce_eager") is True
    assert flag_bool(values, "enable_chunked_prefill") is False
    assert flag_bool(values, "trust_remote_code") is False
    assert flag_bool(values, "enable_prefix_caching") is None
    # A bare boolean flag does not swallow the next positional, but takes true/false.
    model, values = _flags("--enforce-eager", "m", "--enable-prefix-caching", "false")
    assert model == "m"
    assert values == {"enforce_eager": True, "enable_prefix_caching": "false"}
    assert flag_bool(values, "enable_prefix_caching") is False
    assert flag_bool({"x": "maybe"}, "x") is None


def test_human_readable_ints_only_where_vllm_takes_them() -> None:
    values = {
        "max_model_len": "8k",
        "max_num_batched_tokens": "8K",
        "kv_cache_memory_bytes": "2g",
        "max_num_seqs": "1k",
        "tensor_parallel_size": "2",
        "block_size": 16,
        "enforce_eager": True,
    }
    assert int_setting(values, "max_model_len") == 8000
    assert int_setting(values, "max_num_batched_tokens") == 8192
    assert int_setting(values, "kv_cache_memory_bytes") == 2 * 10**9
    assert int_setting(values, "max_num_seqs") == "1k"  # vLLM's type is plain int here
    assert int_setting(values, "tensor_parallel_size") == 2
    assert int_setting(values, "block_size") == 16
    assert int_setting(values, "enforce_eager") == "true"
    assert int_setting(values, "pipeline_parallel_size") is None


def test_unknown_values_raise_only_when_read() -> None:
    values = {"max_model_len": UNKNOWN, "max_num_seqs": "4"}
    assert int_setting(values, "max_num_seqs") == 4
    with pytest.raises(UnknownInput):
        int_setting(values, "max_model_len")
    with pytest.raises(UnknownInput):
        flag_bool(values, "max_model_len")


def test_json_valued_flags() -> None:
    _, values = _flags("--speculative-config", '{"method": "ngram", "num_speculative_tokens": 5}')
    assert json_setting(values, "speculative_config") == {
        "method": "ngram",
        "num_speculative_tokens": 5,
    }
    spelled = {"kv_transfer_config": '{"cpu_bytes_to_use": 80m, "name": "8k"}'}
    assert json_setting(spelled, "kv_transfer_config") == {
        "cpu_bytes_to_use": 80_000_000,
        "name": "8k",
    }
    assert json_setting({"c": {"a": 1}}, "c") == {"a": 1}
    assert json_setting({}, "c") is None
    with pytest.raises(ValueError):
        json_setting({"c": "{not json"}, "c")


def test_int_setting_kinds_of_value() -> None:
    """int_setting's fast paths keep its answers: an int as is, unset None, a boolean as
    the text vLLM would refuse, text parsed, and a value known only at deployment raises."""
    from gpustrata.vllm.flags import int_setting

    values: dict[str, Any] = {"max_num_seqs": 8, "enforce_eager": True, "block_size": "32"}
    assert int_setting(values, "max_num_seqs") == 8
    assert int_setting(values, "missing") is None
    assert int_setting(values, "enforce_eager") == "true"
    assert int_setting(values, "block_size") == 32
    with pytest.raises(UnknownInput, match="max_model_len of pod x"):
        int_setting({"max_model_len": UNKNOWN}, "max_model_len", "pod x")
