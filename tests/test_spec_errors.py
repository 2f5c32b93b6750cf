"""Bad stack files fail before anything registers, with one line naming file, path, value, fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpustrata.catalog.hardware import load_hardware_catalog
from gpustrata.cli.app import main
from gpustrata.core.errors import StackError
from gpustrata.spec.loader import load_stack_file

AWS_FAMILIES = ", ".join(load_hardware_catalog().instance_families(aws=True))
"""The catalogued AWS GPU families the unknown-instance message lists (a new family in
instances.yaml joins it without a test change)."""

# (old text, new text, expected message after "file:line: ")
BAD_STACKS = [
    pytest.param(
        "gpu_memory_utilization: 0.9\n          dtype: bfloat16\n          max_num_seqs",
        "gpu_memory_utilization: 1.4\n          dtype: bfloat16\n          max_num_seqs",
        "gpustrata:stack.models[1].engine.gpu_memory_utilization: 1.4 is above 1.0; "
        "use a fraction such as 0.9",
        id="above-bound",
    ),
    pytest.param(
        "tensor_parallel_size: 4",
        "tensor_paralel_size: 4",
        "gpustrata:stack.models[0].engine.tensor_paralel_size: unknown key "
        "'tensor_paralel_size'; did you mean 'tensor_parallel_size'?",
        id="typo-key",
    ),
    pytest.param(
        "max_num_seqs: 64",
        "max_num_seqs: many",
        "gpustrata:stack.models[1].engine.max_num_seqs: 'many' is not a whole number; "
        "expected: vLLM --max-num-seqs",
        id="wrong-type",
    ),
    pytest.param(
        "pool: gpu-l40s\n        image",
        "pool: gpu-a100\n        image",
        "gpustrata:stack.models[1].pool: 'gpu-a100' is not a pool in node_pools; "
        "use one of 'gpu-h100', 'gpu-l40s'",
        id="unknown-pool",
    ),
    pytest.param(
        "dtype: bfloat16\n          max_num_seqs",
        "dtype: bf16\n          max_num_seqs",
        "gpustrata:stack.models[1].engine.dtype: 'bf16' is not one of 'auto', 'half', "
        "'float16', 'bfloat16', 'float' or 'float32'; use one of them",
        id="bad-literal",
    ),
    pytest.param(
        "min_size: 2\n",
        "min_size: 9\n",
        "gpustrata:stack.node_pools[1]: min_size 9 is above max_size 4; "
        "raise max_size or lower min_size",
        id="min-above-max",
    ),
    pytest.param(
        "name: gpu-h100",
        "name: GPU_H100",
        "gpustrata:stack.node_pools[0].name: 'GPU_H100' is not in the expected form; "
        "use a value such as 'gpu-h100'",
        id="bad-name",
    ),
    pytest.param(
        "eviction_hard:",
        'system_reserved:\n            nvidia.com/gpu: "0"\n          eviction_hard:',
        "gpustrata:stack.node_pools[0].kubelet.system_reserved: 'nvidia.com/gpu' cannot be "
        "reserved; the kubelet accepts only cpu, memory, ephemeral-storage, pid "
        "(GPUs are not reservable: remove it)",
        id="gpu-reservation",
    ),
    pytest.param(
        "instance_type: g6e.2xlarge",
        "instance_type: g9.2xlarge",
        "gpustrata:stack.node_pools[1].instance_type: 'g9.2xlarge' is not in the hardware "
        "catalogue; did you mean 'g4dn.2xlarge' or 'g5.2xlarge' or 'g6.2xlarge'?",
        id="unknown-instance",
    ),
    pytest.param(
        "instance_type: g6e.2xlarge",
        "instance_type: g5g.2xlarge",
        "gpustrata:stack.node_pools[1].instance_type: 'g5g.2xlarge' is not in the hardware "
        "catalogue; did you mean 'g5.2xlarge' or 'g5.xlarge' or 'g5.4xlarge'?",
        id="unknown-instance-near-family",
    ),
    pytest.param(
        "instance_type: g6e.2xlarge",
        "instance_type: m7i.2xlarge",
        "gpustrata:stack.node_pools[1].instance_type: 'm7i.2xlarge' is not in the hardware "
        "catalogue; its family is none of the catalogued AWS GPU families "
        f"({AWS_FAMILIES}); "
        "use one of their types "
        "(docs/reference/catalogue.md), or add it under catalog.instances",
        id="unknown-instance-cpu-family",
    ),
    pytest.param(
        "instance_type: g6e.2xlarge",
        "instance_type: zz-unknown",
        "gpustrata:stack.node_pools[1].instance_type: 'zz-unknown' is not in the hardware "
        "catalogue; its family is none of the catalogued AWS GPU families "
        f"({AWS_FAMILIES}); "
        "use one of their types "
        "(docs/reference/catalogue.md), or add it under catalog.instances",
        id="unknown-instance-like-none",
    ),
    pytest.param(
        "      chart_version: v26.7.0\n",
        "",
        "gpustrata:stack.gpu_operator: chart_version is required while enabled is true; pin a "
        "release such as v25.10.0, or set enabled: false when the cluster already runs the "
        "operator",
        id="operator-unpinned",
    ),
    pytest.param(
        "instance_type: g6e.2xlarge",
        "instance_type: a3-highgpu-8g",
        "gpustrata:stack.node_pools[1].instance_type: 'a3-highgpu-8g' is a gcp machine type; "
        "gpustrata plans EKS node groups, so use an AWS instance type such as 'g6e.xlarge' or "
        "'p5.48xlarge' (the catalogue's GKE and AKS types serve `gpustrata check` and "
        "`capacity`)",
        id="gke-machine-type",
    ),
    pytest.param(
        "model: meta-llama/Llama-3.1-8B-Instruct",
        "model: meta-llama/Llama-3.1-8B-Instuct",
        "gpustrata:stack.models[1].model: 'meta-llama/Llama-3.1-8B-Instuct' is not in the "
        "model catalogue and is not a path to a config.json; nearest catalogue ids: "
        "'meta-llama/Llama-3.1-8B-Instruct', 'meta-llama/Llama-3.1-70B-Instruct', "
        "'meta-llama/Llama-3.1-405B-Instruct'; or point model at the model's config.json "
        "inside the project",
        id="unknown-model-typo",
    ),
    pytest.param(
        "environment: prod",
        "environment: [prod",
        "is not valid YAML (expected ',' or ']', but got ':'); fix the syntax",
        id="yaml-syntax",
    ),
    pytest.param(
        "  gpustrata:stack:",
        "  gpustrata:stak:",
        "config.gpustrata:stack: missing; did you mean 'gpustrata:stak'?",
        id="config-key-typo",
    ),
    pytest.param(
        "    kuberay:\n      enabled: true",
        "    kuberay:\n      enabled: false",
        "gpustrata:stack.models[0].runtime: 'rayservice' needs the KubeRay operator; "
        "set kuberay.enabled: true or use runtime 'deployment'",
        id="ray-without-kuberay",
    ),
]


@pytest.mark.parametrize(("old", "new", "expected"), BAD_STACKS)
def test_bad_stack_is_one_line_exit_2(
    mutated_stack, capsys: pytest.CaptureFixture[str], old: str, new: str, expected: str
) -> None:
    path: Path = mutated_stack(old, new)
    code = main(["plan", "--file", str(path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert re.fullmatch(
        rf"gpustrata: {re.escape(str(path))}(:\d+)?: {re.escape(expected)}", lines[0]
    ), lines[0]


def test_line_numbers_point_at_the_bad_value(mutated_stack) -> None:
    path = mutated_stack("max_num_seqs: 64", "max_num_seqs: many")
    with pytest.raises(StackError) as info:
        load_stack_file(path)
    line = info.value.problems[0].line
    assert line is not None
    assert "max_num_seqs: many" in path.read_text().splitlines()[line - 1]


def test_missing_required_section(mutated_stack) -> None:
    text_path = mutated_stack("    gpu_operator:\n", "    gpu_operatr:\n")
    with pytest.raises(StackError) as info:
        load_stack_file(text_path)
    rendered = info.value.render()
    assert (
        "gpustrata:stack.gpu_operatr: unknown key 'gpu_operatr'; did you mean 'gpu_operator'?"
        in rendered
    )
    assert (
        "gpustrata:stack.gpu_operator: required key 'gpu_operator' is missing; add it" in rendered
    )


def test_missing_file_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["plan", "--file", str(tmp_path / "Pulumi.nope.yaml")])
    assert code == 2
    assert "Pulumi.nope.yaml: no such file" in capsys.readouterr().err


def test_a_disabled_operator_needs_no_chart_version(mutated_stack) -> None:
    path = mutated_stack(
        "    gpu_operator:\n      chart_version: v26.7.0\n",
        "    gpu_operator:\n      enabled: false\n",
    )
    spec = load_stack_file(path)
    assert spec.gpu_operator.chart_version is None and not spec.gpu_operator.enabled
