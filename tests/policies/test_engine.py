"""The view, vLLM argument parsing, config, unknown values and the Pulumi adapter."""

from __future__ import annotations

from typing import Any

import pytest

from gpustrata.core.quantity import parse_quantity
from gpustrata_policies import UNKNOWN, ConfigError, evaluate, load_config, objects_from_pulumi
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.vllm_args import serve_config, split_image, vllm_engine, vllm_version


def _container(**fields: Any) -> Any:
    obj = K8sObject(
        {
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", **fields}]},
        }
    )
    return next(obj.containers())


@pytest.mark.parametrize(
    ("fields", "model", "tp", "pp"),
    [
        ({"command": ["vllm", "serve", "M", "--tensor-parallel-size", "4"]}, "M", 4, 1),
        (
            {"command": ["vllm", "serve"], "args": ["M", "--tensor-parallel-size=2", "-pp", "2"]},
            "M",
            2,
            2,
        ),
        (
            {
                "image": "vllm/vllm-openai:v0.8.5",
                "args": ["--model", "M", "--tensor_parallel_size", "8"],
            },
            "M",
            8,
            1,
        ),
        (
            {
                "command": [
                    "python3",
                    "-m",
                    "vllm.entrypoints.openai.api_server",
                    "--model",
                    "M",
                    "-tp",
                    "2",
                ]
            },
            "M",
            2,
            1,
        ),
        (
            {
                "command": [
                    "sh",
                    "-c",
                    "pip install x && exec vllm serve $(MODEL) --pipeline_parallel_size 2",
                ],
                "env": [{"name": "MODEL", "value": "M"}],
            },
            "M",
            1,
            2,
        ),
        (
            {
                "command": ["/bin/bash", "-c"],
                "args": ["vllm serve ${MODEL} \\\n  --tensor-parallel-size 4"],
                "env": [{"name": "MODEL", "value": "M"}],
            },
            "M",
            4,
            1,
        ),
        (
            {
                "image": "vllm/vllm-openai:v0.9.0",
                "args": ["--model", "M"],
                "env": [
                    {
                        "name": "VLLM_ADDITIONAL_ARGS",
                        "value": "--tensor-parallel-size 2 --enforce-eager",
                    }
                ],
            },
            "M",
            2,
            1,
        ),
    ],
)
def test_vllm_flags_in_every_spelling(fields: dict[str, Any], model: str, tp: int, pp: int) -> None:
    engine = vllm_engine(_container(**fields))
    assert engine is not None and engine.complete
    assert engine.model == model
    assert (
        engine.get_int("tensor_parallel_size") or 1,
        engine.get_int("pipeline-parallel-size") or 1,
    ) == (tp, pp)


def test_booleans_and_passthrough() -> None:
    engine = vllm_engine(
        _container(
            command=["vllm", "serve", "M", "--enforce-eager", "--no-enable-prefix-caching", "$@"]
        )
    )
    assert engine is not None
    assert engine.get("enforce_eager") is True and engine.get("enable_prefix_caching") is False
    assert not engine.complete
    assert vllm_engine(_container(image="busybox:1", command=["sleep", "1"])) is None


def test_serve_config_llm_configs() -> None:
    obj = K8sObject(
        {
            "kind": "RayService",
            "metadata": {"name": "r"},
            "spec": {
                "serveConfigV2": (
                    "applications:\n- args:\n    llm_configs:\n    - model_loading_config: "
                    "{model_id: q}\n"
                    "      engine_kwargs: {tensor_parallel_size: 8, pipeline_parallel_size: 2}\n"
                    "      accelerator_type: H100\n"
                )
            },
        }
    )
    cfg = serve_config(obj)
    assert cfg is not None and cfg.engines[0].model == "q"
    assert (
        cfg.engines[0].gpus_per_engine() == 16 and cfg.llm_configs[0]["accelerator_type"] == "H100"
    )
    bad = K8sObject(
        {"kind": "RayService", "metadata": {"name": "r"}, "spec": {"serveConfigV2": "a: [b"}}
    )
    assert serve_config(bad).error  # type: ignore[union-attr]


def test_images_and_quantities() -> None:
    assert split_image("reg:5000/a/b:v1@sha256:x") == ("reg:5000/a/b", "v1", "sha256:x")
    assert split_image("reg:5000/a/b") == ("reg:5000/a/b", None, None)
    assert vllm_version("vllm/vllm-openai:v0.8.5") == "0.8.5"
    assert vllm_version("rayproject/ray:2.46.0") is None
    assert parse_quantity("500m") == parse_quantity(0.5) and parse_quantity("1Gi") == 2**30
    assert (
        parse_quantity("1e3") == 1000
        and parse_quantity("x") is None
        and parse_quantity(True) is None
    )


def test_config_thresholds_and_prod_never_relaxes() -> None:
    cfg = {
        "rules": {
            "K007": {"min_shm_size": "2Gi", "dev": {"min_shm_size": "32Mi"}},
            "gpu-requests-equal-limits": {"enforcement": "advisory"},
        }
    }
    prod = load_config(cfg, "prod")
    assert prod.threshold("K007", "min_shm_size", "1Gi") == "2Gi"
    assert load_config(cfg, "dev").threshold("K007", "min_shm_size", "1Gi") == "32Mi"
    bad = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "busybox:1",
                    "resources": {"requests": {"nvidia.com/gpu": 1}},
                }
            ]
        },
    }
    report = evaluate([bad], environment="prod", config=cfg)
    k001 = [f for f in report.findings if f.rule == "K001"]
    assert k001 and k001[0].enforcement == "mandatory" and report.exit_code == 1
    assert any("K001" in w and "ignored" in w for w in report.warnings)
    dev = evaluate([bad], environment="dev", config=cfg)
    assert [f.enforcement for f in dev.findings if f.rule == "K001"] == ["advisory"]
    with pytest.raises(ConfigError, match=r"rules\.K999: no rule"):
        load_config({"rules": {"K999": "advisory"}})
    with pytest.raises(ConfigError, match="unknown setting"):
        load_config({"rules": {"K001": {"min_shm_size": "1Gi"}}})
    with pytest.raises(ConfigError, match="is not one of dev, staging, prod"):
        load_config({}, "qa")


def test_unknown_values_are_not_evaluated_never_violations() -> None:
    sentinel = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "vllm",
                            "image": sentinel,
                            "args": ["--model", "M"],
                            "resources": {"limits": {"nvidia.com/gpu": sentinel}},
                        }
                    ]
                }
            }
        },
    }
    objects = objects_from_pulumi([("kubernetes:apps/v1:Deployment", "llm", deployment)])
    report = evaluate(objects)
    assert report.findings == []
    assert {n.rule for n in report.not_evaluated} >= {"K002", "K004", "K013"}
    assert all("unknown until the deployment runs" in n.reason for n in report.not_evaluated)
    assert objects[0]["metadata"]["name"] == "llm"
    whole = evaluate(
        [{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": UNKNOWN}]
    )
    assert whole.findings == []


def test_odd_input_never_crashes() -> None:
    odd: list[Any] = [
        {
            "kind": "Deployment",
            "metadata": "x",
            "spec": {"template": {"spec": {"containers": "nope"}}},
        },
        {"kind": "Pod", "spec": {"containers": [None, 3, {"resources": {"limits": ["x"]}}]}},
        {
            "kind": "RayService",
            "spec": {"serveConfigV2": 12, "rayClusterConfig": {"workerGroupSpecs": [7]}},
        },
        {"kind": "HorizontalPodAutoscaler", "spec": {"scaleTargetRef": "x"}},
        {"kind": "GpuNodePool", "spec": {"taints": "x", "gpuCount": "many"}},
    ]
    report = evaluate(odd)
    assert all(n.reason for n in report.not_evaluated)


def test_pulumi_adapter_kinds() -> None:
    objs = objects_from_pulumi(
        [
            ("kubernetes:core/v1:Pod", "p", {"spec": {}}),
            (
                "kubernetes:ray.io/v1:RayService",
                "rs",
                {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "named"}},
            ),
            (
                "kubernetes:helm.sh/v3:Release",
                "gpu-operator",
                {"chart": "gpu-operator", "namespace": "gpu-operator"},
            ),
            (
                "aws:eks/nodeGroup:NodeGroup",
                "ng",
                {
                    "nodeGroupName": "gpu",
                    "instanceTypes": ["p5.48xlarge"],
                    "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
                    "scalingConfig": {"minSize": 0, "maxSize": 2},
                },
            ),
            ("gpustrata:index:GpuNodePool", "pool", {"description": {"spec": {"gpuCount": 8}}}),
            ("aws:s3/bucket:Bucket", "b", {}),
        ]
    )
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [
        ("Pod", "p"),
        ("RayService", "named"),
        ("HelmRelease", "gpu-operator"),
        ("GpuNodePool", "gpu"),
        ("GpuNodePool", "pool"),
    ]
    assert objs[0]["apiVersion"] == "v1" and objs[3]["spec"]["maxSize"] == 2
