"""K015 weights-storage."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

from gpustrata.core.quantity import exact_sum, parse_quantity
from gpustrata.core.unknown import UNKNOWN, UnknownInput
from gpustrata_policies.findings import RuleContext
from gpustrata_policies.rules._meta import folder_rule
from gpustrata_policies.rules._verdict import Value, Verdict, worded
from gpustrata_policies.view import catalogs
from gpustrata_policies.view.engines import EngineSite, engine_sites
from gpustrata_policies.view.nodes import GIB, gpu_requests
from gpustrata_policies.view.objects import ContainerRef, K8sObject, PodRef, as_list, dig
from gpustrata_policies.view.vllm_args import hf_hub_cache

if TYPE_CHECKING:
    from gpustrata.catalog.architectures import ModelArchitecture

# vLLM streams weights from object storage (only config/tokenizer files are pulled:
# vllm/config/model.py maybe_pull_model_tokenizer_for_runai); Ray Serve LLM downloads
# nothing on workers for these load formats (ray.llm NodeModelDownloadable.NONE).
OBJECT_STORE_PREFIXES = ("s3://", "gs://", "az://")
STREAMING_LOAD_FORMATS = frozenset({"runai_streamer", "runai_streamer_sharded", "tensorizer"})
# huggingface_hub: HF_HUB_CACHE, else $HF_HOME/hub, else ~/.cache/huggingface/hub.
_BYTES_PER_PARAM = {
    "bfloat16": Fraction(2),
    "float16": Fraction(2),
    "half": Fraction(2),
    "float32": Fraction(4),
    "float": Fraction(4),
}
_QUANT_BYTES = {"fp8": Fraction(1), "int8": Fraction(1), "mxfp4": Fraction(1, 2)}
_QUANT_BYTES.update({q: Fraction(1, 2) for q in ("awq", "gptq", "nvfp4", "bitsandbytes")})


@dataclass(frozen=True, slots=True)
class Download:
    """One model a container downloads and where to (its size is looked up when needed)."""

    model: str
    target: str | None
    """Directory the weights land in (``None``: the image's home is unknown)."""
    ids: tuple[str, ...]
    """Names to look the model up by in the model catalogue."""

    @property
    def size(self) -> Fraction | None:
        """Bytes of weights (catalogue lower bound), or ``None``."""
        return weights_size(list(self.ids))[0]


def _local(model: str) -> bool:
    return model.startswith(("/", "./", "../", "file:"))


def weights_size(model_ids: list[str]) -> tuple[Fraction | None, str]:
    """Bytes of a model's weights from the model catalogue (a lower bound), or ``None``."""
    for model_id in model_ids:
        arch = catalogs.model_architecture(model_id)
        if arch is None:
            continue
        # Worked out once per catalogue entry (held here, so its id names only it).
        known = _SIZES.get(id(arch))
        if known is None or known[0] is not arch:
            known = _SIZES[id(arch)] = (arch, _arch_size(arch))
        return known[1]
    return None, ""


_SIZES: dict[int, tuple[ModelArchitecture, tuple[Fraction | None, str]]] = {}


def _arch_size(arch: ModelArchitecture) -> tuple[Fraction | None, str]:
    if arch.weights_bytes:
        return Fraction(arch.weights_bytes), f"{arch.id} safetensors"
    per = _QUANT_BYTES.get(arch.quantization or "") if arch.quantization else None
    per = per if per is not None else _BYTES_PER_PARAM.get(arch.torch_dtype)
    if per is None:
        return None, ""
    size = Fraction(str(arch.params_total_b)) * 10**9 * per
    dtype = arch.quantization or arch.torch_dtype
    return size, f"{arch.params_total_b}B parameters x {float(per):g} bytes ({dtype})"


def _gb(value: Fraction) -> str:
    return f"{float(value) / 10**9:.1f} GB"


def _vllm_download(site: EngineSite | None, c: ContainerRef) -> Download | None:
    if site is None or not isinstance(site.engine.model, str) or not site.engine.model:
        return None
    model = site.engine.model
    if "$" in model:
        return None  # filled in at run time (a serving runtime's ${MODEL}): not known here
    if _local(model) or model.startswith(OBJECT_STORE_PREFIXES):
        return None
    if str(site.flag("load_format") or "") in STREAMING_LOAD_FORMATS:
        return None
    if c.literal_env().get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes"}:
        return None  # reads a prepared cache, downloads nothing
    return Download(model, hf_hub_cache(c, site.flag("download_dir")), (model,))


def _ray_downloads(sites: list[EngineSite], c: ContainerRef) -> list[Download]:
    """What the Ray Serve LLM engines of a RayService download on GPU worker *c*."""
    out = []
    for site in sites:
        if not site.ray:
            continue
        llm = site.llm_config
        model_id = dig(llm, "model_loading_config", "model_id")
        source = dig(llm, "model_loading_config", "model_source")
        if isinstance(source, Mapping):  # CloudMirrorConfig
            source = source.get("bucket_uri")
        name = source if isinstance(source, str) and source else model_id
        if not isinstance(name, str) or _local(name):
            continue
        if str(site.flag("load_format")) in STREAMING_LOAD_FORMATS:
            continue
        ids = tuple(n for n in (source, model_id) if isinstance(n, str))
        download = Download(name, hf_hub_cache(c), ids)
        if download not in out:  # YAML aliases repeat one llm_config: name it once
            out.append(download)
    return out


def _covering_mount(c: ContainerRef, target: str | None) -> Mapping[str, Any] | None:
    for mount in as_list(c.raw.get("volumeMounts"), f"volumeMounts of {c.label}"):
        if not isinstance(mount, Mapping) or not isinstance(mount.get("mountPath"), str):
            continue
        path = posixpath.normpath(mount["mountPath"])
        if target is not None:
            target = posixpath.normpath(target)
            if not (path.startswith("/") and target.startswith("/")):
                continue  # commonpath cannot compare a relative path (not a valid mount)
            if posixpath.commonpath([path, target]) == path:
                return mount
        elif path.endswith(("/.cache", "/.cache/huggingface", "/huggingface")):
            return mount
    return None


def _ephemeral(c: ContainerRef) -> tuple[Fraction | None, Fraction | None]:
    def get(section: str) -> Any:
        raw = c.resources(section).get("ephemeral-storage")
        if raw is UNKNOWN:
            raise UnknownInput(f"ephemeral-storage of {c.label}")
        return parse_quantity(raw)

    limit = get("limits")
    request = get("requests")
    return (request if request is not None else limit), limit


def _judge_container(pod: PodRef, c: ContainerRef, downloads: list[Download]) -> Iterator[Verdict]:
    target = downloads[0].target
    mount = _covering_mount(c, target)
    empty: Any = None
    if mount is not None:
        volume = pod.volumes().get(str(mount.get("name")))
        empty = volume.get("emptyDir") if volume is not None else None
        if not isinstance(empty, Mapping):
            return  # a persistent, host or CSI volume holds the weights
        if empty.get("medium") == "Memory":
            return  # counted against the Pod's memory, not its disk
    sizes = [d.size for d in downloads]
    total = exact_sum(s for s in sizes if s is not None) if None not in sizes else None
    values: dict[str, Value] = {
        "container": c.label,
        "models": tuple(d.model for d in downloads),
        "weights_bytes": total,
        "target": target,
        "empty_dir": None,
    }
    if mount is not None and isinstance(empty, Mapping):
        size_limit = parse_quantity(empty.get("sizeLimit"))
        values["empty_dir"] = f"{mount.get('name')}"
        if size_limit is not None and total is not None and size_limit < total:
            values["size_limit"] = f"{empty.get('sizeLimit')}"
            thresholds: dict[str, Value] = {"size_limit_bytes": size_limit}
            yield Verdict(
                "violation", "empty-dir-too-small", values, thresholds, path=(*pod.path, "volumes")
            )
            return
        if size_limit is not None and total is not None:
            return
    request, limit = _ephemeral(c)
    values.update(ephemeral_request=request, ephemeral_limit=limit)
    path = (*c.path, "resources")
    if request is None:
        yield Verdict("violation", "no-ephemeral-storage", values, path=path)
        return
    if total is None:
        values["unsized"] = tuple(d.model for d in downloads if d.size is None)
        yield Verdict("not_evaluated", "weights-size-unknown", values)
        return
    if request < total or (limit is not None and limit < total):
        yield Verdict("violation", "ephemeral-storage-too-small", values, path=path)


def _gi(value: Fraction | None) -> str:
    if value is None:
        return ""
    return f"{float(value) / GIB:g}Gi"


def judge(ctx: RuleContext, obj: K8sObject) -> Iterator[Verdict]:
    """Engines that download weights have a volume or enough ephemeral storage for them."""
    extra = ctx.config.gpu_resources
    sites = engine_sites(ctx, obj)
    by_container = {id(s.container): s for s in sites if s.container is not None}
    for pod in obj.pods():
        for c in pod.containers(init=False):
            if pod.is_ray:
                if pod.role == "head" or not gpu_requests(pod, extra):
                    continue
                downloads = _ray_downloads(sites, c)
            else:
                found = _vllm_download(by_container.get(id(c)), c)
                downloads = [found] if found else []
            if downloads:
                yield from _judge_container(pod, c, downloads)


def fields(verdict: Verdict) -> dict[str, str]:
    """The text a K015 message quotes beyond its values: what the container downloads where
    (the ``downloads`` head), the storage it lands on, the ephemeral-storage settings short of
    the weights, and the models of unknown size."""
    v = verdict.values
    what = ", ".join(cast(tuple[str, ...], v.get("models", ())))
    total = cast(Fraction | None, v.get("weights_bytes"))
    weights = f"{what} (at least {_gb(total)} of weights)" if total else what
    where = f" into {v['target']}" if v.get("target") else " into the Hugging Face cache"
    storage = (
        f"on the emptyDir '{v['empty_dir']}' (node disk, no sizeLimit)"
        if v.get("empty_dir") is not None
        else "with no volume for them"
    )
    request, limit = (
        cast(Fraction | None, v.get(k)) for k in ("ephemeral_request", "ephemeral_limit")
    )
    short = [
        f"{name} {_gi(value)}"
        for name, value in (("request", request), ("limit", limit))
        if value is not None and total is not None and value < total
    ]
    return {
        "downloads": f"{v.get('container')} downloads {weights}{where}",
        "storage": storage,
        "short": " and ".join(short),
        "short_verb": "are" if len(short) > 1 else "is",
        "unsized_list": ", ".join(cast(tuple[str, ...], v.get("unsized", ()))),
        "uncatalogued_fix": catalogs.UNCATALOGUED_FIX,
    }


RULE = folder_rule(__name__, worded(judge, fields))
