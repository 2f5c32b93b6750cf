"""The catalogue reference page (``docs/reference/catalogue.md``) of
:mod:`gpustrata.cli.docs`: GPUs, instances, model architectures and version compatibility,
each entry with its sources."""

from __future__ import annotations

from gpustrata.cli.docs_markdown import _MARK, _cell, _code, _sources, _table

__all__ = ["catalogue_markdown"]


def _num(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}"


def catalogue_markdown() -> str:
    """The catalogue reference, from the loaded catalogue data (what the planner reads)."""
    from gpustrata.catalog.architectures import load_model_catalog
    from gpustrata.catalog.compat import load_compat_catalog
    from gpustrata.catalog.hardware import load_hardware_catalog

    hardware = load_hardware_catalog()
    models = load_model_catalog()
    compat = load_compat_catalog()
    gpus = sorted(hardware.gpus.values(), key=lambda g: g.id)
    instances = sorted(hardware.instances.values(), key=lambda i: i.name)
    out = [
        "# Catalogue and sources",
        "",
        _MARK,
        "",
        "The planner and the rules read these facts from data files in "
        "`components/gpustrata/catalog/data/` (the comment at the top of each file says "
        "how its figures were read). Every entry cites its sources; numbers link to them. "
        "A stack adds or overrides GPUs and instance types without code changes under "
        "`catalog.gpus` and `catalog.instances` (see the "
        "[spec reference](spec.md#catalogextensions)).",
        "",
        f"Contents: {len(gpus)} GPU models, {len(instances)} instance types, "
        f"{len(models)} model architectures, "
        f"{len(compat.gpu_operator_releases())} GPU Operator releases, "
        f"{len(compat.kuberay_releases())} KubeRay releases, "
        f"{len(compat.karpenter_releases())} Karpenter releases, "
        f"{len(compat.ray_releases())} Ray releases, {len(compat.vllm_releases())} vLLM releases.",
        "",
        "## GPU models",
        "",
        "`gpus.yaml`. Memory is what the driver reports (NVML `memory.total`) in GiB; "
        "TFLOP/s are dense BF16 tensor rates; bandwidth in GB/s.",
        "",
    ]
    out += _table(
        [
            "id",
            "name",
            "memory GiB",
            "compute capability",
            "BF16 / FP8",
            "dense BF16 TFLOP/s",
            "bandwidth GB/s",
            "GFD product label",
            "sources",
        ],
        (
            [
                f"`{g.id}`",
                _cell(g.name),
                _num(g.memory_gib),
                g.compute_capability,
                f"{'yes' if g.bf16 else 'no'} / {'yes' if g.fp8 else 'no'}",
                _num(g.dense_bf16_tflops),
                _num(g.memory_bandwidth_gbs),
                ", ".join(f"`{p}`" for p in g.gfd_products),
                _sources(g.sources),
            ]
            for g in gpus
        ),
    )
    out += [
        "",
        "## Instance types",
        "",
        "`instances.yaml`, keyed by the `node.kubernetes.io/instance-type` value. `max pods` "
        "is the EKS default the kubelet reservation formula uses (AWS types only); the price "
        "is the list price of the whole instance (on-demand unless the column names another "
        "kind) with its region and date (instances.yaml says, per source, which date that is).",
        "",
    ]
    out += _table(
        [
            "name",
            "cloud",
            "GPUs",
            "vCPU",
            "memory GiB",
            "max pods",
            "local NVMe GiB",
            "network Gbit/s",
            "USD/h",
            "sources",
        ],
        (
            [
                f"`{i.name}`",
                i.provider,
                f"{i.gpu_count} x `{i.gpu}`",
                str(i.vcpu),
                _num(i.memory_mib / 1024),
                "" if i.max_pods is None else str(i.max_pods),
                str(i.local_nvme_gib),
                _num(i.network_gbps),
                ""
                if i.price is None
                else f"{_num(i.price.usd_per_hour)}"
                + ("" if i.price.kind == "on-demand" else f" {i.price.kind}")
                + f" ({i.price.region}, {i.price.read_on})",
                _sources([*i.sources, *([i.price.source] if i.price else [])]),
            ]
            for i in instances
        ),
    )
    out += [
        "",
        "## Model architectures",
        "",
        "`models.yaml`, read from each model's Hugging Face `config.json`. `KV heads x "
        "head_dim` per layer sets the KV cache per token; parameters in billions "
        "(total / active for mixture-of-experts).",
        "",
    ]
    out += _table(
        [
            "id",
            "architecture",
            "layers",
            "heads / KV heads",
            "head_dim",
            "max positions",
            "params B",
            "attention",
            "sources",
        ],
        (
            [
                f"`{m.id}`",
                f"`{m.architecture}`",
                str(m.num_hidden_layers),
                f"{m.num_attention_heads} / {m.num_key_value_heads}",
                str(m.head_dim),
                str(m.max_position_embeddings),
                _num(m.params_total_b)
                + (
                    "" if m.params_active_b == m.params_total_b else f" / {_num(m.params_active_b)}"
                ),
                str(m.attention),
                _sources(m.sources),
            ]
            for m in sorted(models, key=lambda m: m.id.lower())
        ),
    )
    out += ["", "## GPU Operator releases", "", "`compat-gpu-operator.yaml`.", ""]
    out += _table(
        [
            "release",
            "released",
            "Kubernetes",
            "EKS",
            "default driver",
            "container toolkit",
            "device plugin",
            "DCGM exporter",
            "sources",
        ],
        (
            [
                f"`{r.version}`",
                str(r.released),
                f"{r.kubernetes.min}-{r.kubernetes.max}",
                f"{r.eks_kubernetes.min}-{r.eks_kubernetes.max}" if r.eks_kubernetes else "-",
                r.default_driver,
                r.container_toolkit.version,
                r.device_plugin.version,
                r.dcgm_exporter.version,
                _sources(r.sources),
            ]
            for r in compat.gpu_operator_releases()
        ),
    )
    cuda = sorted(
        (compat.min_driver_for_cuda(v) for v in _cuda_minors()),
        key=lambda r: tuple(int(p) for p in r.cuda.split(".")) if r else (),
        reverse=True,
    )
    out += ["", "## CUDA and the minimum driver", "", "`compat-cuda.yaml`.", ""]
    out += _table(
        ["CUDA", "toolkit minimum driver", "minor-version-compatibility range", "sources"],
        (
            [
                r.cuda,
                r.toolkit_min_driver,
                f">= {r.minor_version_compat_min_driver}"
                + (
                    f", < {r.minor_version_compat_max_driver_exclusive}"
                    if r.minor_version_compat_max_driver_exclusive
                    else ""
                ),
                _sources(r.sources),
            ]
            for r in cuda
            if r is not None
        ),
    )
    out += ["", "## vLLM releases", "", "`compat-vllm.yaml`.", ""]
    out += _table(
        ["vLLM", "torch", "Python", "Ray requirement", "default engine", "sources"],
        (
            [
                v.version,
                v.torch,
                _cell(v.requires_python),
                _cell(v.ray_requirement or "-"),
                v.default_engine,
                _sources(v.sources),
            ]
            for v in compat.vllm_releases()
        ),
    )
    out += ["", "## KubeRay releases", "", "`compat-kuberay.yaml`.", ""]
    out += _table(
        [
            "KubeRay",
            "released",
            "minimum Ray",
            "RayService unhealthy thresholds honoured",
            "agent probes injected into",
            "sources",
        ],
        (
            [
                k.version,
                str(k.released),
                k.min_ray or "-",
                "yes" if k.unhealthy_thresholds_honoured else "no",
                k.agent_probes,
                _sources(k.sources),
            ]
            for k in compat.kuberay_releases()
        ),
    )
    out += [
        "",
        "## Karpenter releases",
        "",
        "`compat-karpenter.yaml`: the chart pools with `provisioner: karpenter` install.",
        "",
    ]
    out += _table(
        ["Karpenter", "released", "chart", "Kubernetes", "APIs", "sources"],
        (
            [
                k.version,
                str(k.released),
                _code(k.chart),
                f"{k.kubernetes.min} - {k.kubernetes.max}",
                ", ".join(k.api_versions),
                _sources(k.sources),
            ]
            for k in compat.karpenter_releases()
        ),
    )
    out += ["", "## Ray releases", "", "`compat-ray.yaml`: the vLLM that `ray[llm]` requires.", ""]
    out += _table(
        ["Ray", "Python", "vLLM requirement (`llm` extra)", "sources"],
        (
            [
                r.version,
                _cell(r.requires_python),
                _cell(r.vllm_requirement or "-"),
                _sources(r.sources),
            ]
            for r in compat.ray_releases()
        ),
    )
    out += ["", "Ray releases with a defect that breaks Ray on KubeRay (rule R004):", ""]
    out += _table(
        ["defect", "Ray", "fixed in", "what breaks", "sources"],
        (
            [d.name, f"{d.first_ray} and later", d.fixed_ray, _cell(d.breaks), _sources(d.sources)]
            for d in compat.all_ray_defects()
        ),
    )
    return "\n".join(out) + "\n"


def _cuda_minors() -> list[str]:
    """CUDA minors of the packaged CUDA table (the catalogue object offers lookups only)."""
    import yaml

    from gpustrata.catalog.compat import packaged_documents

    found: list[str] = []
    for _name, text in packaged_documents():
        data = yaml.safe_load(text) or {}
        found += [str(entry["cuda"]) for entry in data.get("cuda_driver_requirements", [])]
    return found
