"""R004 ray-versions-match."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import Path, RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.kuberay import cluster_spec_path, operator_version, ray_groups
from gpustrata_policies.view.objects import K8sObject, as_list, as_map, dig
from gpustrata_policies.view.profile import profile_hint
from gpustrata_policies.view.vllm_args import serve_config, split_image

if TYPE_CHECKING:
    from gpustrata.catalog.compat import (
        CompatCatalog,
        KubeRayRelease,
        RayDefect,
        RayVersionGate,
    )

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)")
_RAY_IN_NAME = re.compile(r"(?:^|[^a-z])ray-?(\d+\.\d+\.\d+)")
_VLLM_PIN = re.compile(r"^vllm(?:\[[^\]]*\])?\s*==\s*([0-9][0-9a-zA-Z.+]*)\s*$")


def _key(version: str) -> tuple[int, int, int] | None:
    m = _VERSION.match(version.strip().lstrip("vV"))
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def image_ray_version(image: Any) -> str | None:
    """Ray version of a Ray image: ``rayproject/ray*:2.46.0-...`` / ``:ray-2.48.0-...``, or a
    ``ray2.24.0``-style version in the repository name."""
    if not isinstance(image, str):
        return None
    return _image_ray_version(image)


@functools.lru_cache(maxsize=4096)  # a cluster runs a few images in many groups
def _image_ray_version(image: str) -> str | None:
    repo, tag, _ = split_image(image)
    tag = tag or ""
    if repo.startswith("rayproject/ray") or repo.startswith("docker.io/rayproject/ray"):
        m = re.match(r"^(?:ray-)?(\d+\.\d+\.\d+)", tag)
        if m:
            return m[1]
    for text in (repo.rsplit("/", 1)[-1], tag):
        m = _RAY_IN_NAME.search(text)
        if m:
            return m[1]
    return None


def _gate_used(gate: RayVersionGate, obj: K8sObject, cluster: Mapping[str, Any]) -> bool:
    """Does this object use the behaviour the gate switches? Unknown gates count as used."""
    if gate.name == "job-metadata":
        return obj.kind == "RayJob" and bool(dig(obj.raw, "spec", "metadata"))
    if gate.name == "autoscaler-v2-default":
        version = dig(cluster, "autoscalerOptions", "version")
        return cluster.get("enableInTreeAutoscaling") is True and not version
    if gate.name == "token-auth":
        return bool(dig(cluster, "authOptions", "mode") == "token")
    if gate.name == "k8s-token-auth":
        return dig(cluster, "authOptions", "enableK8sTokenAuth") is True
    if gate.name == "worker-group-priority":
        groups = as_list(cluster.get("workerGroupSpecs"), "workerGroupSpecs")
        return any(isinstance(g, Mapping) and g.get("priority") is not None for g in groups)
    return True  # unified-http-health-probe (every Ray Pod) and gates added later


def _crossed(
    release: KubeRayRelease, a: str | None, b: str, obj: K8sObject, cluster: Mapping[str, Any]
) -> list[RayVersionGate]:
    """Gates of *release* whose boundary lies between *a* (None: unset) and *b*, in use."""
    kb = _key(b)
    ka = _key(a) if a else (0, 0, 0)
    if kb is None or ka is None:
        return []
    out = []
    for gate in release.ray_version_gates:
        kg = _key(gate.min_ray)
        if kg is not None and (ka >= kg) != (kb >= kg) and _gate_used(gate, obj, cluster):
            out.append(gate)
    return out


def _vllm_pins(obj: K8sObject) -> list[tuple[str, str]]:
    """(vLLM version, where) pinned by runtime_env pip of Ray Serve LLM applications."""
    cfg = serve_config(obj)
    if cfg is None:
        return []
    out = []
    for app in cfg.applications:
        llm_app = str(app.get("import_path", "")).startswith("ray.serve.llm") or (
            isinstance(app.get("args"), Mapping) and "llm_configs" in app["args"]
        )
        if not llm_app:
            continue
        envs = [("applications runtime_env", app.get("runtime_env"))]
        args = app.get("args")
        configs = args.get("llm_configs") if isinstance(args, Mapping) else None
        for i, llm in enumerate(configs if isinstance(configs, list) else []):
            if isinstance(llm, Mapping):
                envs.append((f"llm_configs[{i}].runtime_env", llm.get("runtime_env")))
        for where, env in envs:
            pip = env.get("pip") if isinstance(env, Mapping) else None
            pip = pip.get("packages") if isinstance(pip, Mapping) else pip
            for item in pip if isinstance(pip, list) else []:
                m = _VLLM_PIN.match(str(item))
                if m:
                    out.append((m[1], f"serveConfigV2 {where} pip {item}"))
    return out


def _images(obj: K8sObject) -> dict[str, list[tuple[str, str]]]:
    """Ray version -> (group label, image) of the Ray containers whose image names one."""
    images: dict[str, list[tuple[str, str]]] = {}
    for group in ray_groups(obj):
        container = group.container
        version = image_ray_version(container.image) if container else None
        if container is not None and version:
            images.setdefault(version, []).append((group.label, str(container.image)))
    return images


def _stale(
    gates_release: KubeRayRelease,
    release: KubeRayRelease | None,
    operator: tuple[str, str] | None,
    declared: str | None,
    image: tuple[str, str],
    crossed: list[RayVersionGate],
    path: Path,
) -> Verdict:
    """rayVersion differs from the image's Ray: mandatory when a used gate lies between."""
    return Verdict(
        "violation" if crossed else "advisory",
        "stale-ray-version",
        values={
            "declared": declared,
            "image_ray": image[0],
            "image": image[1],
            "gates_release": gates_release.version,
            "operator": operator[0] if operator else None,
            "operator_source": operator[1] if operator else None,
            "operator_catalogued": release is not None,
            "crossed": tuple((g.name, g.min_ray) for g in crossed),
        },
        thresholds={"gates": tuple(g.min_ray for g in crossed)},
        sources=(
            *((operator[1],) if operator else ()),
            *gates_release.sources,
            *(g.source for g in crossed),
        ),
        path=path,
    )


def _support(
    release: KubeRayRelease | None, operator: tuple[str, str] | None, ray: str, path: Path
) -> Iterator[Verdict]:
    """Does the operator's KubeRay release support Ray *ray*?"""
    if release is not None:
        supported = release.supports_ray(ray)
        values: dict[str, Value] = {"ray": ray, "kuberay": release.version}
        if supported is False:
            values["operator_source"] = operator[1] if operator else None
            yield Verdict(
                "violation",
                "ray-older-than-kuberay-supports",
                values=values,
                thresholds={"min_ray": release.min_ray},
                sources=tuple(release.sources),
                path=path,
            )
        elif supported is None:
            yield Verdict("not_evaluated", "no-min-ray-catalogued", values=values)
    elif operator is not None:
        yield Verdict(
            "not_evaluated",
            "kuberay-not-catalogued",
            values={"ray": ray, "kuberay": operator[0]},
            sources=(operator[1],),
        )


def _defect(
    defect: RayDefect,
    probes_release: KubeRayRelease,
    operator: tuple[str, str] | None,
    running: tuple[str, str],
    obj: K8sObject,
    base: Path,
) -> Verdict:
    """Ray *running* (version, where) has *defect*: mandatory where the head's Ray container
    gets KubeRay's agent probes (it sets none of its own and the operator injects them)."""
    head = next((g for g in ray_groups(obj) if g.is_head), None)
    container = head.container if head is not None else None
    own = container is not None and all(
        container.raw.get(key) is not None for key in ("livenessProbe", "readinessProbe")
    )
    if own:
        probes = "own"
    elif operator is None:
        # No operator release in the input: decide only what every catalogued release
        # agrees on (v1.0.0 injects the agent probes only with GCS fault tolerance).
        kinds = {r.agent_probes for r in catalogs.compat().kuberay_releases()}
        probes = "injected" if kinds == {"every-ray-container"} else "operator-unknown"
    elif probes_release.agent_probes != "every-ray-container":
        probes = "ft-only"
    else:
        probes = "injected"
    return Verdict(
        "violation" if probes == "injected" else "advisory",
        "ray-release-defect",
        values={
            "ray": running[0],
            "where": running[1],
            "breaks": defect.breaks,
            "probes": probes,
            "kuberay": probes_release.version,
            "operator_source": operator[1] if operator else None,
        },
        thresholds={"first_ray": defect.first_ray, "fixed_ray": defect.fixed_ray},
        sources=(*defect.sources, *(operator[1:] if operator else ())),
        path=(*container.path, "image") if container is not None else (*base, "rayVersion"),
    )


def _pins(compat: CompatCatalog, ray: str, obj: K8sObject) -> Iterator[Verdict]:
    """The vLLM pinned by Ray Serve LLM runtime_env against the ray[llm] requirement."""
    pins = _vllm_pins(obj) if obj.kind == "RayService" else []
    if not pins:
        return
    ray_release = compat.ray(ray)
    for vllm, where in pins:
        ok = ray_release.supports_vllm(vllm) if ray_release else None
        if ok is False and ray_release is not None:
            yield Verdict(
                "violation",
                "vllm-outside-ray-llm",
                values={"vllm": vllm, "where": where, "ray_llm": ray_release.version},
                thresholds={"vllm_requirement": ray_release.vllm_requirement},
                sources=tuple(ray_release.sources),
                path=("spec", "serveConfigV2"),
            )
        elif ok is None:
            yield Verdict(
                "not_evaluated",
                "no-ray-llm-requirement",
                values={"ray": ray, "vllm": vllm, "where": where},
            )


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """rayVersion = the images' Ray; the operator supports it; the vLLM pinned fits that Ray."""
    base = cluster_spec_path(obj)
    if base is None:
        return
    cluster = as_map(dig(obj.raw, *base), f"{'.'.join(base)} of {obj.resource}")
    raw_version = cluster.get("rayVersion")
    if raw_version is UNKNOWN:
        raise UnknownInput(f"rayVersion of {obj.resource}")
    declared = str(raw_version) if isinstance(raw_version, str | int | float) else None
    path = (*base, "rayVersion")
    images = _images(obj)
    if len(images) > 1:
        yield Verdict(
            "violation",
            "mixed-ray-images",
            values={
                "images": tuple(
                    (v, tuple(label for label, _ in w)) for v, w in sorted(images.items())
                )
            },
            path=(*base, "workerGroupSpecs"),
        )
        return
    image_version = next(iter(images), None)
    compat = catalogs.compat() if (image_version or declared) else None
    operator = operator_version(ctx)
    release = compat.kuberay(operator[0]) if compat and operator else None
    gates_release = release
    if compat is not None and release is None:
        newest = compat.kuberay_releases()
        gates_release = newest[0] if newest else None
    if image_version and declared != image_version and gates_release is not None:
        crossed = _crossed(gates_release, declared, image_version, obj, cluster)
        image = (image_version, images[image_version][0][1])
        yield _stale(gates_release, release, operator, declared, image, crossed, path)
    ray = declared or image_version
    if compat is None or ray is None or _key(ray) is None:
        return
    support = list(_support(release, operator, ray, path))
    yield from support
    running = (
        (image_version, f"the image {images[image_version][0][1]}")
        if image_version
        else (ray, "rayVersion")
    )
    if gates_release is not None and not any(v.decision == "violation" for v in support):
        for defect in compat.ray_defects(running[0]):  # unsupported Ray: said above
            yield _defect(defect, gates_release, operator, running, obj, base)
    yield from _pins(compat, ray, obj)


def _operator_note(v: Mapping[str, Value]) -> str:
    """Which KubeRay release's gates were used, and why."""
    if v["operator_catalogued"]:
        return f"KubeRay {v['gates_release']} from {v['operator_source']}"
    if v["operator"] is not None:
        return f"KubeRay {v['operator']} is not catalogued, so the gates of {v['gates_release']}"
    return (
        f"gates of KubeRay {v['gates_release']}, the newest catalogued: the operator version "
        "is not in the input"
    )


def fields(verdict: Verdict) -> dict[str, str]:
    """The text an R004 message quotes beyond its values: the groups per Ray version, the
    stated rayVersion, the gates crossed and the clauses they decide, the operator's source."""
    v = verdict.values
    out: dict[str, str] = {}
    if verdict.reason == "mixed-ray-images":
        groups = cast(tuple[tuple[str, tuple[str, ...]], ...], v["images"])
        out["detail"] = "; ".join(f"Ray {ray} in {', '.join(labels)}" for ray, labels in groups)
    elif verdict.reason == "stale-ray-version":
        crossed = cast(tuple[tuple[str, str], ...], v["crossed"])
        names = ", ".join(f"{name} (Ray {min_ray})" for name, min_ray in crossed)
        out |= {
            "stated": f"rayVersion {v['declared']}" if v["declared"] else "rayVersion is unset",
            "note": _operator_note(v),
            "switch": (
                f"KubeRay switches {names} on rayVersion"
                if crossed
                else "no behaviour this object uses switches between them"
            ),
            "effect": (
                "so it configures the Pods for the wrong Ray"
                if crossed
                else "but KubeRay reads rayVersion to choose probes, autoscaler and auth: keep "
                "it equal to the image"
            ),
        }
    elif verdict.reason == "ray-older-than-kuberay-supports":
        out["source"] = str(v["operator_source"] or "?")
    elif verdict.reason == "ray-release-defect":
        out["probes"] = _probes_clause(v)
    return out


def _probes_clause(v: Mapping[str, Value]) -> str:
    """Whether the head Pod gets the probes that the defect breaks, and from which KubeRay."""
    kuberay = (
        f"KubeRay {v['kuberay']} ({v['operator_source']})"
        if v["operator_source"]
        else f"KubeRay {v['kuberay']}, the newest catalogued, as the operator version is not "
        f"in the input {profile_hint('versions.kuberay')},"
    )
    clauses = {
        "injected": f"{kuberay} gives the head's Ray container, which sets no probes of its "
        "own, exactly those probes",
        "own": "the head's Ray container sets its own liveness and readiness probes, which "
        "KubeRay keeps: the Pod stays up unless they ask the agent, but the agent's own work "
        "(job logs, metrics) still hangs",
        "ft-only": f"{kuberay} injects those probes only with GCS fault tolerance "
        "(ray.io/ft-enabled)",
        "operator-unknown": "whether the head Pod is restarted depends on the KubeRay release, "
        "which is not in the input: from v1.1.0 KubeRay gives a head Ray container that sets "
        "no probes of its own exactly those probes, v1.0.0 only with GCS fault tolerance "
        f"{profile_hint('versions.kuberay')}",
    }
    return clauses[str(v["probes"])]


RULE = folder_rule(__name__, worded(judge, fields))
