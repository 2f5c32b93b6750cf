"""The cluster profile (issue 30, item 2): its file format and errors, discovery next to the
manifests, each hook that turns a "not evaluated" record into an evaluated one, and
``gpustrata profile --from-nodes``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpustrata.catalog.profile import ClusterProfile
from gpustrata.cli.app import main
from gpustrata.spec.profile_file import ProfileError, load_profile_file, profile_json_schema
from gpustrata_policies.evaluate import evaluate
from gpustrata_policies.inputs.manifests import load_paths

DATA = Path(__file__).resolve().parents[1] / "data"
PROFILES = DATA / "profiles"
ONPREM = PROFILES / "onprem"
NODES = PROFILES / "nodes-kubeadm-a100.yaml"
RULES = Path(__file__).resolve().parents[2] / "policies" / "gpustrata_policies" / "rules"

ONPREM_PROFILE = """\
distribution: kubeadm
gpu_products:
  - node_label: gpuspecs=A100_40GB
    gpu: a100-sxm-40gb
images:
  - pattern: "registry.example.com/ml/vllm:*"
    vllm: 0.8.5
"""


def _check(tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    code = main(["check", *argv, "--format", "json"])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    return json.loads(out)


def _write(tmp_path: Path, text: str, name: str = "cluster.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# --------------------------------------------------------------------------- the file


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "gpu_products:\n  - node_label: gpuspecs\n    gpu: a100-sxm-40gb\n",
            ":2: profile.gpu_products[0].node_label: 'gpuspecs' is not a node label as "
            "KEY=VALUE; write it like gpuspecs=A100_40GB",
        ),
        (
            "gpu_products:\n  - node_label: a=b\n    gpu: a100-40\n",
            ":3: profile.gpu_products[0].gpu: 'a100-40' is not a GPU of the hardware catalogue",
        ),
        (
            "gpu_products:\n  - gpu: l4\n",
            ":2: profile.gpu_products[0]: state exactly one of node_label (KEY=VALUE) and "
            "instance_type for this GPU",
        ),
        (
            "pools:\n  - name: gpu\n    lables: {}\n",
            ":3: profile.pools[0].lables: unknown key 'lables'; did you mean 'labels'?",
        ),
        (
            "gpu_taints: []\npools:\n  - name: gpu\n    gpu: l4\n"
            "    min_size: 3\n    max_size: 1\n",
            ":3: profile.pools[0]: min_size 3 is above max_size 1; swap them or raise max_size",
        ),
        (
            "pools:\n  - name: gpu\n    gpu: l4\n",
            ": profile: pool gpu has GPUs but neither its taints nor gpu_taints are stated",
        ),
        (
            "distribution: eks\nadmission:\n  extended_resource_toleration: maybe\n",
            ":3: profile.admission.extended_resource_toleration: 'maybe' is not true or false",
        ),
        (
            "crds: [rayservices.ray.io]\n",
            ":1: profile.crds: 'rayservices.ray.io' is not group/Kind; write it like "
            "ray.io/RayService",
        ),
        (
            "images:\n  - pattern: 'x/*'\n    vllm: latest\n",
            ":3: profile.images[0].vllm: 'latest' is not in the expected form; write the "
            "release as 0.8.5",
        ),
        (
            "storage:\n  load_gbps: {pvc: 0}\n",
            ":2: profile.storage.load_gbps: load_gbps of pvc: 0.0 GB/s is not in (0, 1000]",
        ),
        ("distribution: eks\ndistribution: gke\n", ":2: cannot be used:"),
        ("- a list\n", ":1: profile: is not a map"),
        ("versions: {kuberay: [1]}\n", ":1: profile.versions.kuberay: a list is not a string"),
        (
            "versions: {kserve: latest}\n",
            ":1: profile.versions.kserve: 'latest' is not in the expected form; use a value "
            "such as '0.20.0'",
        ),
        (
            "versions:\n  kserve: 0.20\n",
            ":2: profile.versions.kserve: 0.2 is not a string; use a value such as '0.20.0'",
        ),
        (
            "kubeai_values: [gke.yaml]\n",
            ":1: profile.kubeai_values[0]: 'gke.yaml' is not in the expected form",
        ),
        (
            "versions: {kubeai: latest}\n",
            ":1: profile.versions.kubeai: 'latest' is not in the expected form; use a value "
            "such as '0.21.0'",
        ),
        (
            "versions: {kubernetes: 1.31}\n",
            ":1: profile.versions.kubernetes: 1.31 is not a string; use a value such as '1.31'",
        ),
        (
            "pools:\n  - name: gpu\n    gpus_per_node: '8'\n    taints: []\n",
            ":3: profile.pools[0].gpus_per_node: '8' is not a whole number",
        ),
        (
            'images:\n  - pattern: "reg\\u202e*"\n    vllm: "0.8.5"\n',
            ":2: profile.images[0].pattern: contains the invisible or control character U+202E",
        ),
    ],
)
def test_profile_errors_name_file_line_key_value_and_fix(
    tmp_path: Path, text: str, expected: str
) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ProfileError) as caught:
        load_profile_file(path)
    first = str(caught.value).splitlines()[0]
    assert first.startswith(str(path)), first
    assert expected in first, first


def test_profile_error_exits_2_with_one_line_per_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _write(tmp_path, "crds: [bad]\nstorage: {load_gbps: {pvc: -1}}\n")
    assert main(["check", str(ONPREM), "--profile", str(path)]) == 2
    err = capsys.readouterr().err.removeprefix("gpustrata: ").splitlines()
    assert [line.split(": ")[1] for line in err] == [
        "profile.crds",
        "profile.storage.load_gbps",
    ], err


def test_schema_is_exported_and_lists_every_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema", "--profile"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema == json.loads(json.dumps(profile_json_schema()))
    assert set(schema["properties"]) == set(ClusterProfile.model_fields)
    assert "gpu_products" in schema["properties"]
    assert schema["title"].endswith("(.gpustrata/cluster.yaml)")


# --------------------------------------------------------------------------- discovery


def test_profile_is_found_next_to_the_manifests_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "manifests"
    shutil.copytree(ONPREM, folder)
    (folder / ".gpustrata").mkdir()
    _write(folder / ".gpustrata", ONPREM_PROFILE)
    main(["check", str(folder)])
    text = capsys.readouterr().out
    assert text.startswith(
        f"Cluster profile: {folder / '.gpustrata' / 'cluster.yaml'} (found next to the manifests)"
    )
    # the profile is not read as a manifest (no "document without kind" record)
    report = _check(tmp_path, [str(folder)], capsys)
    assert not [n for n in report["not_evaluated"] if n["rule"] == "*"]
    assert not [n for n in report["not_evaluated"] if n["rule"] == "V013"]
    # --no-profile: the manifests alone
    report = _check(tmp_path, [str(folder), "--no-profile"], capsys)
    assert [n for n in report["not_evaluated"] if n["rule"] == "V013"]
    main(["check", str(folder / "llama-a100.yaml")])  # a file: its folder's profile
    assert capsys.readouterr().out.startswith("Cluster profile: ")


def test_a_profile_that_is_no_regular_file_is_refused_not_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "manifests"
    shutil.copytree(ONPREM, folder)
    (folder / ".gpustrata").mkdir()
    (folder / ".gpustrata" / "cluster.yaml").symlink_to(tmp_path / "nowhere.yaml")
    assert main(["check", str(folder)]) == 2
    err = capsys.readouterr().err
    assert "cluster.yaml: a symbolic link to nothing" in err, err


def test_without_a_profile_the_text_output_is_unchanged(
    capsys: pytest.CaptureFixture[str],
) -> None:
    main(["check", str(ONPREM)])
    assert not capsys.readouterr().out.startswith("Cluster profile")


# --------------------------------------------------------------------------- hooks


def _records(profile_text: str | None, objects: list[Any] | None = None) -> tuple[Any, Any]:
    objs = objects if objects is not None else load_paths([str(ONPREM)])
    profile = ClusterProfile.model_validate(_yaml(profile_text)) if profile_text else None
    report = evaluate(objs, profile=profile, profile_file="cluster.yaml")
    return report.findings, report.not_evaluated


def _yaml(text: str) -> Any:
    import yaml

    return yaml.safe_load(text)


def _reasons(records: Any, rule: str) -> list[str]:
    return [n.reason for n in records if n.rule == rule]


def _messages(findings: Any, rule: str) -> list[str]:
    return [f.message for f in findings if f.rule == rule]


def test_gpu_products_give_a_site_label_its_gpu() -> None:
    _, before = _records(None)
    # Without the profile the site label names no GPU: V003 differs between the candidate
    # GPUs (not evaluated, naming the key); V004 holds on every one of them (session 17).
    (reason,) = _reasons(before, "V003")
    assert "the GPU model is unknown" in reason and "it selects only gpuspecs=A100_40GB" in reason
    assert reason.endswith("(set gpu_products or pools in the cluster profile)"), reason
    assert not _reasons(before, "V004")
    _, gpu_only = _records("gpu_products: [{node_label: gpuspecs=A100_40GB, gpu: a100-sxm-40gb}]\n")
    assert not _reasons(gpu_only, "V004")
    # max_num_seqs' default needs the release too: the private image names none
    assert "names no vLLM release" in _reasons(gpu_only, "V012")[0]
    findings, after = _records(
        "images: [{pattern: 'registry.example.com/ml/vllm:*', vllm: v0.10.1.1}]\n"
        "gpu_products: [{node_label: gpuspecs=A100_40GB, gpu: a100-sxm-40gb}]\n"
    )
    assert not _reasons(after, "V004") and not _reasons(after, "V012")
    (message,) = _messages(findings, "V012")
    assert "NVIDIA A100 40GB (SXM4) (gpuspecs=A100_40GB (cluster profile gpu_products))" in message


def test_gpu_products_give_an_instance_type_its_gpu() -> None:
    deployment = load_paths([str(ONPREM / "llama-a100.yaml")])[0].raw
    pod = deployment["spec"]["template"]["spec"]
    pod["nodeSelector"] = {"node.kubernetes.io/instance-type": "dgx-a100-site-x"}
    _, before = _records(None, [deployment])
    assert (
        "not in the hardware catalogue (set gpu_products in the cluster profile)"
        in _reasons(before, "V004")[0]
    )
    _, after = _records(
        "gpu_products: [{instance_type: dgx-a100-site-x, gpu: NVIDIA-A100-SXM4-40GB}]\n",
        [deployment],
    )
    assert not _reasons(after, "V004")


def test_images_give_a_private_image_its_release() -> None:
    _, before = _records(None)
    (reason,) = _reasons(before, "V013")
    assert "does not name a vLLM version (set images in the cluster profile)" in reason
    _, after = _records(
        "images: [{pattern: 'registry.example.com/ml/vllm:*', vllm: v0.8.5}]\n"
        "gpu_products: [{node_label: gpuspecs=A100_40GB, gpu: a100-sxm-40gb}]\n"
    )
    assert not _reasons(after, "V013")


def test_admission_decides_k004_without_pools() -> None:
    before, _ = _records(None)
    (message,) = _messages(before, "K004")
    assert "nothing says whether the cluster's ExtendedResourceToleration" in message
    on, _ = _records("admission: {extended_resource_toleration: true}\n")
    assert not _messages(on, "K004")  # the plugin adds the nvidia.com/gpu toleration
    off, _ = _records("distribution: kubeadm\n")
    (message,) = _messages(off, "K004")
    assert "nothing says whether" not in message


def test_pools_decide_k004_with_the_profile_taints() -> None:
    profile = (
        "distribution: kubeadm\n"
        "gpu_taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]\n"
        "pools:\n  - {name: a100, labels: {gpuspecs: A100_40GB}, gpu: a100-sxm-40gb,\n"
        "     gpus_per_node: 8, min_size: 1, max_size: 2}\n"
    )
    findings, after = _records(profile)
    k004 = [f for f in findings if f.rule == "K004"]
    assert len(k004) == 1 and k004[0].enforcement == "mandatory", k004
    assert "pool a100: nvidia.com/gpu=present:NoSchedule" in k004[0].message
    assert "ExtendedResourceToleration admission plugin is off by default" in k004[0].message
    assert not _reasons(after, "V004")  # the pool gives the GPU too


def test_crds_make_k018_evaluated_on_a_bare_manifest() -> None:
    before, _ = _records(None)
    assert not _messages(before, "K018")  # silent: the cluster's CRDs are not in the input
    listed, _ = _records("crds: [monitoring.coreos.com/*]\n")
    assert not _messages(listed, "K018")
    missing, _ = _records("crds: [ray.io/RayService]\n")
    (message,) = _messages(missing, "K018")
    assert "nothing in the input installs and the cluster profile's crds do not list" in message


def test_storage_bandwidth_sets_v009_load_time() -> None:
    gpu = "gpu_products: [{node_label: gpuspecs=A100_40GB, gpu: a100-sxm-40gb}]\n"
    before, _ = _records(gpu)
    assert not _messages(before, "V009")
    after, _ = _records(gpu + "storage: {load_gbps: {pvc: 0.02}}\n")
    (message,) = _messages(after, "V009")
    assert "16.1 GB / 0.02 GB/s (pvc)" in message


def test_kuberay_version_reaches_the_operator_reader() -> None:
    from gpustrata_policies.findings import RuleContext
    from gpustrata_policies.rules.k007_shm_for_multi_gpu.rule import RULE
    from gpustrata_policies.view.kuberay import operator_version
    from gpustrata_policies.view.profile import using_profile

    ctx = RuleContext(RULE.meta, _config(), [])
    assert operator_version(ctx) is None
    profile = ClusterProfile.model_validate({"versions": {"kuberay": "v1.3.2"}})
    with using_profile(profile):
        found = operator_version(RuleContext(RULE.meta, _config(), []))
    assert found == ("1.3.2", "cluster profile versions.kuberay 1.3.2")


def _config() -> Any:
    from gpustrata_policies.evaluate import load_config

    return load_config(None)


def test_field_corpus_2_profile_turns_records_evaluated(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    corpus = str(DATA / "field-corpus-2")
    before = _check(tmp_path, [corpus], capsys)["not_evaluated"]
    after = _check(tmp_path, [corpus, "--profile", str(PROFILES / "field-corpus-2.yaml")], capsys)[
        "not_evaluated"
    ]
    # Two of its three AIBrix images are catalogued since issue 30 (vendor_images); the
    # StormService build's release is known from the profile only, but its flags are judged
    # without one since session 18: under every release from its tag's leading 0.10.0 on.
    assert len(before) - len(after) >= 1, (len(before), len(after))
    assert not [n for n in before if n["rule"] == "V013" and "aibrix" in n["reason"]]
    assert not [n for n in after if n["rule"] == "V013" and "aibrix" in n["reason"]]


# --------------------------------------------------------------------------- from nodes


def test_profile_from_nodes_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / ".gpustrata" / "cluster.yaml"
    assert main(["profile", "--from-nodes", str(NODES), "-o", str(target)]) == 0
    text = target.read_text(encoding="utf-8")
    assert text.startswith("# gpustrata cluster profile, written by `gpustrata profile")
    assert "&id" not in text and "gfd.timestamp" not in text
    profile = load_profile_file(target)
    assert profile.distribution == "kubeadm"
    assert profile.versions.kubernetes == "1.31"
    assert profile.versions.nvidia_driver == "570.133.20"
    assert [t.model_dump() for t in profile.gpu_taints or []] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    gpu_pool = next(p for p in profile.pools if p.gpus_per_node)
    assert (gpu_pool.gpu, gpu_pool.gpus_per_node) == ("NVIDIA-A100-SXM4-40GB", 8)
    assert gpu_pool.labels["gpuspecs"] == "A100_40GB"
    # the generated profile decides K004 as the Node dump itself does
    manifests = load_paths([str(ONPREM)])
    with_nodes = evaluate(manifests, context=load_paths([str(NODES)]))
    with_profile = evaluate(load_paths([str(ONPREM)]), profile=profile, profile_file=str(target))
    verdicts = [
        [(f.enforcement, f.file, f.line) for f in report.findings if f.rule == "K004"]
        for report in (with_nodes, with_profile)
    ]
    assert verdicts[0] == verdicts[1] and verdicts[0][0][0] == "mandatory", verdicts
    for report in (with_nodes, with_profile):
        (message,) = [f.message for f in report.findings if f.rule == "K004"]
        assert "nvidia.com/gpu=present:NoSchedule" in message
        assert "admission plugin is off by default" in message
    # an existing file is never overwritten
    assert main(["profile", "--from-nodes", str(NODES), "-o", str(target)]) == 2
    assert "exists" in capsys.readouterr().err


def test_profile_from_nodes_refuses_a_file_without_nodes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["profile", "--from-nodes", str(ONPREM / "llama-a100.yaml")]) == 2
    assert "holds no Node object" in capsys.readouterr().err


def test_the_reference_page_example_is_a_valid_profile(tmp_path: Path) -> None:
    from gpustrata.cli.docs import PROFILE_EXAMPLE

    profile = load_profile_file(_write(tmp_path, PROFILE_EXAMPLE))
    assert profile.distribution == "kubeadm"
    assert [p.name for p in profile.pools] == ["system", "a100"]
    objects = profile.pool_objects()
    assert objects[1]["spec"]["taints"] == [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    ]
    assert objects[0]["spec"]["taints"] == []


def test_gpu_taints_decide_k004_without_pools() -> None:
    """Without pool data K004 reads the taints GPU nodes carry from the profile."""
    untainted, _ = _records("gpu_taints: []\n")
    assert not _messages(untainted, "K004")  # the cluster's GPU nodes carry no taint
    tainted, _ = _records(
        "distribution: kubeadm\ngpu_taints: [{key: dedicated, value: gpu, effect: NoSchedule}]\n"
    )
    (message,) = _messages(tainted, "K004")
    assert "dedicated=gpu:NoSchedule" in message and "cluster profile gpu_taints" in message


def test_device_classes_decide_k018_on_a_bare_gpu_claim() -> None:
    """A bare DRA GPU claim: silent without a profile, not evaluated when the profile lists
    CRDs but not DeviceClasses (naming device_classes), reported when the profile's
    device_classes omit gpu.nvidia.com, clean when they list it."""
    claim = RULES / "k018_custom_resources_have_their_crd" / "good-bare-gpu-claim.yaml"
    objs = load_paths([str(claim)])
    found, skipped = _records(None, objs)
    assert not _messages(found, "K018") and not _reasons(skipped, "K018")
    found, skipped = _records("crds: []\n", objs)
    assert not _messages(found, "K018")
    assert any("device_classes" in r for r in _reasons(skipped, "K018"))
    found, _ = _records("device_classes: [other.example.com]\n", objs)
    (message,) = _messages(found, "K018")
    assert "DeviceClass gpu.nvidia.com" in message and "device_classes do not list" in message
    found, skipped = _records("device_classes: [gpu.nvidia.com]\n", objs)
    assert not _messages(found, "K018") and not _reasons(skipped, "K018")
