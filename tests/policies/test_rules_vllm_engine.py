"""The vLLM engine rules V002, V005 and V006: how they decide by vLLM release, GPU and model
(including what they refuse to guess). Their fixtures and exact findings: the rule folders,
run by ``test_rule_folders.py``.

The facts these rules encode are checked against the installed vLLM 0.33.0 in
``tests/engines/test_vllm_rule_facts.py`` (the real package, optional ``engines`` extra).
"""

from __future__ import annotations

from typing import Any

import pytest
from _release import NEXT_UNREAD, REFERENCE_IMAGE
from conftest import deployment_of

from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import find_rule
from gpustrata_policies.rules.v002_parallelism_fits_model import rule as v002

RULES = ("V002", "V005", "V006")


@pytest.mark.parametrize("rule_id", RULES)
def test_rules_are_mandatory_everywhere(rule_id: str) -> None:
    rule = find_rule(rule_id)
    assert rule is not None
    assert set(rule.meta.default_enforcement.values()) == {"mandatory"}


# --------------------------------------------------------------------------- inline objects


def deployment(
    argv: list[str],
    image: str = REFERENCE_IMAGE,
    gpu: str | None = "NVIDIA-L4",
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A one-container Deployment running ``vllm serve`` with ``argv``."""
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "vllm",
                "image": image,
                "command": ["vllm", "serve", *argv],
                "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                "resources": {"limits": {"nvidia.com/gpu": 1}},
            }
        ]
    }
    if gpu:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": gpu}
    return deployment_of(spec)


def ray_service(engine_kwargs: str, source: str, gpu: str = "NVIDIA-L40S") -> dict[str, Any]:
    """A RayService with one Ray Serve LLM config on rayproject/ray-llm 2.60.0 (vLLM 0.29.0)."""
    image = "rayproject/ray-llm:2.60.0-py311-cu128"
    serve = (
        "applications:\n- name: llms\n  import_path: ray.serve.llm:build_openai_app\n"
        "  args:\n    llm_configs:\n"
        f"    - model_loading_config: {{model_id: m, model_source: {source}}}\n"
        f"      engine_kwargs: {engine_kwargs}\n"
    )
    worker = {
        "groupName": "gpu",
        "replicas": 1,
        "template": {
            "spec": {
                "nodeSelector": {"nvidia.com/gpu.product": gpu},
                "containers": [
                    {"name": "w", "image": image, "resources": {"limits": {"nvidia.com/gpu": 1}}}
                ],
            }
        },
    }
    head = {"template": {"spec": {"containers": [{"name": "h", "image": image}]}}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "llm", "namespace": "ray"},
        "spec": {
            "serveConfigV2": serve,
            "rayClusterConfig": {"headGroupSpec": head, "workerGroupSpecs": [worker]},
        },
    }


def outcomes(rule_id: str, *objects: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(violation messages, not-evaluated reasons) of one rule."""
    rule = find_rule(rule_id)
    assert rule is not None
    report = evaluate(list(objects), rules=[rule])
    return [f.message for f in report.findings], [n.reason for n in report.not_evaluated]


# --------------------------------------------------------------------------- V002


def test_v002_unknown_model_is_not_evaluated_only_when_parallel() -> None:
    found, skipped = outcomes("V002", deployment(["acme/private-7b", "-tp", "2"]))
    assert found == []
    assert skipped == [
        "container 'vllm' serves acme/private-7b, which is not in the model catalogue, so "
        "its attention heads and layers are unknown; give its own files: check --models DIR "
        "(<org>/<name>/config.json or <name>/config.json) or the Hugging Face cache "
        "(HF_HUB_CACHE, HF_HOME)"
    ]
    assert outcomes("V002", deployment(["acme/private-7b"])) == ([], [])


def test_v002_reads_ray_model_source_and_mla_ignores_kv_heads() -> None:
    # DeepSeek-V3: 128 heads, MLA (config repeats 128 KV heads, irrelevant): TP 16 is fine.
    ok = ray_service("{tensor_parallel_size: 16}", "deepseek-ai/DeepSeek-V3")
    assert outcomes("V002", ok) == ([], [])
    bad = ray_service("{tensor_parallel_size: 6}", "deepseek-ai/DeepSeek-V3")
    (message,), _ = outcomes("V002", bad)
    assert "tensor_parallel_size 6 does not divide its 128 attention heads" in message


def test_v002_kv_replication_needs_tp_to_be_a_multiple_of_kv_heads() -> None:
    from gpustrata.catalog.architectures import load_model_catalog

    arch = load_model_catalog().get("meta-llama/Llama-3.1-70B-Instruct")
    assert arch is not None
    assert v002.valid_tp_sizes(arch) == [1, 2, 4, 8, 16, 32, 64]
    assert v002.problems(arch, 16, 1) == []  # 8 KV heads, each replicated on 2 ranks
    qwen = load_model_catalog().get("Qwen/Qwen2.5-7B-Instruct")  # 28 heads, 4 KV heads
    assert qwen is not None
    assert v002.valid_tp_sizes(qwen) == [1, 2, 4, 28]


# --------------------------------------------------------------------------- V005


def test_v005_defaults_alone_are_never_reported() -> None:
    assert outcomes("V005", deployment(["meta-llama/Llama-3.1-8B-Instruct"])) == ([], [])


def test_v005_unknown_version_judges_only_stated_values() -> None:
    both = deployment(
        [
            "meta-llama/Llama-3.1-8B-Instruct",
            "--max-num-batched-tokens",
            "64",
            "--max-num-seqs",
            "128",
        ],
        image="registry.example.com/vllm:custom",
    )
    (message,), _ = outcomes("V005", both)
    assert message.startswith("container 'vllm' runs vLLM with max_num_batched_tokens 64 below")
    one = deployment(
        ["meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "128"],
        image="registry.example.com/vllm:custom",
    )
    assert outcomes("V005", one) == (
        [],
        [
            "container 'vllm': the batch budget depends on vLLM's defaults and chunked "
            "prefill, but the image (registry.example.com/vllm:custom) does not name a vLLM "
            "version (set images in the cluster profile)"
        ],
    )


def test_v005_release_0_11_0_ignores_disabling_chunked_prefill_but_0_11_1_does_not() -> None:
    argv = [
        "meta-llama/Llama-3.1-8B-Instruct",
        "--no-enable-chunked-prefill",
        "--max-num-batched-tokens",
        "4096",
        "--max-model-len",
        "8192",
    ]
    assert outcomes("V005", deployment(argv, image="vllm/vllm-openai:v0.11.0")) == ([], [])
    (message,), _ = outcomes("V005", deployment(argv, image="vllm/vllm-openai:v0.11.1"))
    assert "chunked prefill off (--no-enable-chunked-prefill)" in message


def test_v005_between_read_releases_needs_both_to_agree() -> None:
    # ray-llm 2.60.0 pins vLLM 0.29.0, between 0.28.0 and 0.33.0. On an L40S both default to
    # 2048 tokens (and Ray's own engine context to 2048 as well): 4096 sequences fail.
    found, _ = outcomes("V005", ray_service("{max_num_seqs: 4096}", "Qwen/Qwen2.5-7B-Instruct"))
    assert len(found) == 1
    assert "judged by 0.28.0 and 0.33.0" in found[0]
    assert "max_num_batched_tokens 2048 (unset:" in found[0]
    # On a B200 (179 GiB) 0.12.0 and 0.27.1 default to 8192 tokens (the >= 160 GiB tier
    # arrives in 0.28.0): 10000 sequences fail on 0.20.2, and fit 0.29.0's 16384.
    argv = ["Qwen/Qwen2.5-7B-Instruct", "--max-num-seqs", "10000"]
    found, _ = outcomes(
        "V005", deployment(argv, image="vllm/vllm-openai:v0.20.2", gpu="NVIDIA-B200")
    )
    assert len(found) == 1 and "judged by 0.12.0 and 0.27.1" in found[0]
    found, skipped = outcomes(
        "V005", deployment(argv, image="vllm/vllm-openai:v0.29.0", gpu="NVIDIA-B200")
    )
    assert found == [] and skipped == []
    # On an A100 80GB 0.8.5 defaults to 8192 tokens and 0.10.2 (A100 excluded) to 2048:
    # 4096 sequences fit one and not the other, so nothing is claimed for 0.9.2.
    argv = ["Qwen/Qwen2.5-7B-Instruct", "--max-num-seqs", "4096"]
    found, skipped = outcomes(
        "V005",
        deployment(argv, image="vllm/vllm-openai:v0.9.2", gpu="NVIDIA-A100-SXM4-80GB"),
    )
    assert found == []
    assert len(skipped) == 1 and "differ between the GPUs or releases" in skipped[0]


def test_v005_unknown_gpu_decides_only_when_every_default_agrees() -> None:
    argv = ["meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "20000"]
    (message,), _ = outcomes("V005", deployment(argv, gpu=None))
    assert "max_num_batched_tokens 2048 or 8192 or 16384 (unset:" in message
    argv = ["meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "4096"]
    found, skipped = outcomes("V005", deployment(argv, gpu=None))
    assert found == [] and len(skipped) == 1


def test_v005_release_outside_the_read_range_is_not_judged_on_defaults() -> None:
    argv = ["meta-llama/Llama-3.1-8B-Instruct", "--max-num-seqs", "4096"]
    image = f"vllm/vllm-openai:v{NEXT_UNREAD}"
    found, skipped = outcomes("V005", deployment(argv, image=image))
    assert found == []
    assert skipped and f"the V1 engine of vLLM {NEXT_UNREAD} was not read" in skipped[0]


# --------------------------------------------------------------------------- V006


def test_v006_default_block_size_is_not_judged() -> None:
    assert outcomes("V006", deployment(["meta-llama/Llama-3.1-8B-Instruct"])) == ([], [])


@pytest.mark.parametrize("block", ["0", "-16", "sixteen"])
def test_v006_non_positive_or_non_numeric(block: str) -> None:
    (message,), _ = outcomes(
        "V006", deployment(["meta-llama/Llama-3.1-8B-Instruct", "--block-size", block])
    )
    assert message == (
        f"container 'vllm' sets block_size {block}, which is not a positive number of tokens; "
        "use 16 (vLLM's default) or another multiple of 16"
    )


def test_v006_unknown_gpu_is_enough_when_every_gpu_refuses() -> None:
    (message,), _ = outcomes(
        "V006", deployment(["meta-llama/Llama-3.1-8B-Instruct", "--block-size", "8"], gpu=None)
    )
    assert "refuses on any GPU (no pool or GPU selector names one)" in message


def test_v006_releases_that_disagree_are_not_evaluated() -> None:
    # 48 is a multiple of 16: 0.33.0 takes it, 0.12.0's --block-size choices do not.
    argv = ["meta-llama/Llama-3.1-8B-Instruct", "--block-size", "48"]
    found, skipped = outcomes("V006", deployment(argv, image="vllm/vllm-openai:v0.29.0"))
    assert found == []
    assert len(skipped) == 1 and "vLLM 0.29.0" in skipped[0]
    assert outcomes("V006", deployment(argv)) == ([], [])  # 0.33.0 itself accepts 48
    # Ray Serve LLM passes engine_kwargs, which skip the CLI choices in 0.12.0: both accept.
    assert outcomes("V006", ray_service("{block_size: 48}", "Qwen/Qwen2.5-7B-Instruct")) == (
        [],
        [],
    )


def test_v006_mla_below_hopper_on_old_releases_is_not_guessed() -> None:
    argv = ["deepseek-ai/DeepSeek-V3", "--block-size", "16"]
    found, skipped = outcomes(
        "V006",
        deployment(argv, image="vllm/vllm-openai:v0.11.0", gpu="NVIDIA-A100-SXM4-80GB"),
    )
    assert found == []
    assert skipped == [
        "container 'vllm' sets block_size 16 for vLLM 0.11.0: the MLA backends of vLLM 0.11.0 "
        "below compute capability 9 were not read"
    ]
    assert outcomes(
        "V006", deployment(argv, image="vllm/vllm-openai:v0.11.0", gpu="NVIDIA-H100-80GB-HBM3")
    ) == ([], [])


def test_v006_unknown_or_unread_versions_are_not_evaluated() -> None:
    argv = ["meta-llama/Llama-3.1-8B-Instruct", "--block-size", "8"]
    # 0.10.2's parser takes 8; its backends' limits were not read.
    _, skipped = outcomes("V006", deployment(argv, image="vllm/vllm-openai:v0.10.2"))
    assert skipped == [
        "container 'vllm' sets block_size 8 for vLLM 0.10.2: the attention backends' "
        "block-size limits of vLLM 0.10.2 were not read"
    ]
    _, skipped = outcomes("V006", deployment(argv, image="vllm/vllm-openai:v0.4.1"))
    assert len(skipped) == 1 and "not of 0.4.1" in skipped[0]  # before the first read, 0.4.2
    # 0.5.4 lies between 0.4.2 and 0.6.0, whose parsers both take 8: backends unread.
    _, skipped = outcomes("V006", deployment(argv, image="vllm/vllm-openai:v0.5.4"))
    assert len(skipped) == 1 and "block-size limits of vLLM 0.4.2 were not read" in skipped[0]
    _, skipped = outcomes("V006", deployment(argv, image="example.com/vllm:latest"))
    assert skipped == [
        "container 'vllm' sets block_size 8, but the image (example.com/vllm:latest) does not "
        "name a vLLM version (set images in the cluster profile), and the block sizes vLLM "
        "accepts depend on its version"
    ]


def _head_size(monkeypatch: pytest.MonkeyPatch, head_dim: int) -> None:
    """Serve Llama 3.1 8B as if its heads were ``head_dim`` wide (no catalogued full-
    attention model has head size 512, and the catalogued 256 ones take other kernels)."""
    from gpustrata_policies.rules.v006_block_size_valid import rule as v006
    from gpustrata_policies.view import catalogs

    arch = catalogs.model_architecture("meta-llama/Llama-3.1-8B-Instruct")
    assert arch is not None
    wide = arch.model_copy(update={"head_dim": head_dim})
    monkeypatch.setattr(v006, "site_architecture", lambda site: wide)


@pytest.mark.parametrize(
    ("head_dim", "gpu", "kv", "page"),
    [
        (512, "NVIDIA-H100-80GB-HBM3", "fp8", 64),  # FA4 FP8-KV dequant on SM90
        (256, "NVIDIA-B200", "auto", 128),  # FA4's Blackwell head-256 kernel
    ],
)
def test_v006_flash_attention_forced_page_sizes(
    monkeypatch: pytest.MonkeyPatch, head_dim: int, gpu: str, kv: str, page: int
) -> None:
    """vLLM 0.33.0's FlashAttention takes only multiples of its FA4 page there: an explicit
    FLASH_ATTN with another block size stops the engine; without the flag vLLM picks another
    backend, and a multiple of the page (or another GPU or KV dtype) is fine."""
    _head_size(monkeypatch, head_dim)
    base = ["meta-llama/Llama-3.1-8B-Instruct", "--kv-cache-dtype", kv]
    flagged = [*base, "--attention-backend", "FLASH_ATTN"]
    (message,), _ = outcomes("V006", deployment([*flagged, "--block-size", "32"], gpu=gpu))
    assert f"takes only multiples of {page}" in message
    assert "Selected backend FLASH_ATTN is not valid" in message
    assert f"head size {head_dim}" in message
    assert outcomes("V006", deployment([*flagged, "--block-size", str(page)], gpu=gpu)) == ([], [])
    assert outcomes("V006", deployment([*base, "--block-size", "32"], gpu=gpu)) == ([], [])
    assert outcomes("V006", deployment([*flagged, "--block-size", "32"])) == ([], [])  # L4
    older = deployment([*flagged, "--block-size", "32"], gpu=gpu, image="vllm/vllm-openai:v0.12.0")
    assert outcomes("V006", older)[0] == []  # not read there: no forced page assumed


def test_v006_forced_page_skips_the_models_its_kernel_does_not_serve(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Gemma 2 (logit soft-capping) runs FlashAttention 2 on Blackwell: multiples of 16."""
    argv = ["google/gemma-2-9b-it", "--attention-backend", "FLASH_ATTN", "--block-size", "32"]
    assert outcomes("V006", deployment(argv, gpu="NVIDIA-B200")) == ([], [])


def test_v005_v0_chunked_budget_was_512_before_0_6_5() -> None:
    """vLLM 0.6.1-0.6.4's V0 SchedulerConfig chunks with 512 tokens when the budget is
    unset (0.6.5 made it 2048): 1024 sequences do not fit it, and the engine stops."""
    argv = ["meta-llama/Llama-3.1-8B-Instruct", "--enable-chunked-prefill", "--max-num-seqs", "600"]
    (message,), skipped = outcomes("V005", deployment(argv, image="vllm/vllm-openai:v0.6.3.post1"))
    assert skipped == [] and "512" in message
    assert outcomes("V005", deployment(argv, image="vllm/vllm-openai:v0.6.6.post1")) == ([], [])
    # 0.6.0 is not read (it also chunks multimodal models and not with prefix caching).
    found, skipped = outcomes("V005", deployment(argv, image="vllm/vllm-openai:v0.6.0"))
    assert found == [] and skipped


def test_v005_vllm_use_v1_is_ignored_before_the_v1_engine_existed() -> None:
    """VLLM_USE_V1 first exists in 0.6.4: before it the V0 defaults still apply."""
    argv = ["meta-llama/Llama-3.1-8B-Instruct", "--enable-chunked-prefill", "--max-num-seqs", "600"]
    env = {"VLLM_USE_V1": "1"}
    old = deployment(argv, image="vllm/vllm-openai:v0.6.3.post1", env=env)
    (message,), skipped = outcomes("V005", old)
    assert skipped == [] and "512" in message
    found, skipped = outcomes("V005", deployment(argv, image="vllm/vllm-openai:v0.6.4", env=env))
    assert found == [] and "experimental V1 engine was not read" in skipped[0]


def test_v013_prefix_lookup_is_the_scan_it_replaces() -> None:
    """V013 finds the options an abbreviation may stand for with the launch-args view's
    bisect over a release's sorted flags (one helper for both): for every read release and
    the short prefixes and full names of its options, the first *most* of the same sorted
    list as scanning all of the release's ``--`` options."""
    from gpustrata.catalog.vllm_releases import accepted_flags, flag_releases
    from gpustrata_policies.view.vllm_args import flags_starting_with

    for version in flag_releases():
        sets = accepted_flags(version)
        assert sets is not None
        flags = sets[0].flags
        prefixes = {f[:n] for f in flags if f.startswith("--") for n in (*range(2, 8), len(f))}
        for base in (*sorted(prefixes), "--zzz", "--"):
            scanned = sorted(f for f in flags if f.startswith(base) and f.startswith("--"))
            for most in (1, 2, 5, len(flags)):
                assert flags_starting_with(base, flags, most) == scanned[:most], (version, base)


def test_v002_and_the_planner_name_the_same_valid_tp_sizes() -> None:
    """One list of valid TP sizes: the rule's message and the capacity planner's refusal
    (Qwen2.5-14B: 40 heads, 8 KV heads; 5, 10 and 20 divide the heads but not the KV
    heads, so vLLM refuses them)."""
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.vllm.capacity import CapacityError
    from gpustrata.vllm.kv_cache import check_parallelism

    arch = load_model_catalog().get("Qwen/Qwen2.5-14B-Instruct")
    assert arch is not None and (arch.num_attention_heads, arch.num_key_value_heads) == (40, 8)
    (rule_message,) = v002.problems(arch, 3, 1)
    with pytest.raises(CapacityError) as planner:
        check_parallelism(arch, 3, 1)
    assert rule_message.endswith("use one of 1, 2, 4, 8, 40")
    assert str(planner.value).endswith("use one of 1, 2, 4, 8, 40")
    with pytest.raises(CapacityError) as kv:
        check_parallelism(arch, 5, 1)
    assert str(kv.value).endswith("use one of 1, 2, 4, 8, 40")
