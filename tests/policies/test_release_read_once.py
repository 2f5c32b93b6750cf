"""Issue 35 (session 19): an engine's release is read once per site, and only a release read
without an unknown is kept, so every caller of a site whose image is unknown until deployment
still gets the unknown (and counts it as read)."""

from __future__ import annotations

from typing import Any

import pytest

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.evaluate import find_rule, load_config
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.view.engines import EngineSite, engine_sites, site_release
from gpustrata_policies.view.objects import K8sObject


def _site(image: Any) -> EngineSite:
    raw = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "vllm", "namespace": "default"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": image,
                            "command": ["vllm", "serve", "Qwen/Qwen3-8B"],
                            "resources": {"limits": {"nvidia.com/gpu": 1}},
                        }
                    ]
                }
            }
        },
    }
    obj = K8sObject(raw, "test.yaml")
    rule = find_rule("V001")
    assert rule is not None
    (site,) = engine_sites(RuleContext(rule.meta, load_config(None), [obj]), obj)
    return site


def test_a_known_release_is_read_once_and_equals_the_resolver() -> None:
    site = _site("vllm/vllm-openai:v0.10.1.1")
    first = site.release()
    assert first.version == "0.10.1.1"
    assert site.release() is first  # kept: the second caller reads no image
    assert site_release(site) == first  # and it is what the one resolver reads


def test_an_unknown_image_is_not_kept() -> None:
    site = _site(UNKNOWN)
    for _ in range(2):  # every caller gets the unknown, not a cached value
        with pytest.raises(UnknownInput):
            site.release()
    assert site.known_release is None
