"""Every launcher form (issue 30 item 3): each kind read from a real manifest (sources in
tests/data/launchers/SOURCES.md) yields engine sites the rules evaluate, or a "not
evaluated" record naming what its controller decides; Kubernetes' own kinds are read only
in Kubernetes' API groups (a Knative Service is no core Service)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpustrata.catalog.profile import ClusterProfile
from gpustrata_policies import UNKNOWN, evaluate
from gpustrata_policies.evaluate import find_rule, load_config
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view.engines import EngineSite, engine_sites, image_release
from gpustrata_policies.view.kinds import is_builtin, is_read_kind
from gpustrata_policies.view.kubeai import kubeai_default_images
from gpustrata_policies.view.launchers import launcher_fills, llmisvc_engine
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.profile import using_profile
from gpustrata_policies.view.templates import strategic_merge
from gpustrata_policies.view.vllm_args import vllm_engine, vllm_version

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _fuzz import junk, mutated, record

DATA = Path(__file__).resolve().parents[1] / "data"
LAUNCHERS = DATA / "launchers"


def _load(name: str, folder: Path = LAUNCHERS) -> list[K8sObject]:
    return load_paths([str(folder / name)])


def _sites(objs: list[K8sObject], obj: K8sObject) -> list[EngineSite]:
    rule = find_rule("V001")
    assert rule is not None
    return engine_sites(RuleContext(rule.meta, load_config(None), objs), obj)


def _records(objs: list[K8sObject], resource: str) -> list[str]:
    """The object's "not evaluated" records of no one rule: what its controller decides."""
    report = evaluate(objs)
    return [n.reason for n in report.not_evaluated if n.resource == resource and n.rule == "*"]


# --------------------------------------------------------------------------- API groups


def test_knative_service_is_a_workload_not_a_core_service() -> None:
    """Regression: a serving.knative.dev Service was taken for a core Service (a known kind
    with no Pods): its vLLM engine was never read and nothing was reported."""
    objs = _load("knative-service-vllm.yaml")
    (svc,) = objs
    assert svc.kind == "Service" and is_read_kind(svc) and not is_builtin(svc)
    (pod,) = svc.pods()
    assert pod.gpu_count() == 1
    (site,) = _sites(objs, svc)
    assert site.engine.model == "meta-llama/Meta-Llama-3.1-8B-Instruct"
    assert site.container is not None and site.container.name == "vllm"
    report = evaluate(objs)
    rules = {f.rule for f in report.findings if f.resource == "Service/default/llama3"}
    assert "K013" in rules  # vllm/vllm-openai:latest: the engine's Pod is checked
    assert "K021" not in rules  # no Service port check on a workload


def test_core_kinds_only_in_kubernetes_groups() -> None:
    core = K8sObject({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}})
    assert is_builtin(core, "Service") and is_read_kind(core)
    assert is_builtin(K8sObject({"apiVersion": "apps/v1", "kind": "Deployment"}))
    assert is_builtin(K8sObject({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass"}))
    assert is_builtin(K8sObject({"kind": "Deployment"}))  # no group named: read by kind
    other = K8sObject({"apiVersion": "example.com/v1", "kind": "Deployment", "spec": {}})
    assert not is_read_kind(other) and other.pods() == []
    (record,) = [n.reason for n in evaluate([other]).not_evaluated]
    assert record == "kind Deployment (example.com/v1) is not one gpustrata reads"


# --------------------------------------------------------------------------- images


def test_vllm_openai_variants_run_the_api_server() -> None:
    for image, version in (
        ("vllm/vllm-openai-rocm:v0.9.1", "0.9.1"),
        ("docker.io/vllm/vllm-openai-cpu:v0.10.0", "0.10.0"),
        ("quay.io/example/vllm-openai-ubi9:v0.8.5", "0.8.5"),
    ):
        doc = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": image, "args": ["--model", "m"]}]},
        }
        ((container,),) = [list(p.containers()) for p in K8sObject(doc).pods()]
        engine = vllm_engine(container)
        assert engine is not None and engine.model == "m", image
        assert vllm_version(image) == version
    pod = {"containers": [{"name": "c", "image": "example/openai-vllm:1", "args": ["x"]}]}
    obj = K8sObject({"kind": "Pod", "spec": pod})
    assert vllm_engine(next(obj.containers())) is None


def test_red_hat_ai_inference_server_runs_the_api_server_on_its_own_release() -> None:
    """RHAIIS's image takes vLLM's flags as its args (Red Hat's documented `podman run`);
    its tag is Red Hat's version: the vLLM release is the catalogue's mapping, never 3.0.0."""
    image = "registry.redhat.io/rhaiis/vllm-cuda-rhel9:3.0.0"
    pod = {"containers": [{"name": "c", "image": image, "args": ["--model", "m", "-tp", "2"]}]}
    obj = K8sObject({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod})
    engine = vllm_engine(next(obj.containers()))
    assert engine is not None and engine.model == "m"
    assert engine.get_int("tensor_parallel_size") == 2
    assert vllm_version(image) is None
    found = image_release(image)
    assert found is not None and found.version == "0.8.4"  # vendor_images, Red Hat's table


def test_llmisvc_pod_is_judged_with_the_tolerations_kserve_presets_add() -> None:
    """KServe's LLMInferenceServiceConfig presets (kserve/kserve@aaac4e2:config/llmisvcconfig,
    the corpus samples' own commits too) add no tolerations, so a template that states none
    is judged as written: K004's usual advisory, naming the presets. Regression: K004 said
    "not evaluated: the presets may add the tolerations" on 8 corpus pods. With baseRefs the
    configs it names may add some, and they are not among the inputs: not evaluated."""
    objs = _load("kserve-llmisvc-dp-ep-naive.yaml", DATA / "field-corpus-3")
    report = evaluate(objs)
    k004 = [f for f in report.findings if f.rule == "K004"]
    assert len(k004) == 2 and all(f.enforcement == "advisory" for f in k004)
    assert all(
        "KServe's presets add no tolerations, kserve/kserve@aaac4e2" in f.message for f in k004
    )
    assert not [n for n in report.not_evaluated if n.rule == "K004"]
    doc = copy.deepcopy(objs[0].raw)
    doc["spec"]["baseRefs"] = [{"name": "site-gpu-defaults"}]
    report = evaluate([K8sObject(doc)])
    assert not [f for f in report.findings if f.rule == "K004"]
    reasons = [n.reason for n in report.not_evaluated if n.rule == "K004"]
    assert len(reasons) == 2 and all("baseRefs" in r for r in reasons)


def test_aibrix_builds_run_the_vllm_their_build_files_name() -> None:
    """AIBrix's samples run its own builds from its mirror registry; the two whose build file
    in vllm-project/aibrix names the vllm/vllm-openai base are read as that release (the
    catalogue's vendor_images, cited), on any registry. A tag's leading version alone is not
    proof (AIBrix's P/D README tags a v0.10.2 base `v0.10.0-nixl-latest`), so the
    StormService sample's build stays unknown, and a lookalike owner does not match.
    Regression for corpus 2: V013 said "names no vLLM release" for all three."""
    registry = "aibrix-container-registry-cn-beijing.cr.volces.com"
    for image, version in (
        (f"{registry}/aibrix/vllm-openai:v0.6.2-distributed", "0.6.2"),
        (f"{registry}/aibrix/vllm-openai-aibrix-kvcache:v0.10.2-20251022", "0.10.2"),
        ("aibrix/vllm-openai-aibrix-kvcache:v0.10.2-20251022", "0.10.2"),
    ):
        found = image_release(image)
        assert found is not None and found.version == version, image
        assert "github.com/vllm-project/aibrix/blob/" in found.where
    for image in (
        "kvcache-container-image-hb2-cn-beijing.cr.volces.com/aibrix/vllm-openai:"
        "v0.10.0-cu128-nixl-v0.4.1-lmcache-0.3.2",
        "example.com/notaibrix/vllm-openai:v0.6.2-distributed",
    ):
        found = image_release(image)
        assert found is not None and found.version is None, image
    objs = _load("aibrix-deepseek-coder-7b-l20.yaml", DATA / "field-corpus-2")
    report = evaluate(objs)
    assert not [n for n in report.not_evaluated if n.rule == "V013"]
    assert not [f for f in report.findings if f.rule == "V013"]  # 0.6.2 accepts its flags


# --------------------------------------------------------------------------- kinds


def _kubeai(name: str = "kubeai-llama-3.1-70b-instruct-fp8-h100.yaml") -> list[K8sObject]:
    return _load(name)


def _kubeai_profile(release: str) -> ClusterProfile:
    return ClusterProfile.model_validate({"versions": {"kubeai": release}})


KUBEAI_IMAGE_RULES = {"V010"}
"""The rules whose records on a KubeAI Model depend on its image (so its vLLM release);
K013 and V013 pass on every chart release's default image of its profile, V005 on each
one's release (its stated budget covers max_model_len and max_num_seqs)."""


def test_kubeai_model_runs_the_pod_kubeai_builds() -> None:
    """Without versions.kubeai, what every catalogued chart release defining the Model's
    profile gives alike is read (2 GPUs for nvidia-gpu-h100:2, the nvidia.com/gpu=present
    toleration, no node selector), the vLLM image (which differs) is not."""
    objs = _kubeai()
    (model,) = objs
    assert is_read_kind(model)
    (pod,) = model.pods()
    assert pod.gpu_count() == 2  # resourceProfile nvidia-gpu-h100:2, 1 GPU per unit
    assert pod.spec["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    assert "nodeSelector" not in pod.spec
    (site,) = _sites(objs, model)
    assert site.engine.model == "neuralmagic/Meta-Llama-3.1-70B-Instruct-FP8"
    assert site.engine.get_int("tensor_parallel_size") == 2
    assert site.engine.get_int("max_model_len") == 65536
    assert site.image is UNKNOWN  # the releases' images differ: its release is not guessed
    report = evaluate(objs)
    resource = "Model/default/llama-3.1-70b-instruct-fp8-h100"
    assert not [f for f in report.findings if f.resource == resource and f.rule == "V001"]
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "limits 2 nvidia.com/gpu (2 x the profile's)" in record
    assert "tolerations nvidia.com/gpu=present:NoSchedule" in record
    assert "substratusai/kubeai@helm-chart-kubeai-0.21.0:charts/kubeai/values.yaml" in record
    assert "set versions.kubeai in the cluster profile" in record
    # the chart's defaults are assumed kept: the record names the values that replace them
    assert "assumed kept by the installation" in record
    assert "resourceProfiles.nvidia-gpu-h100" in record
    unknown = {n.rule for n in report.not_evaluated if "versions.kubeai" in n.reason}
    assert "V010" in unknown and not unknown & {"K013", "V013"}  # decided on every image
    assert "K004" not in {n.rule for n in report.not_evaluated}  # the toleration is known


def test_kubeai_values_its_installation_sets_are_named_as_such() -> None:
    """The image of a KubeAI Model's Pod is the installation's modelServers.VLLM.images:
    its records name the chart releases' images and the profile key that decides it.
    Regression: they read "image of container 'server' is unknown until the deployment
    runs" for a file check."""
    report = evaluate(_kubeai())
    reasons = {n.rule: n.reason for n in report.not_evaluated if n.rule in KUBEAI_IMAGE_RULES}
    assert set(reasons) == KUBEAI_IMAGE_RULES
    for reason in reasons.values():
        assert "differs across the KubeAI chart releases that define 'nvidia-gpu-h100'" in reason
        assert "vllm/vllm-openai:v0.8.3 in 0.20.0 to 0.21.0" in reason
        assert "(set versions.kubeai in the cluster profile)" in reason
        assert "until the deployment runs" not in reason


def test_kubeai_rules_decide_where_every_chart_release_image_agrees() -> None:
    """K013 and V013 judge the default image of every chart release defining the profile
    (vllm/vllm-openai v0.6.1.post2 ... v0.8.3, all pinned, all accepting the Model's flags):
    they pass without versions.kubeai. A flag some of those releases refuse
    (--no-enable-prefix-caching, a BooleanOptionalAction none of 0.6-0.8 has) keeps V013's
    record, naming the releases' images and the profile key."""
    (model,) = _kubeai()
    assert kubeai_default_images(model)[0] == "vllm/vllm-openai:v0.6.1.post2"
    assert kubeai_default_images(model)[-1] == "vllm/vllm-openai:v0.8.3"
    report = evaluate([model])
    assert not {n.rule for n in report.not_evaluated} & {"K013", "V013"}
    assert not {f.rule for f in report.findings} & {"K013", "V013"}
    doc = copy.deepcopy(model.raw)
    doc["spec"]["args"] = [*doc["spec"]["args"], "--no-enable-prefix-caching"]
    report = evaluate([K8sObject(doc)])
    (v013,) = [n.reason for n in report.not_evaluated if n.rule == "V013"]
    assert "(set versions.kubeai in the cluster profile)" in v013
    assert "K013" not in {n.rule for n in report.not_evaluated}
    with using_profile(_kubeai_profile("0.21.0")):  # a stated release: nothing to span
        assert kubeai_default_images(K8sObject(doc)) == ()


def test_kubeai_model_is_judged_under_each_chart_release_default_image() -> None:
    """Without versions.kubeai, V003-V012 judge the Model's engine under the vLLM release of
    each chart release's default image for its profile (0.6.1.post2 ... 0.8.3 for
    nvidia-gpu-h100), on every candidate GPU (the chart's profile selects none), and decide
    where all agree. --max-num-batched-token (an abbreviation) is read as every default
    release's parser resolves it, so the engine is complete (no V009 record). V010 splits:
    releases before 0.6.4 (V0, /health tied to the engine loop) fail on some GPU with the
    unchunked 65,536-token prompt, later ones pass; the record names both sides, the
    chart's default assumed kept, the key that replaces it and versions.kubeai."""
    objs = _kubeai()
    (site,) = _sites(objs, objs[0])
    assert site.engine.complete and site.engine.get_int("max_num_batched_tokens") == 65536
    assert site.release().version is None
    assert site.release().found is not None
    assert site.release().found.defaults[0] == "0.6.1.post2"
    assert site.release().found.defaults[-1] == "0.8.3"
    report = evaluate(objs)
    records = {n.rule: n.reason for n in report.not_evaluated}
    assert "V009" not in records and "V004" not in records
    v010 = records["V010"]
    assert "fails (step-outlasts-v0-heartbeat) under 0.6.1.post2 to 0.6.3.post1" in v010
    assert "passes under 0.6.4.post1 to 0.8.3" in v010
    assert "its GPU is unknown too" in v010
    assert "assumed kept by the installation" in v010
    assert "modelServers.VLLM.images.nvidia-gpu or the Model's spec.image" in v010
    assert v010.endswith("(set versions.kubeai in the cluster profile)")
    # chunked prefill in 2,048-token steps: no release marks the engine dead on any GPU
    doc = copy.deepcopy(objs[0].raw)
    doc["spec"]["args"] = [
        "--max-model-len=65536",
        "--max-num-batched-tokens=2048",
        "--enable-chunked-prefill",
        "--tensor-parallel-size=2",
    ]
    report = evaluate([K8sObject(doc)])
    assert "V010" not in {n.rule for n in report.not_evaluated}
    (v010,) = [f for f in report.findings if f.rule == "V010"]  # KubeAI's 3 s probe timeout
    assert v010.enforcement == "advisory" and "timeoutSeconds 3 < 5" in v010.message
    with using_profile(_kubeai_profile("0.21.0")):  # the stated release's image: no span
        (site,) = _sites(objs, objs[0])
        assert site.release().version == "0.8.3"


def test_kubeai_model_with_its_own_image_runs_that_image() -> None:
    """A KubeAI Model's spec.image is the server image KubeAI runs (lookupServerImage in
    substratusai/kubeai@v0.21.0 internal/modelcontroller/model_controller.go; docs/how-to/
    build-models-into-containers.md adds it to a Model): read, its vLLM release is known.
    Regression: the reader always left the image to the installation ("unknown")."""
    (model,) = _kubeai()
    doc = copy.deepcopy(model.raw)
    doc["spec"]["image"] = "vllm/vllm-openai:v0.8.5"
    objs = [K8sObject(doc)]
    (site,) = _sites(objs, objs[0])
    assert site.image == "vllm/vllm-openai:v0.8.5"
    report = evaluate(objs)
    rules = {n.rule for n in report.not_evaluated}
    assert not rules & {*KUBEAI_IMAGE_RULES, "K004", "*"}  # image, release, tolerations known
    assert report.findings
    for finding in report.findings:  # each says what KubeAI filled and from where
        assert "(KubeAI filled no node selector, tolerations nvidia.com/gpu=present" in (
            finding.message
        )
        assert "modelServers.VLLM.images" not in finding.message  # its own, not filled


def test_kubeai_chart_release_in_the_profile_fills_the_image() -> None:
    """With versions.kubeai 0.21.0 the Pod runs that chart's modelServers.VLLM.images
    nvidia-gpu image, vllm/vllm-openai:v0.8.3; nothing is left to the installation, so no
    "*" record, and each finding names the chart's values it was read with."""
    objs = _kubeai()
    (model,) = objs
    report = evaluate(objs, profile=_kubeai_profile("0.21.0"))
    with using_profile(_kubeai_profile("0.21.0")):
        (server,) = _kubeai()[0].pods()[0].containers()
    assert server.image == "vllm/vllm-openai:v0.8.3"
    assert not [n for n in report.not_evaluated if n.rule == "*" or "KubeAI" in n.reason]
    v010 = [f.message for f in report.findings if f.rule == "V010"]
    assert v010 and "runs vLLM 0.8.3 (image vllm/vllm-openai:v0.8.3)" in v010[0]
    assert (
        "image vllm/vllm-openai:v0.8.3 (modelServers.VLLM.images): KubeAI chart 0.21.0's "
        "default values (substratusai/kubeai@helm-chart-kubeai-0.21.0:charts/kubeai/values.yaml)"
    ) in v010[0]
    older = evaluate(_kubeai(), profile=_kubeai_profile("v0.13.0"))
    v010 = [f.message for f in older.findings if f.rule == "V010"]
    assert not v010 or "vllm/vllm-openai:v0.7.2" in v010[0]
    assert "KubeAI chart 0.13.0's default values" in next(
        f.message for f in older.findings if f.resource == model.resource
    )


def test_kubeai_values_file_gives_the_profile_its_node_selector() -> None:
    """KubeAI's GKE install (helm -f values-gke.yaml, the chart's own file) pins
    nvidia-gpu-h100 to cloud.google.com/gke-accelerator=nvidia-h100-80gb: with it in the
    profile the GPU model is known and V003 / V004 / V012 are evaluated on the H100."""
    profile = ClusterProfile.model_validate(
        {"versions": {"kubeai": "0.21.0"}, "kubeai_values": ["values-gke.yaml"]}
    )
    with using_profile(profile):
        (pod,) = _kubeai()[0].pods()
    assert pod.spec["nodeSelector"] == {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
        "cloud.google.com/gke-spot": "true",
    }
    report = evaluate(_kubeai(), profile=profile)
    assert not {"V003", "V004", "V012"} & {n.rule for n in report.not_evaluated}
    (v012,) = [f.message for f in report.findings if f.rule == "V012"]
    assert "on NVIDIA H100 80GB" in v012
    assert "KubeAI chart 0.21.0's default values with values-gke.yaml" in v012
    assert "charts/kubeai/values.yaml + values-gke.yaml" in v012
    without = evaluate(_kubeai(), profile=_kubeai_profile("0.21.0"))
    # Without the values file no GPU is named: V003 differs between the candidate GPUs; V004
    # and V012 give the same verdict on every one (session 17), a finding names them all.
    unjudged = {n.rule for n in without.not_evaluated}
    assert "V003" in unjudged and not {"V004", "V012"} & unjudged
    on_all = [f.message for f in without.findings if f.rule in ("V004", "V012")]
    assert on_all and all("every catalogued GPU it can" in m for m in on_all)


def test_kubeai_values_file_the_release_lacks_reads_nothing() -> None:
    """values-eks.yaml first ships with chart 0.8.0: at 0.7.0 nothing of the chart is read."""
    profile = ClusterProfile.model_validate(
        {"versions": {"kubeai": "0.7.0"}, "kubeai_values": ["values-eks.yaml"]}
    )
    report = evaluate(_kubeai(), profile=profile)
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "KubeAI chart 0.7.0 has no values-eks.yaml beside its values.yaml" in record
    assert "it has values-gke.yaml" in record


def test_kubeai_profile_requests_are_multiplied() -> None:
    """KubeAI multiplies each of the profile's requests and limits by the Model's multiple
    (getModelConfig's Quantity.Mul): nvidia-gpu-l4:8 asks 8 GPUs, 48 CPUs and 192Gi."""
    (model,) = _kubeai("kubeai-llama-3.1-70b-instruct-fp8-l4.yaml")
    (pod,) = model.pods()
    (server,) = pod.containers()
    assert server.raw["resources"] == {
        "limits": {"nvidia.com/gpu": "8"},
        "requests": {"nvidia.com/gpu": "8", "cpu": "48", "memory": "192Gi"},
    }
    assert pod.gpu_count() == 8


def test_kubeai_release_not_catalogued_guesses_nothing() -> None:
    """A versions.kubeai the catalogue does not hold reads nothing of the chart: the
    tolerations, GPUs and image stay the installation's, and the records say why."""
    objs = _kubeai()
    report = evaluate(objs, profile=_kubeai_profile("0.99.0"))
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "KubeAI chart 0.99.0 (cluster profile versions.kubeai) is not catalogued" in record
    reasons = {n.rule: n.reason for n in report.not_evaluated}
    assert "is not catalogued" in reasons["K004"]  # tolerations not guessed
    assert "is not catalogued" in reasons["V013"]  # nor the image


def test_kubeai_profile_of_the_installation_guesses_no_gpu() -> None:
    """A resource profile no catalogued chart release defines is the installation's own:
    its GPUs, tolerations and image are not guessed from its name. Regression: any
    nvidia-gpu-* profile was read as one GPU per unit."""
    (model,) = _kubeai()
    doc = copy.deepcopy(model.raw)
    doc["spec"]["resourceProfile"] = "nvidia-gpu-b200:8"
    objs = [K8sObject(doc)]
    report = evaluate(objs)
    reasons = {n.rule: n.reason for n in report.not_evaluated}
    assert "defines the resource profile 'nvidia-gpu-b200'" in reasons["*"]
    assert "installation's own" in reasons["V001"] and "installation's own" in reasons["K004"]
    assert not [f for f in report.findings if f.rule in ("V001", "K004")]


def test_kubeai_model_of_another_engine_is_not_read_as_vllm() -> None:
    obj = K8sObject(
        {
            "apiVersion": "kubeai.org/v1",
            "kind": "Model",
            "metadata": {"name": "g"},
            "spec": {"engine": "OLlama", "resourceProfile": "nvidia-gpu-l4:1"},
        }
    )
    assert obj.pods() == []
    (record,) = launcher_fills(obj)
    assert "engine 'OLlama'" in record
    assert launcher_fills(K8sObject({"apiVersion": "example.com/v1", "kind": "Model"})) == []


def test_rolebasedgroup_roles_from_templates_and_patches() -> None:
    objs = _load("rbg-vllm-pd-disagg-with-mooncake-te.yaml")
    rbg = next(o for o in objs if o.kind == "RoleBasedGroup")
    assert is_read_kind(rbg)
    roles = {p.role: p for p in rbg.pods()}
    assert set(roles) == {"role 'router'", "role 'prefill'", "role 'decode'"}
    prefill = roles["role 'prefill'"]
    (vllm,) = prefill.containers()
    assert vllm.image == "vllm/vllm-openai:latest"  # from roleTemplates 'vllm-base'
    assert [e["name"] for e in vllm.env()] == ["POD_IP"]  # kept through the patch
    assert prefill.gpu_count() == 1
    sites = _sites(objs, rbg)
    assert [s.gpu_pod.role for s in sites if s.gpu_pod] == ["role 'prefill'", "role 'decode'"]
    assert all(s.engine.model == "Qwen/Qwen3-0.6B" for s in sites)
    assert all(s.engine.get_int("tensor_parallel_size") == 1 for s in sites)
    assert _records(objs, rbg.resource) == []


def test_aibrix_stormservice_roles_are_pods() -> None:
    objs = _load("aibrix-stormservice-1p1d.yaml", DATA / "field-corpus-2")
    (storm,) = objs
    assert is_read_kind(storm)
    sites = _sites(objs, storm)
    assert [s.gpu_pod.role for s in sites if s.gpu_pod] == ["role 'prefill'", "role 'decode'"]
    assert all(s.engine.model == "/models/Qwen3-8B" for s in sites)
    assert all(s.gpu_pod is not None and s.gpu_pod.gpu_count() == 1 for s in sites)
    # No readinessProbe, no aibrix-runtime sidecar (no model.aibrix.ai/sidecar-injection
    # annotation), and AIBrix's gateway routes to Ready Pods: V011 is real.
    report = evaluate(objs)
    assert sorted(f.rule for f in report.findings if f.enforcement == "mandatory") == [
        "V011",
        "V011",
    ]
    many = {
        "apiVersion": "orchestration.aibrix.ai/v1alpha1",
        "kind": "StormService",
        "metadata": {"name": "tp"},
        "spec": {
            "template": {
                "spec": {
                    "roles": [
                        {
                            "name": "decode",
                            "podGroupSize": 2,
                            "template": {"spec": {"containers": [{"name": "c"}]}},
                        }
                    ]
                }
            }
        },
    }
    obj = K8sObject(many)
    assert obj.pods() == []
    (record,) = launcher_fills(obj)
    assert "podGroupSize 2 Pods" in record and "not evaluated" in record


def test_llmaz_playground_runs_the_pod_llmaz_builds_from_its_openmodel() -> None:
    objs = _load("llmaz-huggingface-playground.yaml")
    model, playground = objs
    assert is_read_kind(model) and is_read_kind(playground)
    report = evaluate(objs)  # gives the Playground its claimed OpenModel
    assert model.pods() == []
    (pod,) = playground.pods()
    assert pod.gpu_count() == 1  # flavor t4: nvidia.com/gpu 1
    (site,) = _sites(objs, playground)
    assert site.engine.model == "/workspace/models/models--facebook--opt-125m"
    assert site.engine.get("served_model_name") == "opt-125m" and site.engine.port == 8080
    assert site.image is UNKNOWN
    assert not [f for f in report.findings if f.rule in {"V001", "V011", "V009"}]
    assert _records(objs, model.resource) == []
    (record,) = _records(objs, playground.resource)
    assert "read as the Pod llmaz builds from the claimed OpenModel 'opt-125m'" in record
    # Without its OpenModel the Playground's Pods are llmaz's: said, not built.
    alone = [playground]
    assert evaluate(alone) and playground.pods() == []
    (record,) = _records(alone, playground.resource)
    assert "BackendRuntime 'vllm'" in record and "not among the checked objects" in record


def test_llmisvc_engine_from_parallelism_and_additional_args() -> None:
    objs = _load("kserve-llmisvc-dp-ep-deepseek-r1-gpu-naive.yaml")
    (svc,) = objs
    for part in ("template", "worker"):
        engine = llmisvc_engine(svc, part)
        assert engine is not None
        assert engine.model == "/mnt/models"
        assert engine.get_int("tensor_parallel_size") == 1
        assert engine.get_int("data_parallel_size") == 16
        assert engine.get_int("data_parallel_size_local") == 8
        assert engine.get("enable_expert_parallel") is True
        assert engine.get_int("max_model_len") == 8192  # VLLM_ADDITIONAL_ARGS
        assert engine.get("enforce_eager") is True
    (record,) = [r for r in _records(objs, svc.resource) if r.startswith("LLMInferenceService")]
    assert (
        "template and worker read as `vllm serve /mnt/models` with data_parallel_size=16" in record
    )
    assert "8 GPU(s) per Pod (tensor 1 x local data parallel 8) against 8" in record


def test_llmisvc_with_its_own_command_is_read_as_written() -> None:
    doc = {
        "apiVersion": "serving.kserve.io/v1alpha2",
        "kind": "LLMInferenceService",
        "metadata": {"name": "x"},
        "spec": {"template": {"containers": [{"name": "main", "command": ["vllm", "serve"]}]}},
    }
    assert llmisvc_engine(K8sObject(doc)) is None


def test_dynamo_services_are_pods_and_the_worker_is_said_not_evaluated() -> None:
    objs = _load("ai-dynamo-dynamo-vllm-disagg-multinode.yaml", DATA / "field-corpus-1")
    (dgd,) = objs
    assert is_read_kind(dgd)
    pods = {p.role: p for p in dgd.pods()}
    assert set(pods) == {"service 'Frontend'", "service 'decode'", "service 'prefill'"}
    assert pods["service 'decode'"].gpu_count() == 1  # resources.limits.gpu
    assert pods["service 'Frontend'"].gpu_count() == 0
    records = _records(objs, dgd.resource)
    assert not [r for r in records if "not one gpustrata reads" in r]
    (record,) = records
    assert (
        "'decode' runs `python3 -m dynamo.vllm` (tensor_parallel_size 2, 1 GPU(s) per Pod, "
        "multinode.nodeCount 2: 2 Pods)" in record
    )
    assert "'prefill' runs" in record and "'Frontend'" not in record


def test_strategic_merge_by_name() -> None:
    base = {"spec": {"containers": [{"name": "a", "image": "i", "env": [{"name": "X"}]}]}}
    patch = {"spec": {"containers": [{"name": "a", "args": ["y"]}, {"name": "b"}]}}
    merged = {"name": "a", "image": "i", "env": [{"name": "X"}], "args": ["y"]}
    assert strategic_merge(base, patch) == {"spec": {"containers": [merged, {"name": "b"}]}}
    assert strategic_merge({"a": [1, 2]}, {"a": [3]}) == {"a": [3]}


def test_rolebasedgroup_leader_worker_pattern_patches_each_part() -> None:
    (rbg,) = _load("rbg-leader-worker-pattern.yaml")
    pods = {p.role: p for p in rbg.pods()}
    assert set(pods) == {
        "role 'prefill' leader",
        "role 'prefill' worker",
        "role 'decode' leader",
        "role 'decode' worker",
    }
    for part in ("leader", "worker"):
        (nginx,) = pods[f"role 'prefill' {part}"].containers()
        assert nginx.literal_env() == {"ROLE": part}
        assert pods[f"role 'prefill' {part}"].labels == {"app": "inference", "role": part}
    (decode,) = pods["role 'decode' leader"].containers()  # templateRef 'base-template'
    assert str(decode.image).endswith("nginx:1.14.1-8.6") and decode.env() == []


def test_inferenceservice_runs_the_pod_kserve_merges_from_its_runtime() -> None:
    objs = _load("rhoai-api-docs-multi-gpu-model.yaml")
    report = evaluate(objs)  # attaches each InferenceService's runtime
    isvc = next(o for o in objs if o.kind == "InferenceService")
    assert isvc.merged_with is not None
    (pod,) = isvc.pods()
    (main,) = pod.containers()
    assert main.image == "quay.io/modh/vllm:rhoai-2.20-cuda"  # the runtime's
    assert "--tensor-parallel-size=4" in main.raw["args"]  # the runtime's args
    assert pod.gpu_count() == 4  # the InferenceService's resources
    assert main.resources("limits")["memory"] == "192Gi"
    assert [t["key"] for t in pod.spec["tolerations"]] == ["nvidia.com/gpu", "nvidia.com/gpu-model"]
    assert pod.volumes()["shm"]["emptyDir"]["sizeLimit"] == "32Gi"  # the runtime's /dev/shm
    # quay.io/modh/vllm names no command and its entrypoint is not catalogued: said, not guessed
    (record,) = [n.reason for n in report.not_evaluated if n.resource == isvc.resource]
    assert "entrypoint is not known" in record


def test_inferenceservice_auto_selects_the_vllm_runtime_and_its_engine() -> None:
    """kserve/kserve's ClusterServingRuntime with an InferenceService of its model format:
    the engine is the runtime's command with the InferenceService's args after its own."""
    isvc = K8sObject(
        {
            "apiVersion": "serving.kserve.io/v1beta1",
            "kind": "InferenceService",
            "metadata": {"name": "qwen", "namespace": "llm"},
            "spec": {
                "predictor": {
                    "model": {
                        "modelFormat": {"name": "vllm"},
                        "storageUri": "hf://Qwen/Qwen2.5-7B-Instruct",
                        "args": ["--tensor-parallel-size=2"],
                        "resources": {"limits": {"nvidia.com/gpu": "2"}},
                    }
                }
            },
        }
    )
    objs = [*_load("kserve-vllmserver-runtime.yaml"), isvc]
    report = evaluate(objs)
    assert isvc.merged_with is not None
    (site,) = _sites(objs, isvc)
    assert site.engine.get_int("tensor_parallel_size") == 2
    assert site.engine.get("served_model_name") == "qwen"  # {{.Name}}
    assert site.gpu_pod is not None and site.gpu_pod.gpu_count() == 2
    assert not [f for f in report.findings if f.resource == isvc.resource and f.rule == "V001"]
    alone = evaluate([isvc])
    (record,) = [n.reason for n in alone.not_evaluated if n.rule == "*"]
    assert "modelFormat 'vllm': not among the checked objects" in record


def test_rolebasedgroupset_reads_its_group_template() -> None:
    (rbgs,) = _load("rbgs-base.yaml")
    assert is_read_kind(rbgs)
    roles = {p.role: p for p in rbgs.pods()}
    assert set(roles) == {"role 'prefill'", "role 'decode'"}
    assert roles["role 'decode'"].replicas == 2
    where = ("spec", "groupTemplate", "spec", "roles", 0, "standalonePattern", "template", "spec")
    assert roles["role 'prefill'"].path == where


# --------------------------------------------------------------------------- odd input


def test_a_launcher_field_known_only_at_deploy_time_is_one_record() -> None:
    for api, kind, spec, what in (
        ("nvidia.com/v1alpha1", "DynamoGraphDeployment", {"services": UNKNOWN}, "spec.services"),
        (
            "serving.kserve.io/v1alpha2",
            "LLMInferenceService",
            {"parallelism": UNKNOWN, "template": {"containers": [{"name": "main"}]}},
            "spec.parallelism",
        ),
        ("workloads.x-k8s.io/v1alpha2", "RoleBasedGroup", {"roles": UNKNOWN}, "roles"),
        ("kubeai.org/v1", "Model", {"engine": UNKNOWN}, "spec.engine"),
        (
            "kubeai.org/v1",
            "Model",
            {"engine": "VLLM", "resourceProfile": UNKNOWN},
            "spec.resourceProfile",
        ),
    ):
        doc = {"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, "spec": spec}
        report = evaluate([doc])
        assert not [f for f in report.findings if f.internal]
        (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
        assert record == (
            f"{kind}: {what} is unknown until the deployment runs, so what its controller "
            "builds is not evaluated"
        )


SEEDS = [[dict(o.raw) for o in _load(p.name)] for p in sorted(LAUNCHERS.glob("*.yaml"))] + [
    [dict(o.raw) for o in _load(name, DATA / corpus)]
    for corpus, name in (
        ("field-corpus-1", "ai-dynamo-dynamo-vllm-disagg-multinode.yaml"),
        ("field-corpus-3", "kthena-vllm-pd-multinode.yaml"),
        ("field-corpus-3", "kthena-booster-deepseek-r1-distill-llama-8b.yaml"),
        ("field-corpus-3", "production-stack-operator-vllmruntime.yaml"),
        ("field-corpus-3", "odh-workload-single-node-pd.yaml"),
    )
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@pytest.mark.slow  # over 4 s: see CONTRIBUTING.md, fast feedback
def test_launchers_survive_odd_values(data: st.DataObject) -> None:
    """The readers of each launcher kind (pods, runtimes, records) never crash the
    evaluation on odd or unknown values: every rule reports, none internally fails."""
    objects = copy.deepcopy(data.draw(st.sampled_from(SEEDS)))
    odd = junk(unknown=UNKNOWN)
    for _ in range(data.draw(st.integers(1, 3))):
        index = data.draw(st.integers(0, len(objects) - 1))
        objects[index] = data.draw(mutated(objects[index], odd, max_steps=4))
    with record("launchers-odd-values"):
        report = evaluate([K8sObject(o) for o in objects if isinstance(o, dict)])
    assert not [f for f in report.findings if f.internal]
    assert all(n.reason for n in report.not_evaluated)


# ---------------------------------------------------------- kthena, production-stack

CORPUS3 = DATA / "field-corpus-3"


def test_kthena_modelserving_roles_are_entry_and_worker_pods_of_one_engine() -> None:
    """Regression (kind not read): each role's entry and worker Pods are read; V001 counts the
    role's group (entry 1 GPU + 1 worker x 1 GPU = TP 1 x PP 2) and K007 does not ask a
    one-GPU Pod of a group for NCCL's /dev/shm; an entry alone (no workers) with the Ray
    executor is not evaluated by V001 (the Ray cluster it joins holds the other GPUs)."""
    objs = _load("kthena-vllm-pd-multinode.yaml", CORPUS3)
    (ms,) = objs
    assert is_read_kind(ms)
    assert [p.role for p in ms.pods()] == [
        "role 'prefill' entry",
        "role 'prefill' worker",
        "role 'decode' entry",
        "role 'decode' worker",
    ]
    engines = [s for s in _sites(objs, ms)]
    assert {s.engine.get_int("pipeline_parallel_size") for s in engines} == {2}
    report = evaluate(objs)
    assert [f for f in report.findings if f.rule in ("V001", "K007")] == []
    alone = copy.deepcopy(ms.raw)
    for role in alone["spec"]["template"]["roles"]:
        role["workerReplicas"] = 0
    report = evaluate([K8sObject(alone)])
    skipped = [n.reason for n in report.not_evaluated if n.rule == "V001"]
    assert len(skipped) == 2 and all("Ray cluster it joins" in r for r in skipped)


def test_kthena_modelbooster_runs_the_command_kthena_writes() -> None:
    """The ModelBooster's server worker is the Pod kthena builds: its config keys become
    flags verbatim (``maxModelLen`` -> ``--maxModelLen``, which vLLM's parser refuses: V013),
    the model path is the cache's MD5 folder, and the record says what is not read."""
    objs = _load("kthena-booster-deepseek-r1-distill-llama-8b.yaml", CORPUS3)
    (mb,) = objs
    (pod,) = mb.pods()
    (engine,) = [c for c in pod.containers() if c.name == "engine"]
    command = engine.raw["command"]
    assert command[:5] == [
        "python3",
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        "/tmp/test/"
        + __import__("hashlib").md5(b"s3://model-bucket/deepseek-r1-distill-llama-8b").hexdigest(),
    ]
    assert command[5:] == ["--maxModelLen", "12288"]
    v013 = [f for f in evaluate(objs).findings if f.rule == "V013"]
    assert len(v013) == 1 and "--maxModelLen" in v013[0].message
    (record,) = _records(objs, mb.resource)
    assert "kthena builds" in record and "runtime sidecar" in record
    multi = copy.deepcopy(mb.raw)
    multi["spec"]["backend"]["workers"][0]["pods"] = 2
    obj = K8sObject(multi)
    assert obj.pods() == [] and "several Pods" in launcher_fills(obj)[0]


def test_production_stack_vllmruntime_runs_the_deployment_its_operator_builds() -> None:
    """Regression (kind not read): the VLLMRuntime's Pod is the operator's Deployment: `vllm
    serve <modelURL>` with the spec's flags, registry/name as the image, resources.gpu of
    gpuType, the storage PVC at /data (so K015 sees the download has a volume)."""
    objs = _load("production-stack-operator-vllmruntime.yaml", CORPUS3)
    (rt,) = objs
    (pod,) = rt.pods()
    (c,) = pod.containers()
    assert c.image == "docker.io/lmcache/vllm-openai:2025-05-27-v1"
    assert c.gpu_limit() == 1 and pod.replicas == 2
    engine = vllm_engine(c)
    assert engine is not None and engine.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert engine.get_int("max_model_len") == 4096 and engine.get_int("max_num_seqs") == 32
    assert engine.get("enable_prefix_caching") is False
    assert [v["mountPath"] for v in c.raw["volumeMounts"]] == ["/data"]
    rules = {f.rule for f in evaluate(objs).findings}
    assert "K015" not in rules and "V001" not in rules


def test_llmisvc_config_alone_and_podmonitoring_are_read() -> None:
    """An LLMInferenceServiceConfig alone is one record saying it builds no Pod; a GKE
    PodMonitoring is a known scrape object (no record, no finding)."""
    config = _load("odh-workload-single-node-pd.yaml", CORPUS3)
    (record,) = _records(config, config[0].resource)
    assert "spec.baseRefs" in record
    objs = _load("inference-perf-kubecon-vllm.yaml", CORPUS3)
    (mon,) = [o for o in objs if o.kind == "PodMonitoring"]
    assert is_read_kind(mon)
    assert [n for n in evaluate(objs).not_evaluated if n.resource == mon.resource] == []


def test_llmisvc_is_read_merged_over_the_configs_its_baserefs_name() -> None:
    """Regression (the service was "not evaluated" for naming baseRefs): with the
    LLMInferenceServiceConfig among the inputs the service is read as KServe merges it
    (the config's image and `vllm serve` script, the service's GPUs); the config gives no
    record of its own; a handler-less probe override is not judged as a whole probe; without
    the config the service says its baseRefs are not among the checked objects."""
    objs = _load("kserve-llmisvc-baserefs-gpt-oss.yaml")
    config, svc = objs
    report = evaluate(objs)
    (pod,) = svc.pods()
    (main,) = pod.containers()
    assert main.image == "ghcr.io/llm-d/llm-d-cuda:v0.9.0" and main.gpu_limit() == 1
    engine = vllm_engine(main)
    assert engine is not None and engine.model == "/mnt/models"
    # KServe renders the config's {{ .Spec.Model.Name }} from the service (ReplaceVariables)
    assert engine.get("served_model_name") == "RedHatAI/gpt-oss-20b"
    assert _records(objs, config.resource) == []
    (record,) = _records(objs, svc.resource)
    assert "merged over its baseRefs 'llmisvc-intelligent-inference-scheduling'" in record
    assert not [f for f in report.findings if f.rule == "V011"]
    (v011,) = [n.reason for n in report.not_evaluated if n.rule == "V011"]
    assert "states no handler" in v011
    alone = [K8sObject(copy.deepcopy(svc.raw))]
    records = _records(alone, svc.resource)
    assert any("not among the checked objects, so not evaluated" in r for r in records)
    assert next(alone[0].pods()[0].containers()).image is None


def _kserve(release: str | None) -> ClusterProfile | None:
    return ClusterProfile.model_validate({"versions": {"kserve": release}}) if release else None


def test_llmisvc_without_the_kserve_release_names_the_profile_key() -> None:
    """Without ``versions.kserve`` the presets' image, probes and /dev/shm stay unread, and
    the record names the key that decides them (issue 30: controller presets)."""
    objs = _load("kserve-kserve-llmisvc-qwen2-7b-gpu.yaml", DATA / "field-corpus-1")
    (record,) = _records(objs, objs[0].resource)
    assert "set versions.kserve in the cluster profile" in record
    (pod,) = objs[0].pods()
    assert next(pod.containers()).image is None


def test_llmisvc_is_merged_over_the_kserve_release_presets() -> None:
    """With ``versions.kserve: 0.20.0`` the single-node service runs the image, probes and
    1 GiB /dev/shm of kserve/kserve@v0.20.0:config/llmisvcconfig/config-llm-template.yaml
    under its own spec (its livenessProbe wins), and the record says what the controller
    filled; 0.18.0's preset gives another image, an uncatalogued release says so."""
    objs = _load("kserve-kserve-llmisvc-qwen2-7b-gpu.yaml", DATA / "field-corpus-1")
    svc = objs[0]
    stated = svc.raw["spec"]["template"]["containers"][0]["livenessProbe"]
    report = evaluate(objs, profile=_kserve("0.20.0"))
    (pod,) = svc.pods()
    main = next(pod.containers())
    assert main.image == "ghcr.io/llm-d/llm-d-cuda:v0.8.0"
    assert main.raw["startupProbe"]["failureThreshold"] == 60
    assert main.raw["livenessProbe"] == stated
    shm = [v for v in pod.spec["volumes"] if v["name"] == "dshm"]
    assert shm == [{"emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}, "name": "dshm"}]
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "KServe's presets kserve/kserve@v0.20.0:config/llmisvcconfig/" in record
    assert "image ghcr.io/llm-d/llm-d-cuda:v0.8.0" in record and "livenessProbe" not in record
    evaluate(objs, profile=_kserve("v0.18.0"))
    assert next(svc.pods()[0].containers()).image == "ghcr.io/llm-d/llm-d-cuda:v0.6.0"
    report = evaluate(objs, profile=_kserve("0.9.0"))
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "KServe 0.9.0's presets are not catalogued" in record and "0.20.0" in record


def test_llmisvc_shapes_pick_the_presets_kserve_picks() -> None:
    """Regression per shape: a data-parallel worker gets the worker preset (8 GiB /dev/shm at
    0.20.0) in both Pods; P/D gets the prefill and decode templates; the baseRefs fixture
    has its handler-less readinessProbe completed by the preset, so V011 is evaluated."""
    objs = _load("kserve-kserve-llmisvc-dp-ep-deepseek-r1.yaml", DATA / "field-corpus-1")
    report = evaluate(objs, profile=_kserve("0.20.0"))
    pods = objs[0].pods()
    assert len(pods) == 2
    for pod in pods:
        (shm,) = [v for v in pod.spec["volumes"] if v["name"] == "dshm"]
        assert shm["emptyDir"]["sizeLimit"] == "8Gi"
    assert any("config-llm-worker-data-parallel.yaml" in n.reason for n in report.not_evaluated)
    objs = _load("kserve-llmisvc-pd-qwen2-7b-gpu.yaml", DATA / "field-corpus-3")
    report = evaluate(objs, profile=_kserve("0.20.0"))
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "config-llm-prefill-template.yaml" in record
    assert "config-llm-decode-template.yaml" in record
    objs = _load("kserve-llmisvc-baserefs-gpt-oss.yaml")
    report = evaluate(objs, profile=_kserve("0.20.0"))
    assert not [n for n in report.not_evaluated if n.rule == "V011"]
    (record,) = [n.reason for n in report.not_evaluated if n.rule == "*"]
    assert "under them KServe's presets kserve/kserve@v0.20.0:" in record
    # the baseRefs config states image and liveness: the presets filled neither
    assert "image" not in record.split("filled")[1] and "livenessProbe" not in record


def test_kserve_preset_catalogue_cites_each_release_tag() -> None:
    """Every catalogued preset cites the kserve tag it was read at, and only exact releases
    are looked up (a patch release may change the presets)."""
    from gpustrata.catalog.kserve import kserve_preset, kserve_releases

    releases = kserve_releases()
    assert releases[0] == "0.16.0" and "0.20.0" in releases
    for release in releases:
        preset = kserve_preset(release, "kserve-config-llm-template")
        assert preset is not None
        assert preset.source.startswith("kserve/kserve@v")
        assert preset.source.endswith(":config/llmisvcconfig/config-llm-template.yaml")
        assert preset.parts["template"]["containers"][0]["image"]
    assert kserve_preset("0.20", "kserve-config-llm-template") is None


def test_the_preset_generator_keeps_facts_not_the_script() -> None:
    """tools/kserve_presets.py keeps the main container's image, probes (without the
    templated scheme) and emptyDir mounts, never the command script, a sidecar or a
    secret volume, as in kserve/kserve@v0.20.0:config/llmisvcconfig/config-llm-template.yaml."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _scripts import load_script

    tool = load_script("tools/kserve_presets.py", "kserve_presets")
    probe = {"httpGet": {"path": "/health", "port": 8000, "scheme": "{{ if x }}HTTPS{{end}}"}}
    pod = {
        "containers": [
            {
                "name": "main",
                "image": "ghcr.io/llm-d/llm-d-cuda:v0.8.0",
                "command": ["/bin/bash", "-c", "exec vllm serve /mnt/models"],
                "livenessProbe": probe,
                "volumeMounts": [
                    {"mountPath": "/dev/shm", "name": "dshm"},
                    {"mountPath": "/var/run/kserve/tls", "name": "tls-certs"},
                ],
            },
            {"name": "sidecar", "image": "x"},
        ],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
            {"name": "tls-certs", "secret": {"secretName": "{{ ChildName }}"}},
        ],
        "terminationGracePeriodSeconds": 60,
    }
    facts = tool._pod(pod)
    (main,) = facts["containers"]
    assert "command" not in main and main["image"] == "ghcr.io/llm-d/llm-d-cuda:v0.8.0"
    assert main["livenessProbe"] == {"httpGet": {"path": "/health", "port": 8000}}
    assert main["volumeMounts"] == [{"mountPath": "/dev/shm", "name": "dshm"}]
    assert [v["name"] for v in facts["volumes"]] == ["dshm"]
    assert facts["terminationGracePeriodSeconds"] == 60


def test_a_checked_config_named_like_a_preset_replaces_it() -> None:
    """KServe looks a well-known preset up by name in the service's namespace first
    (``getConfig``): a ``kserve-config-llm-template`` among the checked objects is what the
    cluster runs, with or without ``versions.kserve``; its own command is then read as the
    engine, and the config gives no record of its own."""
    objs = _load("kserve-kserve-llmisvc-qwen2-7b-gpu.yaml", DATA / "field-corpus-1")
    config = K8sObject(
        {
            "apiVersion": "serving.kserve.io/v1alpha2",
            "kind": "LLMInferenceServiceConfig",
            "metadata": {"name": "kserve-config-llm-template", "namespace": "default"},
            "spec": {
                "template": {
                    "containers": [
                        {
                            "name": "main",
                            "image": "vllm/vllm-openai:v0.10.1.1",
                            "command": ["vllm", "serve", "/mnt/models"],
                            "args": ["--served-model-name", "{{ .Spec.Model.Name }}"],
                        }
                    ]
                }
            },
        }
    )
    svc = objs[0]
    for profile in (None, _kserve("0.20.0")):
        report = evaluate([*objs, config], profile=profile)
        main = next(svc.pods()[0].containers())
        assert main.image == "vllm/vllm-openai:v0.10.1.1"
        engine = vllm_engine(main)
        assert (
            engine is not None
            and engine.get("served_model_name") == svc.raw["spec"]["model"]["name"]
        )
        assert not [n for n in report.not_evaluated if n.resource == config.resource]


@pytest.mark.parametrize(
    "path", [("spec",), ("spec", "parallelism"), ("spec", "prefill"), ("spec", "baseRefs")]
)
def test_llmisvc_presets_with_a_value_known_only_at_deploy_time(path: tuple[str, ...]) -> None:
    """Regression: a Pulumi preview's unknown where the preset is chosen (the spec, its
    parallelism, prefill or baseRefs) is a "not evaluated" record, not a crash, with or
    without ``versions.kserve``."""
    (svc,) = _load("kserve-kserve-llmisvc-dp-ep-deepseek-r1.yaml", DATA / "field-corpus-1")
    raw = copy.deepcopy(svc.raw)
    node = raw
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = UNKNOWN
    for profile in (None, _kserve("0.20.0")):
        report = evaluate([K8sObject(copy.deepcopy(raw))], profile=profile)
        assert any(
            "unknown until the deployment runs" in n.reason
            for n in report.not_evaluated
            if n.rule == "*"
        )
