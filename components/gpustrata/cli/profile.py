"""``gpustrata profile --from-nodes nodes.yaml``: write a cluster profile from the Nodes.

The Nodes are read by the manifest reader and grouped into pools by the view's own
:func:`~gpustrata_policies.view.pools.node_pools` (pool label, else GPU shape), so the
profile states what ``check --context nodes.yaml`` would read: per pool the labels and
taints every Node shares, the GPU (GPU Feature Discovery ``nvidia.com/gpu.product``,
where the hardware catalogue knows it), GPUs per node, the driver (GFD
``nvidia.com/cuda.driver.*``) and the kubelet's minor version; the distribution from the
Nodes' labels. Pool sizes are not in a Node dump (it shows the Nodes there now), so they
are left for the user to state.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

import yaml

from gpustrata.cli.command import add_command
from gpustrata.core.errors import InputError

__all__ = ["profile_command", "profile_from_nodes", "register"]

_HEADER = """\
# gpustrata cluster profile, written by `gpustrata profile --from-nodes {source}`
# from {nodes} Node(s) in {pools} pool(s). Check it, add what a Node dump cannot show
# (pool min_size/max_size, admission, images, crds, storage), and keep it next to the
# manifests as .gpustrata/cluster.yaml. Reference: docs/reference/cluster-profile.md
"""


_VOLATILE_LABELS = frozenset({"kubernetes.io/hostname", "nvidia.com/gfd.timestamp"})
"""Labels that name one Node or one moment, not the pool."""


class _Dumper(yaml.SafeDumper):
    """Writes repeated values out again (no ``&id001`` anchors in a file people edit)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def register(sub: Any) -> None:
    """Add ``profile`` to the ``gpustrata`` sub-command parser."""
    p = add_command(sub, "profile", profile_command)
    p.add_argument(
        "--from-nodes",
        required=True,
        metavar="FILE",
        help="output of `kubectl get nodes -o yaml` (a file, or - for stdin)",
    )
    p.add_argument(
        "-o", "--output", metavar="FILE", help="write here instead of stdout (not overwritten)"
    )


def profile_command(
    args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None
) -> int:
    """write a cluster profile (.gpustrata/cluster.yaml) from `kubectl get nodes -o yaml`

    Write a cluster profile from a dump of the cluster's Nodes: pools (shared labels and taints,
    GPU product and count, driver, Kubernetes version), the taints GPU nodes carry and the
    distribution. The result is validated before it is written.
    """
    from gpustrata_policies.inputs.manifests import load_paths

    objects = load_paths([args.from_nodes], stdin if stdin is not None else sys.stdin)
    nodes = [o for o in objects if o.kind == "Node"]
    if not nodes:
        raise InputError(
            f"{args.from_nodes}: holds no Node object; give the output of "
            "`kubectl get nodes -o yaml`"
        )
    document, pools = profile_from_nodes(objects)
    from pydantic import ValidationError

    from gpustrata.catalog.profile import ClusterProfile

    try:
        ClusterProfile.model_validate(document)  # what is written reads back
    except ValidationError as exc:  # a gpustrata bug: say so without a traceback
        raise InputError(f"the profile made from {args.from_nodes} is invalid: {exc}") from None
    source = "-" if args.from_nodes == "-" else Path(args.from_nodes).name
    text = _HEADER.format(source=source, nodes=len(nodes), pools=pools)
    text += yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
    if args.output:
        target = Path(args.output)
        if target.exists():
            raise InputError(f"{target}: exists; remove it or name another file")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        return 0
    (out or sys.stdout).write(text)
    return 0


def _pool_name(name: str, taken: set[str]) -> str:
    """A DNS-1123 name for a pool (a shape group's name has spaces and capitals)."""
    base = re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.") or "pool"
    found, n = base, 2
    while found in taken:
        found, n = f"{base}-{n}", n + 1
    taken.add(found)
    return found


def profile_from_nodes(objects: list[Any]) -> tuple[dict[str, Any], int]:
    """The profile document (a mapping in the profile's key order) the Node objects among
    *objects* describe, and the number of pools."""
    from gpustrata_policies.view import catalogs
    from gpustrata_policies.view.nodes import object_distribution
    from gpustrata_policies.view.pools import node_pools

    pools = node_pools(objects)
    distribution = next(
        (d for d in (object_distribution(o) for o in objects if o.kind == "Node") if d), "other"
    )
    taken: set[str] = set()
    entries: list[dict[str, Any]] = []
    gpu_taint_sets: list[list[dict[str, str]]] = []
    for pool in pools:
        entry: dict[str, Any] = {"name": _pool_name(pool.name, taken)}
        labels = {k: v for k, v in pool.labels.items() if k not in _VOLATILE_LABELS}
        entry["labels"] = dict(sorted(labels.items()))
        instance = pool.text("instanceType")
        if instance:
            entry["instance_type"] = instance
        if pool.gpu_product and catalogs.gpu_by_label(pool.gpu_product) is not None:
            entry["gpu"] = pool.gpu_product
        entry["gpus_per_node"] = pool.gpu_count or 0
        entry["taints"] = [_taint(t) for t in pool.taints]
        if pool.has_gpus:
            gpu_taint_sets.append(entry["taints"])
        driver = pool.driver_version
        if driver:
            entry["driver_version"] = driver
        entries.append(entry)
    document: dict[str, Any] = {"kind": "ClusterProfile", "distribution": distribution}
    if gpu_taint_sets and all(ts == gpu_taint_sets[0] for ts in gpu_taint_sets):
        document["gpu_taints"] = gpu_taint_sets[0]
    document["pools"] = entries
    versions: dict[str, str] = {}
    minors = {p.kubernetes_version for p in pools if p.kubernetes_version}
    if len(minors) == 1:
        versions["kubernetes"] = minors.pop()
    drivers = {p.driver_version for p in pools if p.has_gpus and p.driver_version}
    if len(drivers) == 1:
        versions["nvidia_driver"] = drivers.pop()
    if versions:
        document["versions"] = versions
    return document, len(entries)


def _taint(taint: Mapping[str, str]) -> dict[str, str]:
    out = {"key": taint["key"]}
    if taint.get("value"):
        out["value"] = taint["value"]
    out["effect"] = taint["effect"]
    return out
