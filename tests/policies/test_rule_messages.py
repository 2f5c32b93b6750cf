"""Every template of every rule worded by its ``meta.yaml`` (issue 32), filled from a verdict
of each reason the rule's judge gives.

A worded rule's ``fields`` runs on every verdict of its rule before the reason's template is
filled, so a ``fields`` that raises (a ``KeyError`` on a value another reason does not carry)
or a template naming a value its verdict lacks breaks ``gpustrata check`` on the first input
that reaches that reason, which no fixture may reach yet. Here each rule's verdicts come
from its real check on every rule-folder fixture and every field-corpus file (without and with
each documented cluster profile), and :func:`_built` hand-builds one, from the judge's code,
for each reason no input reaches; every one is worded as ``check`` words it.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from dataclasses import replace
from fractions import Fraction
from functools import cache
from pathlib import Path

import pytest
from conftest import REPO, fixture_files

from gpustrata.catalog.vllm_releases import flag_releases
from gpustrata.core.errors import InputError
from gpustrata.spec.profile_file import load_profile_file
from gpustrata_policies import evaluate
from gpustrata_policies.evaluate import all_rules
from gpustrata_policies.findings import Rule
from gpustrata_policies.inputs.manifests import load_paths
from gpustrata_policies.rules._meta import _Wording
from gpustrata_policies.rules._verdict import Value, Verdict

GIB = 2**30
CORPORA = ("field-corpus-1", "field-corpus-2", "field-corpus-3", "launchers", "review-edges")
PROFILES = REPO / "tests" / "data" / "profiles" / "documented"


def _wording(rule: Rule) -> _Wording | None:
    """The message a worded rule's check words its verdicts with (``judged`` closes over
    it), or None for a rule that words its findings itself."""
    cells = getattr(rule.check, "__closure__", None) or ()
    return next((c.cell_contents for c in cells if isinstance(c.cell_contents, _Wording)), None)


WORDED = {rule.meta.id: w for rule in all_rules() if (w := _wording(rule)) is not None}


def _inputs() -> Iterator[tuple[Path, Path | None]]:
    """(file, cluster profile or None): each fixture alone, each corpus file alone, and each
    corpus file with each documented profile."""
    for path in fixture_files():
        yield path, None
    profiles = sorted(PROFILES.glob("*.yaml"))
    for corpus in CORPORA:
        for path in sorted((REPO / "tests" / "data" / corpus).glob("*.yaml")):
            for profile in (None, *profiles):
                yield path, profile


@cache
def _harvested() -> dict[str, dict[str, list[Verdict]]]:
    """rule id -> reason -> the verdicts its check words on :func:`_inputs`."""
    out: dict[str, dict[str, list[Verdict]]] = {rule_id: {} for rule_id in WORDED}
    words = _Wording.__call__

    def recording(self: _Wording, verdict: Verdict) -> str:
        out[self.rule_id].setdefault(verdict.reason, []).append(verdict)
        return words(self, verdict)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_Wording, "__call__", recording)
        for path, profile in _inputs():
            try:
                objects = load_paths([str(path)])
            except InputError:
                continue  # a corpus file gpustrata refuses (counted as refused there)
            if profile is None:
                evaluate(objects)
            else:
                evaluate(objects, profile=load_profile_file(profile), profile_file=str(profile))
    return out


def _like(rule_id: str, reached: str, reason: str, **values: Value) -> Verdict:
    """A verdict of *reason* built on the values of a harvested one of *reached* (the judge
    gives both from the same values), with *values* added."""
    [first, *_] = _harvested()[rule_id][reached]
    return replace(first, reason=reason, values={**first.values, **values})


def _ne(reason: str, **values: Value) -> Verdict:
    return Verdict("not_evaluated", reason, values)


def _built() -> dict[str, list[Verdict]]:
    """rule id -> hand-built verdicts of the reasons no input reaches, with the values and
    thresholds each judge gives them."""
    k019: dict[str, Value] = {
        "who": "container 'vllm' of Deployment/llm/vllm",
        "what": "s3://models/llama",
        "store": "s3",
        "account": "vllm",
        "named": True,
        "other_identities": (),
    }
    endpoint: dict[str, Value] = {
        "what": "ModelEndpoint llm exports https://vllm.llm.svc:8000/v1",
        "scheme": "https",
    }
    demand: dict[str, Value] = {
        "pod": "pod (template of Deployment/llm/vllm)",
        "gpus": Fraction(1),
        "cpu": Fraction(8),
        "memory": Fraction(32 * GIB),
    }
    k002: dict[str, Value] = {
        "container": "container 'vllm'",
        "section": "limits",
        "resource": "nvidia.com/gpu",
    }
    return {
        "G001": [_ne("generation-unknown", why="the model of container 'vllm' is unknown")],
        "K001": [
            Verdict(
                "violation",
                "not-a-quantity",
                {
                    "container": "container 'vllm'",
                    "resource": "nvidia.com/gpu",
                    "request": "abc",
                    "limit": "1",
                    "request_q": None,
                    "limit_q": Fraction(1),
                    "not_quantities": ("abc",),
                },
            )
        ],
        "K002": [
            Verdict("violation", "negative", {**k002, "value": "-1", "amount": Fraction(-1)}),
            Verdict("violation", "not-a-quantity", {**k002, "value": "x", "amount": None}),
            Verdict(
                "violation",
                "shared-beyond-one",
                {**k002, "value": "2", "amount": Fraction(2), "sharing_where": "ConfigMap x"},
                {"max_replicas": 1},
            ),
        ],
        "K004": [
            _ne("base-refs-unread", pod="pod (LLMInferenceService/llm/vllm)"),
            Verdict(
                "violation",
                "profile-taints",
                {
                    "pod": "pod (template of Deployment/llm/vllm)",
                    "gpus": 1,
                    "flavour": "kubeadm",
                    "evidence": "a kubeadm node label",
                    "extended_resource_toleration": False,
                    "untolerated": (("nvidia.com/gpu", "present", "NoSchedule"),),
                },
            ),
        ],
        "K005": [_ne("instance-uncatalogued", **demand, instance="p9.mega")],
        "K007": [
            _ne("min-shm-not-a-quantity", min_shm_size="'lots'"),
            Verdict(
                "not_evaluated",
                "parallel-sizes-unread",
                {
                    "container": "container 'vllm'",
                    "medium": "disk",
                    "shm_bytes": None,
                    "shm": "mounts the disk-backed emptyDir 'shm' at /dev/shm",
                    "engine_gpus": None,
                    "gpus": 2,
                },
                {"min_shm_bytes": Fraction(GIB)},
            ),
        ],
        "K008": [
            _ne(
                "held-unknown",
                surge=1,
                pod_gpus=Fraction(8),
                pools=("gpu",),
                capacity=16,
                held=8,
                unknown="the replicas of Deployment/llm/other are unknown",
            )
        ],
        "K009": [_ne("target-missing", target="apps/v1/Deployment/vllm")],
        "K014": [
            Verdict(
                "violation",
                "engine-kwargs-literal",
                {"name": "hf_token", "placeholder": None, "length": 37},
            ),
            Verdict(
                "violation",
                "flag-elsewhere",
                {
                    "container": "container 'vllm'",
                    "flag": "api-key",
                    "in_shell": True,
                    "placeholder": "${API_KEY}",
                    "length": 10,
                },
            ),
        ],
        "K015": [
            _ne(
                "weights-size-unknown",
                container="container 'llm' (worker group 'gpu-group')",
                models=("acme/private-model",),
                weights_bytes=None,
                target="/home/ray/.cache/huggingface",
                empty_dir=None,
                ephemeral_request=Fraction(32 * GIB),
                ephemeral_limit=Fraction(32 * GIB),
                unsized=("acme/private-model",),
            )
        ],
        "K017": [
            _ne("pods-unread", unread=("the replicas of HelmRelease x are unknown",)),
            Verdict(
                "violation",
                "too-few-nodes",
                {"short": "HelmRelease x needs 3 nodes", "pools": ("gpu",)},
                {"min_nodes": 3},
            ),
        ],
        "K018": [_ne("device-class-unknown", what="DeviceClass gpu.nvidia.com")],
        "K019": [
            Verdict("violation", "account-unbound", k019),
            _ne("association-outside", **k019),
            _ne("azure-account-missing", **{**k019, "store": "azure"}),
            _ne("binding-unknown", unknown="the ServiceAccount's annotations"),
            _ne("env-from", **k019, env_from="Secret creds"),
            _ne("gcs-principal", **{**k019, "store": "gcs"}),
        ],
        "K020": [
            _ne("host-memory-unread", site="Deployment/llm/vllm", why="cpu_offload_gb is x"),
            _ne("loading-unread", site="Deployment/llm/vllm", why="load_format is x"),
        ],
        "K021": [
            _like("K021", "port-misses-engine", "backend-misses-engine", what="HTTPRoute r"),
            _like("K021", "port-misses-engine", "endpoint-misses-engine", **endpoint),
            Verdict("violation", "endpoint-scheme", {**endpoint, "scheme": "grpc"}),
            Verdict("violation", "endpoint-port-not-a-number", endpoint),
            Verdict(
                "violation",
                "endpoint-host-mismatch",
                {**endpoint, "host_service": "llm/other", "service": "Service llm/vllm"},
            ),
            Verdict("violation", "endpoint-ray-https", endpoint),
            Verdict("violation", "endpoint-https-plain", {**endpoint, "engine": "vllm"}),
            Verdict("violation", "endpoint-http-tls", {**endpoint, "engine": "vllm"}),
            Verdict("violation", "endpoint-path", {**endpoint, "path": "/x", "bases": ("/v1",)}),
        ],
        "O001": [
            _ne("kubernetes-unreadable", kubernetes="latest", pools=("gpu",)),
            _ne("operator-uncatalogued", version="v99.1.0"),
        ],
        "O004": [_ne("operator-uncatalogued", operator="HelmRelease gpu-operator", version="9")],
        "O005": [_ne("mixed-strategies", strategies=("mixed", "single"))],
        "O008": [
            Verdict(
                "violation",
                "gpucluster-and-clusterpolicy",
                {"gpu_cluster": "gpu", "cluster_policy": "cluster-policy"},
                sources=("NVIDIA/gpu-operator@v26.7.0:deployments/values.yaml",),
            ),
            _ne("kubernetes-unreadable", kubernetes=("latest",)),
        ],
        "R001": [_ne("num-gpus-unreadable", group="worker group 'gpu'", error="num-gpus x")],
        "R002": [_ne("num-gpus-unreadable", error="num-gpus x")],
        "R004": [
            Verdict(
                "not_evaluated",
                "kuberay-not-catalogued",
                {"ray": "2.60.0", "kuberay": "v9.0.0"},
                sources=("Deployment kuberay-operator",),
            ),
            _ne("no-ray-llm-requirement", ray="2.9.0", vllm="0.10.0", where="its image"),
        ],
        "R005": [
            Verdict(
                "violation",
                "threshold-unset",
                {
                    "key": "serviceUnhealthySecondThreshold",
                    "api_version": "ray.io/v1alpha1",
                    "load_s": 1200,
                    "estimate": "70 GiB at 100 MB/s",
                },
                {"threshold_s": 900},
            )
        ],
        "R007": [
            _ne("default-differs-by-gpu", deployment="llm"),
            _ne(
                "default-unknown",
                deployment="llm",
                why="model 'llama' is not in the model catalogue; the GPU model is unknown",
            ),
            _ne(
                "default-depends-on-gpu",
                deployment="llm",
                why="the GPU model is unknown; judged on 26 GPUs, it fails on t4 ...",
            ),
            _ne("max-num-seqs-malformed", deployment="llm", max_num_seqs="'many'"),
            _ne("target-unreadable", deployment="llm", error="target_ongoing_requests is x"),
        ],
        "V002": [_ne("parallel-size-malformed", engine="container 'vllm'", value="two")],
        "V009": [
            _ne("probe-unreadable", why="Deployment/llm/vllm: startupProbe is x"),
            _ne("safety-factor-invalid", why="safety_factor 'x' is not a number >= 1"),
            # reached by gke-nemo-rl until session 22 read its model from its Pod label
            _ne(
                "model-unresolved",
                why="container 'vllm': model '/data/ckpt' is not in the model catalogue",
            ),
        ],
        "V011": [
            Verdict(
                "violation",
                reason,
                {"container": "container 'vllm'", "probe": probe},
                {"port": 8000, "paths": ("/health", "/v1/models")},
            )
            for reason, probe in (("http-path", "/ready"), ("other-probe", None))
        ],
        "V012": [_ne("typical-invalid", why="typical_sequence_tokens 0 is not a positive integer")],
        "V013": [
            # No input reaches either since 0.4.2 (the corpus's oldest image) was read.
            Verdict(
                "not_evaluated",
                "release-not-read",
                {"engine": "container 'vllm'", "version": "0.3.3", "where": "image v:v0.3.3"},
                {"read": (flag_releases()[0], flag_releases()[-1])},
            ),
            _ne(
                "releases-disagree",
                engine="container 'vllm'",
                version="0.10.1",
                where="image vllm/vllm-openai:v0.10.1",
                judged_by=("0.10.0", "0.11.0"),
                written="--x",
            ),
            # A flag no read release accepts on an unpinned image: no corpus file has one.
            Verdict(
                "violation",
                "option-refused-everywhere",
                {
                    "engine": "container 'vllm'",
                    "version": "",
                    "where": "image vllm/vllm-openai:latest is unpinned (tag 'latest')",
                    "written": "--maxModelLen",
                    "engine_kwargs": False,
                    "why": "unrecognized arguments: --maxModelLen",
                    "judged_by": (flag_releases()[0], flag_releases()[-1]),
                    "last_accepting": None,
                    "instead": None,
                },
            ),
        ],
    }


@cache
def _verdicts() -> dict[str, dict[str, list[Verdict]]]:
    """rule id -> reason -> the harvested and hand-built verdicts."""
    out = {
        rule_id: {k: list(v) for k, v in found.items()} for rule_id, found in _harvested().items()
    }
    for rule_id, built in _built().items():
        for verdict in built:
            out[rule_id].setdefault(verdict.reason, []).append(verdict)
    return out


_ROOT = re.compile(r"[^.\[]*")


def _placeholders(template: str) -> set[str]:
    """The names a str.format template fills (``read`` of ``{read[0]}``)."""
    return {
        match.group()
        for _, name, _, _ in string.Formatter().parse(template)
        if name is not None and (match := _ROOT.match(name))
    }


def test_worded_rules_are_found() -> None:
    """Every rule whose meta.yaml has messages is worded through a :class:`_Wording`."""
    with_messages = {
        p.parent.name[:4].upper()
        for p in (REPO / "policies" / "gpustrata_policies" / "rules").glob("*/meta.yaml")
        if "\nmessages:" in p.read_text(encoding="utf-8")
    }
    assert with_messages and set(WORDED) == with_messages


@pytest.mark.parametrize("rule_id", sorted(WORDED))
def test_every_reason_has_a_verdict(rule_id: str) -> None:
    """Each reason a rule's messages word has a verdict here (a new reason needs a fixture
    that reaches it or an entry in :func:`_built`), and no verdict has a reason without a
    template."""
    templates = WORDED[rule_id].templates
    found = _verdicts()[rule_id]
    assert sorted(set(templates) - set(found)) == [], "no verdict: add one to _built"
    assert sorted(set(found) - set(templates)) == [], "no template in meta.yaml messages"


@pytest.mark.parametrize("rule_id", sorted(WORDED))
def test_every_verdict_fills_its_template(rule_id: str) -> None:
    """``fields`` does not raise on any verdict of the rule, no name is both a value and a
    threshold, every placeholder of the reason's template is filled, and the message is
    worded as ``check`` words it."""
    wording = WORDED[rule_id]
    for reason, verdicts in _verdicts()[rule_id].items():
        for verdict in verdicts:
            extra = wording.fields(verdict) if wording.fields is not None else {}
            assert not set(verdict.values) & set(verdict.thresholds), (reason, verdict)
            filled = {*verdict.values, *verdict.thresholds, *extra}
            missing = _placeholders(wording.templates[reason]) - filled
            assert not missing, (reason, sorted(missing), verdict)
            assert wording(verdict).strip(), (reason, verdict)
