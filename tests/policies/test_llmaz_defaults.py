"""An llmaz Playground's image from the chart's default vLLM BackendRuntime per llmaz release
(issue 30: what controllers fill): read where the release is stated (versions.llmaz) or every
catalogued release agrees, the assumption said; otherwise each release's image and the
profile key are named."""

from __future__ import annotations

from pathlib import Path

from gpustrata.catalog.profile import ClusterProfile
from gpustrata_policies import UNKNOWN, evaluate
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.view.objects import K8sObject
from gpustrata_policies.view.profile import using_profile

DATA = Path(__file__).resolve().parents[1] / "data"
PLAYGROUND = DATA / "launchers" / "llmaz-huggingface-playground.yaml"
RESOURCE = "Playground/default/opt-125m"


def _objs(version: str | None = None, folder: Path | None = None) -> list[K8sObject]:
    """The fixture (a real llmaz example), its Playground stating *version* when given."""
    if version is None or folder is None:
        return load_paths([str(PLAYGROUND)])
    return _with(f"  backendRuntimeConfig:\n    version: {version}\n", folder)


def _with(spec: str, folder: Path) -> list[K8sObject]:
    """The fixture with *spec* (YAML lines under the Playground's spec) appended."""
    path = folder / PLAYGROUND.name
    path.write_text(PLAYGROUND.read_text("utf-8") + spec, "utf-8")
    return load_paths([str(path)])


def _profile(release: str) -> ClusterProfile:
    return ClusterProfile.model_validate({"versions": {"llmaz": release}})


def _image(objs: list[K8sObject], profile: ClusterProfile | None = None) -> object:
    with using_profile(profile):
        (pod,) = objs[1].pods()
        return pod.spec["containers"][0]["image"]


def _records(report: object, rule: str | None = None) -> list[str]:
    return [
        n.reason
        for n in report.not_evaluated  # type: ignore[attr-defined]
        if n.resource == RESOURCE and (rule is None or n.rule == rule)
    ]


def test_unstated_release_names_each_release_image_and_the_key() -> None:
    objs = _objs()
    report = evaluate(objs)
    assert _image(objs) is UNKNOWN
    (record,) = _records(report, "*")
    assert "vllm/vllm-openai:v0.6.0 in 0.0.7 to 0.1.1" in record
    assert "vllm/vllm-openai:v0.7.3 in 0.1.2 to 0.1.4" in record
    assert "(set versions.llmaz in the cluster profile)" in record
    (k013,) = _records(report, "K013")
    assert k013.startswith("image of container 'model-runner': the vLLM image")


def test_stated_release_gives_its_chart_image() -> None:
    for release, image in (
        ("0.1.1", "vllm/vllm-openai:v0.6.0"),
        ("0.1.4", "vllm/vllm-openai:v0.7.3"),
    ):
        objs = _objs()
        report = evaluate(objs, profile=_profile(release))
        assert _image(objs, _profile(release)) == image
        assert _records(report, "*") == []  # every value read: the findings say what
        v010 = [f for f in report.findings if f.resource == RESOURCE and f.rule == "V010"]
        assert v010 and f"llmaz {release}'s default vLLM BackendRuntime" in v010[0].message
        assert "backendRuntime.vllm.image" in v010[0].message  # the assumption, said


def test_playground_version_is_read_where_every_release_agrees_on_the_repository(
    tmp_path: Path,
) -> None:
    """backendRuntimeConfig.version replaces the tag (playground_controller.go); every
    catalogued release's BackendRuntime is vllm/vllm-openai, so no release is needed."""
    objs = _objs("v0.8.5", tmp_path)
    assert objs[1].raw["spec"]["backendRuntimeConfig"] == {"version": "v0.8.5"}
    report = evaluate(objs)
    assert _image(objs) == "vllm/vllm-openai:v0.8.5"
    assert not [r for r in _records(report) if "vLLM image" in r]  # only probes, /dev/shm
    (record,) = _records(report, "*")
    assert "the probes of llmaz's default BackendRuntime 'vllm' differ" in record
    notes = [f.message for f in report.findings if f.resource == RESOURCE]
    assert notes and all("every catalogued llmaz release (0.0.7 to" in m for m in notes)


def test_uncatalogued_release_reads_nothing() -> None:
    objs = _objs()
    report = evaluate(objs, profile=_profile("0.9.9"))
    assert _image(objs, _profile("0.9.9")) is UNKNOWN
    (record,) = _records(report, "*")
    assert "llmaz 0.9.9 (cluster profile versions.llmaz) is not catalogued" in record


def test_probes_and_shm_are_each_release_s() -> None:
    """The chart's BackendRuntime has no probes before 0.1.0 and no sharedMemorySize before
    0.1.2: unstated, the probes and /dev/shm are unknown (never the newest chart's, never
    "no probe": V011 gave a wrong mandatory finding on the unknown readinessProbe);
    stated, each release's own (0.0.9: no readinessProbe, a right V011)."""
    objs = _objs()
    report = evaluate(objs)
    (v011,) = _records(report, "V011")
    assert "none in 0.0.7 to 0.0.9; startup, liveness, readiness in 0.1.0 to 0.1.4" in v011
    assert "V011" not in {f.rule for f in report.findings}
    (k007,) = _records(report, "K007")
    assert "none in 0.0.7 to 0.1.1; 2Gi in 0.1.2 to 0.1.4" in k007
    old = evaluate(_objs(), profile=_profile("0.0.9"))
    assert [f.rule for f in old.findings if f.rule == "V011"] == ["V011"]
    new_objs = _objs()
    new = evaluate(new_objs, profile=_profile("0.1.4"))
    assert not [f for f in new.findings if f.rule in {"V009", "V011"}]
    with using_profile(_profile("0.1.4")):
        (pod,) = new_objs[1].pods()
    (container,) = pod.spec["containers"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert pod.spec["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "2Gi"}}
    ]
    assert container["args"][:2] == ["--model", "/workspace/models/models--facebook--opt-125m"]


def test_resources_merge_as_llmaz_writes_them(tmp_path: Path) -> None:
    """The recommended config's resources (every release: 4 CPUs, 8Gi), the Playground's own
    replacing them key by key with CPU and memory limits raised to their requests, then the
    flavor's limits written as request and limit (playground_controller.go buildTemplate,
    service_controller.go injectModelFlavor)."""
    objs = _objs()
    evaluate(objs)  # gives the Playground its OpenModel
    (pod,) = objs[1].pods()
    resources = pod.spec["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": 4, "memory": "8Gi", "nvidia.com/gpu": 1}
    assert resources["limits"] == {"cpu": 4, "memory": "8Gi", "nvidia.com/gpu": 1}
    own = "  backendRuntimeConfig:\n    resources:\n      requests:\n        memory: 32Gi\n"
    objs = _with(own, tmp_path)
    evaluate(objs)
    (pod,) = objs[1].pods()
    resources = pod.spec["containers"][0]["resources"]
    assert resources["requests"]["memory"] == "32Gi"
    assert resources["limits"]["memory"] == "32Gi"  # raised to the request
    assert resources["limits"]["cpu"] == 4
