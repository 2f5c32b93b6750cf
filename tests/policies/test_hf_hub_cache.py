"""hf_hub_cache: the one reader of where vLLM keeps Hub downloads (K015 and the planner's
weight source both ask it)."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import deployment_of

from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.vllm_args import hf_hub_cache


def _container(image: str, env: dict[str, str]) -> Any:
    spec = {
        "containers": [
            {
                "name": "vllm",
                "image": image,
                "env": [{"name": k, "value": v} for k, v in env.items()],
            }
        ]
    }
    obj = K8sObject(deployment_of(spec))
    return next(iter(obj.pods()[0].containers()))


@pytest.mark.parametrize(
    ("image", "env", "download_dir", "expected"),
    [
        ("vllm/vllm-openai:v1", {"HF_HOME": "/hf"}, "/models", "/models"),
        ("vllm/vllm-openai:v1", {"HF_HUB_CACHE": "/c", "HF_HOME": "/hf"}, None, "/c"),
        ("vllm/vllm-openai:v1", {"HF_HOME": "/hf"}, None, "/hf/hub"),
        ("example.com/own:v1", {"HOME": "/home/me"}, None, "/home/me/.cache/huggingface/hub"),
        ("vllm/vllm-openai:v1", {}, None, "/root/.cache/huggingface/hub"),
        ("rayproject/ray-llm:2.4", {}, None, "/home/ray/.cache/huggingface/hub"),
        ("example.com/own:v1", {}, None, None),  # no home known: nothing assumed
    ],
)
def test_hf_hub_cache_follows_huggingface_hub(
    image: str, env: dict[str, str], download_dir: str | None, expected: str | None
) -> None:
    assert hf_hub_cache(_container(image, env), download_dir) == expected
