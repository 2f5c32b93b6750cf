"""``gpustrata plan --diagram FILE.svg``: the stack as a picture, drawn from the plan.

One box per node pool with its nodes at the pool's maximum size and each node's GPUs as
squares; the engine Pods on them (Ray worker Pods with their placement-group bundles
``B0..Bn``, or plain vLLM Pods), placed first-fit at the maximum replica count (solid:
the minimum replicas, dashed: scale-out up to the maximum); then one card per vLLM
engine with a bar of one GPU's memory: weights, runtime (activation peak, CUDA graphs,
overhead), KV cache, and the headroom ``gpu_memory_utilization`` leaves, from
``ModelPlan.capacity.memory``. Written with :mod:`xml.etree.ElementTree`.

Element ids for tools and tests: ``pool-<pool>``, ``node-<pool>-<n>``,
``workers-<model>`` (the Ray worker group or the Deployment's Pods),
``pod-<model>-<n>``, ``engine-<model>``, ``memory-<model>``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from gpustrata.core.errors import InputError
from gpustrata.planning.plan_types import ModelPlan, PoolPlan, StackPlan
from gpustrata.vllm.capacity import gib

__all__ = ["diagram_svg", "text_width", "write_diagram"]

SVG_NS = "http://www.w3.org/2000/svg"
FONT = "DejaVu Sans, Verdana, Arial, sans-serif"
WIDTH = 1100
MARGIN = 20
PAD = 14
GPU = 26
"""Side of one GPU square."""
GAP = 4
MAX_NODES = 6
"""Nodes drawn per pool; a larger pool says how many more there are."""
PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#9D755D")
MEMORY_COLOURS = {
    "weights": "#4C78A8",
    "runtime": "#B279A2",
    "kv": "#54A24B",
    "headroom": "#D9D9D9",
}
FREE = "#EEEEEE"
ALERT = "#D62728"

ET.register_namespace("", SVG_NS)

_NARROW = set(" .,:;'|!il()[]{}/·-_ftrj1")


def text_width(text: str, size: float, bold: bool = False) -> float:
    """A generous estimate of the rendered width of ``text`` in DejaVu Sans (the widest
    common sans-serif), used to keep labels inside their boxes; a test measures the real
    glyphs."""
    units = 0.0
    for c in text:
        if c.isupper() or c in "MWmw%@#&×":
            units += 0.82
        elif c.isdigit():
            units += 0.66
        elif c in _NARROW:
            units += 0.40
        else:
            units += 0.62
    return units * size * (1.1 if bold else 1.0)


def fit(text: str, width: float, size: float, bold: bool = False) -> str:
    """``text`` cut with an ellipsis so that it fits ``width``."""
    if text_width(text, size, bold) <= width:
        return text
    while text and text_width(text + "…", size, bold) > width:
        text = text[:-1]
    return text + "…"


def _id(*parts: object) -> str:
    """An XML id from names (DNS labels already; anything else is replaced)."""
    raw = "-".join(str(p) for p in parts)
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in raw)


@dataclass
class _Pod:
    """One engine Pod placed on a node: its model, GPUs and bundle labels."""

    model: ModelPlan
    index: int
    gpus: int
    scale_out: bool
    labels: list[str]
    colour: str


@dataclass
class _Node:
    gpus: int
    pods: list[_Pod] = field(default_factory=list)

    @property
    def free(self) -> int:
        return self.gpus - sum(p.gpus for p in self.pods)


def _place(pool: PoolPlan, models: list[ModelPlan], colours: dict[str, str]) -> list[_Node]:
    """First-fit the engine Pods at maximum scale onto the pool at maximum size."""
    nodes = [_Node(pool.instance.gpu_count) for _ in range(pool.spec.max_size)]
    for mp in models:
        if mp.ray is not None:
            per_pod, count, minimum = mp.ray.gpus_per_worker, mp.ray.max_workers, mp.ray.min_workers
            per_replica = mp.ray.workers_per_replica
        else:
            per_pod, count, minimum, per_replica = (
                mp.gpus_per_pod,
                mp.max_replicas,
                mp.min_replicas,
                1,
            )
        for i in range(count):
            if mp.ray is not None:
                first = (i % per_replica) * per_pod
                labels = [f"B{first + b}" for b in range(per_pod)]
            else:
                labels = ["GPU"] * per_pod
            pod = _Pod(mp, i + 1, per_pod, i >= minimum, labels, colours[mp.name])
            target = next((n for n in nodes if n.free >= per_pod), None)
            if target is None:  # does not fit at maximum scale: shown on an extra node
                target = _Node(max(per_pod, pool.instance.gpu_count))
                nodes.append(target)
            target.pods.append(pod)
    return nodes


class _Canvas:
    def __init__(self) -> None:
        self.root = ET.Element(
            f"{{{SVG_NS}}}svg",
            {"width": str(WIDTH), "font-family": FONT, "font-size": "12"},
        )
        ET.SubElement(self.root, f"{{{SVG_NS}}}rect", _attrs(0, 0, WIDTH, 0, fill="#FFFFFF"))

    @staticmethod
    def group(parent: ET.Element, gid: str | None = None, **attrs: str) -> ET.Element:
        if gid is not None:
            attrs["id"] = gid
        return ET.SubElement(parent, f"{{{SVG_NS}}}g", attrs)

    @staticmethod
    def rect(parent: ET.Element, x: float, y: float, w: float, h: float, **attrs: str) -> None:
        ET.SubElement(parent, f"{{{SVG_NS}}}rect", _attrs(x, y, w, h, **attrs))

    @staticmethod
    def frame(parent: ET.Element, x: float, y: float, w: float, h: float, **attrs: str) -> None:
        """The box a group's own labels must stay inside (class="frame")."""
        attrs.setdefault("rx", "6")
        ET.SubElement(
            parent, f"{{{SVG_NS}}}rect", _attrs(x, y, w, h, **{"class": "frame", **attrs})
        )

    @staticmethod
    def text(
        parent: ET.Element,
        x: float,
        y: float,
        value: str,
        *,
        size: float = 12,
        bold: bool = False,
        width: float | None = None,
        anchor: str = "start",
        fill: str = "#222222",
    ) -> ET.Element:
        """A label, cut to ``width`` when given."""
        shown = fit(value, width, size, bold) if width is not None else value
        attrs = {"x": _n(x), "y": _n(y), "font-size": _n(size), "fill": fill}
        if bold:
            attrs["font-weight"] = "bold"
        if anchor != "start":
            attrs["text-anchor"] = anchor
        element = ET.SubElement(parent, f"{{{SVG_NS}}}text", attrs)
        element.text = shown
        if shown != value:
            ET.SubElement(element, f"{{{SVG_NS}}}title").text = value
        return element


def _n(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def _attrs(x: float, y: float, w: float, h: float, **extra: str) -> dict[str, str]:
    return {"x": _n(x), "y": _n(y), "width": _n(w), "height": _n(h), **extra}


def _node_width(node: _Node) -> float:
    widest = max([p.gpus for p in node.pods] + [node.free, 1])
    squares = widest * (GPU + GAP) + GAP
    return max(squares + 2 * 8, 140)


STRIP = 14 + GPU + 8
"""Height of one Pod strip: its label, its GPU squares, padding."""


def _node_height(node: _Node) -> float:
    strips = len(node.pods) + (1 if node.free else 0)
    return 22 + strips * (STRIP + 6) + 2


def _draw_node(
    c: _Canvas, parent: ET.Element, node: _Node, pool: PoolPlan, n: int, x: float, y: float
) -> None:
    w, h = _node_width(node), _node_height(node)
    g = c.group(parent, _id("node", pool.name, n))
    autoscaled = n > pool.spec.min_size
    c.frame(
        g,
        x,
        y,
        w,
        h,
        fill="#FFFFFF",
        stroke="#888888",
        **({"stroke-dasharray": "5 3"} if autoscaled else {}),
    )
    label = f"node {n}" + (" (scale-out)" if autoscaled else "")
    c.text(g, x + 8, y + 15, label, size=11, width=w - 16, fill="#555555")
    sy = y + 22
    for pod in node.pods:
        _draw_strip(c, g, pod, x + 6, sy, w - 12)
        sy += STRIP + 6
    if node.free:
        strip = c.group(g, **{"class": "free"})
        c.frame(strip, x + 6, sy, w - 12, STRIP, fill="#FAFAFA", stroke="#CCCCCC", rx="4")
        c.text(
            strip,
            x + 12,
            sy + 12,
            f"{node.free} free GPU" + ("s" if node.free > 1 else ""),
            size=10,
            width=w - 24,
            fill="#777777",
        )
        for i in range(node.free):
            c.rect(
                strip,
                x + 6 + GAP + i * (GPU + GAP),
                sy + 15,
                GPU,
                GPU,
                fill=FREE,
                stroke="#BBBBBB",
                rx="3",
            )


def _draw_strip(c: _Canvas, parent: ET.Element, pod: _Pod, x: float, y: float, w: float) -> None:
    mp = pod.model
    kind = "Ray worker" if mp.ray is not None else "vLLM Pod"
    g = c.group(parent, _id("pod", mp.name, pod.index))
    dash = {"stroke-dasharray": "4 3"} if pod.scale_out else {}
    c.frame(
        g,
        x,
        y,
        w,
        STRIP,
        fill="#FFFFFF",
        stroke=pod.colour,
        rx="4",
        **{"stroke-width": "1.5", **dash},
    )
    c.text(g, x + 6, y + 12, f"{kind} {pod.index}", size=10, width=w - 12)
    for i, label in enumerate(pod.labels):
        sx = x + GAP + i * (GPU + GAP)
        c.rect(
            g,
            sx,
            y + 15,
            GPU,
            GPU,
            fill=pod.colour,
            rx="3",
            **({"fill-opacity": "0.45"} if pod.scale_out else {}),
        )
        c.text(
            g,
            sx + GPU / 2,
            y + 15 + GPU / 2 + 3.5,
            label,
            size=8.5,
            anchor="middle",
            fill="#FFFFFF" if not pod.scale_out else "#222222",
        )


def _pool_header(pool: PoolPlan, models: list[ModelPlan]) -> tuple[str, str]:
    inst = pool.instance
    first = (
        f"pool {pool.name} · {inst.name} · {inst.gpu_count} × {pool.gpu.name} "
        f"({pool.gpu.memory_gib:g} GiB) per node"
    )
    spec = pool.spec
    second = (
        f"{spec.min_size}..{spec.max_size} nodes {spec.capacity_type} · "
        f"{len(models)} engine{'s' if len(models) != 1 else ''} · drawn at maximum size"
    )
    return first, second


def _workers_line(mp: ModelPlan) -> str:
    """The worker group (Ray) or the Deployment's Pods of one model."""
    if mp.ray is not None:
        r = mp.ray
        return (
            f"{mp.name}: Ray worker group {mp.pool.name}-workers, {r.min_workers}..{r.max_workers}"
            f" workers × {r.gpus_per_worker} GPU; placement group per engine {len(r.bundles)} × "
            f"{{GPU: 1}} {r.placement_strategy}"
        )
    return (
        f"{mp.name}: Deployment, {mp.min_replicas}..{mp.max_replicas} vLLM Pods × "
        f"{mp.gpus_per_pod} GPU"
    )


def _engine_line(mp: ModelPlan) -> str:
    e = mp.spec.engine
    cap = mp.capacity
    if cap is not None:
        mml = f"{cap.max_model_len:,}"
    else:
        mml = f"{e.max_model_len:,}" if e.max_model_len else "model max"
    line = f"TP {e.tensor_parallel_size} × PP {e.pipeline_parallel_size} · max_model_len {mml}"
    if cap is None:
        return line
    if cap.fits:
        line += (
            f" · KV cache {cap.kv.tokens:,} tokens = "
            f"{cap.max_concurrent_full_length_sequences} full-length requests"
        )
    else:
        line += " · vLLM refuses to start"
    return line + (
        f" · startup ~{round(cap.startup.total_s)} s (window {mp.probes.startup_window_s} s)"
    )


ENGINE_H = 106


def _draw_engine(
    c: _Canvas, parent: ET.Element, mp: ModelPlan, colour: str, x: float, y: float, w: float
) -> None:
    g = c.group(parent, _id("engine", mp.name))
    c.frame(g, x, y, w, ENGINE_H, fill="#FFFFFF", stroke=colour, **{"stroke-width": "2"})
    c.rect(g, x, y, 8, ENGINE_H, fill=colour, rx="3")
    title = f"vLLM engine {mp.name} · {mp.spec.model}"
    c.text(g, x + 18, y + 20, title, size=13, bold=True, width=w - 30)
    c.text(
        g,
        x + 18,
        y + 38,
        _engine_line(mp),
        size=11,
        width=w - 30,
        fill=ALERT if mp.capacity is not None and not mp.capacity.fits else "#222222",
    )
    _draw_memory(c, g, mp, x + 18, y + 50, w - 36)


def _draw_memory(
    c: _Canvas, parent: ET.Element, mp: ModelPlan, x: float, y: float, w: float
) -> None:
    cap = mp.capacity
    if cap is None:
        c.text(
            parent,
            x,
            y + 16,
            f"GPU memory not estimated: {mp.capacity_unavailable}",
            size=11,
            width=w,
            fill="#777777",
        )
        return
    mem = cap.memory
    total = mem.total.value
    runtime = mem.activation.value + mem.cuda_graphs.value + mem.runtime_overhead.value
    kv = max(0, mem.available_kv_bytes)
    used = mem.weights.value + runtime + kv
    headroom = max(0, total - max(mem.requested.value, used))
    overflow = max(0, mem.weights.value + runtime - mem.requested.value)
    g = c.group(parent, _id("memory", mp.name))
    bar_w, h = w, 18
    scale = bar_w / max(total, used)
    segments = [
        ("weights", mem.weights.value, MEMORY_COLOURS["weights"]),
        ("runtime", runtime, MEMORY_COLOURS["runtime"]),
        ("KV cache", kv, MEMORY_COLOURS["kv"]),
        ("headroom", headroom, MEMORY_COLOURS["headroom"]),
    ]
    sx = x
    for name, value, colour in segments:
        seg_w = value * scale
        if seg_w <= 0:
            continue
        c.rect(g, sx, y, seg_w, h, fill=colour, **{"class": f"mem-{name.split()[0].lower()}"})
        if text_width(gib(value), 10) + 6 < seg_w:
            c.text(
                g,
                sx + seg_w / 2,
                y + 13,
                gib(value),
                size=10,
                anchor="middle",
                fill="#FFFFFF" if name != "headroom" else "#333333",
            )
        sx += seg_w
    c.rect(g, x, y, bar_w, h, fill="none", stroke="#444444")
    if not cap.kv.fits_one_sequence and cap.weights_fit:
        # Where one request of max_model_len would end: past the memory vLLM may use.
        need_x = x + (mem.weights.value + runtime + cap.kv.needed_bytes) * scale
        need_x = min(need_x, x + bar_w)
        ET.SubElement(
            g,
            f"{{{SVG_NS}}}line",
            {
                "x1": _n(need_x),
                "y1": _n(y - 4),
                "x2": _n(need_x),
                "y2": _n(y + h + 4),
                "stroke": ALERT,
                "stroke-width": "2",
                "class": "kv-needed",
            },
        )
    legend = (
        f"one GPU: weights {gib(mem.weights.value)} · runtime {gib(runtime)} · "
        f"KV cache {gib(kv)} · headroom {gib(total - mem.requested.value)} "
        f"(gpu_memory_utilization {cap.gpu_memory_utilization}) of {gib(total)} CUDA memory"
    )
    c.text(g, x, y + h + 15, legend, size=10, width=w, fill="#444444")
    if overflow:
        c.text(
            g,
            x,
            y + h + 29,
            f"weights and runtime exceed the requested memory by "
            f"{gib(overflow)}: no room for a KV cache",
            size=10,
            width=w,
            fill=ALERT,
        )
    elif not cap.kv.fits_one_sequence:
        c.text(
            g,
            x,
            y + h + 29,
            f"red line: one {cap.max_model_len:,}-token request needs "
            f"{gib(cap.kv.needed_bytes)} of KV cache; largest max_model_len that fits: "
            f"{cap.largest_max_model_len:,}",
            size=10,
            width=w,
            fill=ALERT,
        )


def _legend(c: _Canvas, y: float) -> float:
    g = c.group(c.root, "legend")
    x = float(MARGIN)
    items = [
        (MEMORY_COLOURS["weights"], "weights"),
        (MEMORY_COLOURS["runtime"], "runtime (activations, CUDA graphs, overhead)"),
        (MEMORY_COLOURS["kv"], "KV cache"),
        (MEMORY_COLOURS["headroom"], "headroom (1 - gpu_memory_utilization)"),
    ]
    for colour, label in items:
        c.rect(g, x, y, 12, 12, fill=colour)
        c.text(g, x + 16, y + 10, label, size=10)
        x += 16 + text_width(label, 10) + 18
    notes = (
        "GPU squares: solid = minimum replicas, faded in dashed boxes = scale-out up to the "
        "maximum; B0..Bn = the placement-group bundles of one engine.",
        "Pods are placed first-fit at maximum scale for the picture; the Kubernetes scheduler "
        "decides at run time.",
    )
    for i, note in enumerate(notes):
        c.text(g, MARGIN, y + 30 + 14 * i, note, size=10, width=WIDTH - 2 * MARGIN, fill="#555555")
    return y + 30 + 14 * len(notes)


def diagram_svg(plan: StackPlan, title: str | None = None) -> str:
    """The SVG document for a planned stack."""
    c = _Canvas()
    colours = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(plan.models)}
    spec = plan.spec
    c.text(
        c.root,
        MARGIN,
        28,
        title or f"gpustrata stack · environment {spec.environment}",
        size=18,
        bold=True,
        width=WIDTH - 2 * MARGIN,
    )
    c.text(
        c.root,
        MARGIN,
        48,
        f"cluster {spec.cluster.name} · {len(plan.pools)} GPU pools · "
        f"{len(plan.models)} vLLM engines",
        size=12,
        width=WIDTH - 2 * MARGIN,
        fill="#555555",
    )
    y = 64.0
    for pool in plan.pools.values():
        models = [m for m in plan.models.values() if m.pool.name == pool.name]
        y = _draw_pool(c, pool, models, colours, y) + 16
    y = _legend(c, y)
    height = y + MARGIN
    c.root.set("height", _n(height))
    c.root.set("viewBox", f"0 0 {WIDTH} {_n(height)}")
    c.root[0].set("height", _n(height))
    ET.indent(c.root)
    return ET.tostring(c.root, encoding="unicode", xml_declaration=True) + "\n"


def _draw_pool(
    c: _Canvas, pool: PoolPlan, models: list[ModelPlan], colours: dict[str, str], y: float
) -> float:
    g = c.group(c.root, _id("pool", pool.name))
    x, w = float(MARGIN), float(WIDTH - 2 * MARGIN)
    inner = c.group(g)
    first, second = _pool_header(pool, models)
    c.text(inner, x + PAD, y + 22, first, size=14, bold=True, width=w - 2 * PAD)
    c.text(inner, x + PAD, y + 40, second, size=11, width=w - 2 * PAD, fill="#555555")
    nodes = _place(pool, models, colours)
    shown, hidden = nodes[:MAX_NODES], nodes[MAX_NODES:]
    cy = y + 50
    for mp in models:
        chip = c.group(g, _id("workers", mp.name))
        c.rect(chip, x + PAD, cy, 12, 12, fill=colours[mp.name], rx="2")
        c.text(chip, x + PAD + 18, cy + 10, _workers_line(mp), size=11, width=w - 2 * PAD - 18)
        cy += 18
    nodes_g = c.group(g, **{"class": "nodes"})
    nx, ny, row_h = x + PAD, cy + 4, 0.0
    for n, node in enumerate(shown, start=1):
        nw, nh = _node_width(node), _node_height(node)
        if nx + nw > x + w - PAD and nx > x + PAD:
            nx, ny, row_h = x + PAD, ny + row_h + 10, 0.0
        _draw_node(c, nodes_g, node, pool, n, nx, ny)
        nx += nw + 10
        row_h = max(row_h, nh)
    ny += row_h
    if hidden:
        c.text(
            g, x + PAD, ny + 16, f"+ {len(hidden)} more nodes like these", size=11, fill="#555555"
        )
        ny += 20
    ey = ny + 12
    for mp in models:
        _draw_engine(c, g, mp, colours[mp.name], x + PAD, ey, w - 2 * PAD)
        ey += ENGINE_H + 10
    height = ey - y + 4
    frame_g = ET.Element(f"{{{SVG_NS}}}g")
    _Canvas.frame(
        frame_g,
        x,
        y,
        w,
        height,
        fill="#F7F9FC",
        stroke="#5B6B7F",
        **{"stroke-width": "1.5", "rx": "10"},
    )
    g.insert(0, frame_g[0])  # the pool's frame first, under everything else
    return y + height


def write_diagram(plan: StackPlan, path: Path | str, title: str | None = None) -> None:
    """Write :func:`diagram_svg` to ``path``; an unwritable path is an input error."""
    target = Path(path)
    try:
        target.write_text(diagram_svg(plan, title), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"--diagram {target}: cannot write the SVG ({exc.strerror})") from None
