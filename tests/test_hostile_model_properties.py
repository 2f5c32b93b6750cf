"""Property-based suite for issue 33's input classes: the config.json reader
(``core.modelfiles``, and the architecture built from it) and the policy config (both
adapters validate through ``load_policy_config``). Each case ends in a value within the
bounds or in one error line naming the file or key; never another exception, a huge
allocation or a raw control character. Case counts are printed in the "property-based
cases" summary (suites ``hostile-model-config``, ``hostile-policy-config``)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from _fuzz import record
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_model_files import QWEN

from gpustrata.catalog.architectures import ModelCatalogError
from gpustrata.catalog.hf_config import architecture_from_hf_config
from gpustrata.core.modelfiles import CONFIG_BOUNDS, ModelFileError, read_model_config
from gpustrata.core.quantity import parse_quantity

BASE = QWEN  # one good config.json shape for both suites
CONTROL = st.sampled_from(["\x1b]0;x\x07", "\x1b[2J", "\u202e", "\u200b", "\x9b", "\r\n", "\x00"])
NUMBERS = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=0, max_value=2048),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, 1024, 1025, 10**12, 1e12, -1, 2**63, 1e308, -1e308]),
)
VALUES = st.one_of(
    NUMBERS,
    st.booleans(),
    st.none(),
    st.text(max_size=20),
    st.lists(st.integers(0, 3), max_size=5),
    st.builds(lambda c, s: s + c + s, CONTROL, st.text(max_size=5)),
)
KEYS = st.sampled_from([*CONFIG_BOUNDS, "layer_types", "_name_or_path", "architectures"])


def _text_of(case: tuple[str, Any]) -> bytes:
    """One hostile config.json of a class of issue 33 item 1."""
    kind, value = case
    if kind == "fields":
        return json.dumps({**BASE, **value}, allow_nan=True).encode()
    if kind == "text-config":
        return json.dumps({**BASE, "text_config": value}, allow_nan=True).encode()
    if kind == "deep":
        return ("[" * value + "]" * value).encode()
    if kind == "deep-object":
        return ('{"a": ' * value + "1" + "}" * value).encode()
    if kind == "long-int":
        return (json.dumps(BASE)[:-1] + f', "vocab_size": {"9" * value}}}').encode()
    if kind == "duplicate":
        return (json.dumps(BASE)[:-1] + f', "{value}": 1}}').encode()
    if kind == "encoding":
        return json.dumps(BASE).encode(value)
    assert kind == "bytes"
    return bytes(value)


CASES = st.one_of(
    st.tuples(st.just("fields"), st.dictionaries(KEYS, VALUES, max_size=4)),
    st.tuples(st.just("text-config"), st.dictionaries(KEYS, VALUES, max_size=4)),
    st.tuples(st.just("deep"), st.integers(1, 200_000)),
    st.tuples(st.just("deep-object"), st.integers(1, 5_000)),
    st.tuples(st.just("long-int"), st.integers(4_000, 20_000)),
    st.tuples(st.just("duplicate"), st.sampled_from(sorted(BASE))),
    st.tuples(st.just("encoding"), st.sampled_from(["utf-16", "utf-32", "utf-8-sig", "latin-1"])),
    st.tuples(st.just("bytes"), st.binary(max_size=200)),
)


@settings(
    max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(case=CASES)
def test_config_json_reader_ends_in_bounded_values_or_one_line(
    tmp_path: Path, case: tuple[str, Any]
) -> None:
    path = tmp_path / "config.json"
    path.write_bytes(_text_of(case))
    with record("hostile-model-config"):
        try:
            root = read_model_config(path, tmp_path)
        except ModelFileError as exc:
            message = str(exc)
            assert message.startswith(str(path)) and "\n" not in message, message
            assert len(message) < 500 and message.isprintable(), message
            return
        for section in (root, root.get("text_config")):
            if not isinstance(section, dict):
                continue
            for key, limit in CONFIG_BOUNDS.items():
                value = section.get(key)
                if isinstance(value, int | float) and not isinstance(value, bool):
                    assert math.isfinite(value) and 0 <= value <= limit, (key, value)
        try:
            arch = architecture_from_hf_config(path, inside=tmp_path)
        except ModelCatalogError as exc:
            assert "\n" not in str(exc) and str(exc).isprintable(), str(exc)
            return
        for text in (arch.id, arch.architecture, arch.model_type or "", arch.torch_dtype):
            assert text.isprintable() and len(text) <= 200, text


POLICIES = st.sampled_from(
    [
        "shm-for-multi-gpu",
        "concurrency-within-kv",
        "ray-head-keeps-off-gpus",
        "pinned-images",
        "K007",
        "no-such-policy",
        "x" * 5000,
    ]
)
PROPERTIES = st.sampled_from(
    [
        "minShmSize",
        "typicalSequenceTokens",
        "safetyFactor",
        "allowHeadGpus",
        "environment",
        "gpuResources",
        "min_shm_size",
        "nosuch",
    ]
)
PROPERTY_VALUES = st.one_of(
    VALUES,
    st.sampled_from(["4GB", "4Gi", "-4Gi", "1e400Gi", ".inf", "0", "64Mi", "prod", "dev"]),
    st.lists(st.text(max_size=5), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(
    config=st.dictionaries(
        POLICIES, st.dictionaries(PROPERTIES, PROPERTY_VALUES, max_size=3), max_size=3
    )
)
def test_policy_config_ends_in_usable_thresholds_or_one_line(config: dict[str, Any]) -> None:
    from gpustrata_policies.config import ConfigError
    from gpustrata_policies.evaluate import load_policy_config

    with record("hostile-policy-config"):
        try:
            cfg = load_policy_config(config)
        except ConfigError as exc:
            message = str(exc)
            assert "\n" not in message and len(message) < 600, message
            return
        shm = cfg.threshold("K007", "min_shm_size", "1Gi")
        assert isinstance(shm, str) and (parse_quantity(shm) or 0) > 0, shm
        tokens = cfg.threshold("V012", "typical_sequence_tokens", 1)
        assert isinstance(tokens, int) and not isinstance(tokens, bool) and tokens >= 1
        for rule, settings_ in cfg.rules.items():
            for key, value in settings_.items():
                if isinstance(value, float | int) and not isinstance(value, bool):
                    assert math.isfinite(value) and value >= 1, (rule, key, value)


@pytest.mark.parametrize("fixture_case", [("fields", {"num_hidden_layers": 10**12})])
def test_the_suite_meets_the_class_that_allocated_per_layer(
    tmp_path: Path, fixture_case: tuple[str, Any]
) -> None:
    """The strategy reaches the reported case (a sanity check of the generator)."""
    path = tmp_path / "config.json"
    path.write_bytes(_text_of(fixture_case))
    with pytest.raises(ModelFileError, match="num_hidden_layers"):
        read_model_config(path, tmp_path)


PROFILE_KEYS = st.sampled_from(
    [
        "distribution",
        "admission",
        "gpu_products",
        "gpu_taints",
        "pools",
        "versions",
        "images",
        "crds",
        "storage",
        "kind",
        "lables",
    ]
)
PROFILE_VALUES = st.one_of(
    VALUES,
    st.sampled_from(["eks", "kubeadm", "other", "0.10.1.1", "v0.8.5", "*", "a/b", "1e308"]),
    st.lists(
        st.dictionaries(
            st.sampled_from(
                [
                    "node_label",
                    "instance_type",
                    "gpu",
                    "gpus_per_node",
                    "pattern",
                    "vllm",
                    "key",
                    "value",
                    "effect",
                    "name",
                    "min_size",
                    "max_size",
                    "taints",
                    "labels",
                ]
            ),
            VALUES,
            max_size=4,
        ),
        max_size=3,
    ),
    st.dictionaries(
        st.sampled_from(
            [
                "kuberay",
                "kubernetes",
                "nvidia_driver",
                "huggingface",
                "extended_resource_toleration",
                "load_gbps",
            ]
        ),
        VALUES,
        max_size=3,
    ),
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=st.dictionaries(PROFILE_KEYS, PROFILE_VALUES, max_size=5), control=CONTROL)
def test_cluster_profile_reader_ends_in_a_profile_or_one_line(
    tmp_path: Path, document: dict[str, Any], control: str
) -> None:
    """The cluster profile (issue 30) is read from a file the reviewer did not write: any
    document ends in a typed profile or in errors that each name the file, one per line,
    printable; never another exception."""
    import yaml

    from gpustrata.catalog.profile import ClusterProfile
    from gpustrata.spec.profile_file import ProfileError, load_profile_file

    path = tmp_path / "cluster.yaml"
    text = yaml.safe_dump(document, allow_unicode=True) + f"# {control}\n"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    with record("hostile-cluster-profile"):
        try:
            profile = load_profile_file(path)
        except ProfileError as exc:
            for line in str(exc).splitlines():
                assert str(path) in line and line.isprintable(), line
            return
        assert isinstance(profile, ClusterProfile)
