"""`plan --diagram FILE.svg`: the stack drawn from the plan, checked as XML and as pixels.

The PNG comes from CairoSVG (dev extra; it loads the system's libcairo2). Labels are
measured with the real DejaVu Sans glyphs (Pillow, a CairoSVG dependency) so that a
label spilling out of its box fails.
"""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from pathlib import Path

import cairosvg
import pytest
from _stacks import ROOT, stack_path
from PIL import Image, ImageFont

from gpustrata.cli.app import main
from gpustrata.planning.build import plan_spec
from gpustrata.planning.plan_types import StackPlan
from gpustrata.reports.diagram import MEMORY_COLOURS, SVG_NS, diagram_svg
from gpustrata.spec.loader import load_stack_file

NS = {"svg": SVG_NS}
FONTS = Path("/usr/share/fonts/truetype/dejavu")


def _plan(path: Path) -> StackPlan:
    return plan_spec(load_stack_file(path))


def _ids(root: ET.Element) -> set[str]:
    return {e.get("id", "") for e in root.iter() if e.get("id")}


def _texts(element: ET.Element) -> str:
    return " ".join(t.text or "" for t in element.iter(f"{{{SVG_NS}}}text"))


@pytest.fixture(scope="module")
def prod() -> tuple[StackPlan, str]:
    plan = _plan(stack_path("prod"))
    return plan, diagram_svg(plan)


def test_prod_diagram_shows_every_pool_worker_group_and_engine(
    prod: tuple[StackPlan, str],
) -> None:
    plan, svg = prod
    root = ET.fromstring(svg)
    ids = _ids(root)
    by_id = {e.get("id"): e for e in root.iter() if e.get("id")}
    for pool in plan.pools.values():
        assert f"pool-{pool.name}" in ids
        text = _texts(by_id[f"pool-{pool.name}"])
        assert pool.instance.name in text and pool.gpu.name in text
        nodes = [i for i in ids if i.startswith(f"node-{pool.name}-")]
        assert len(nodes) == min(pool.spec.max_size, 6)
    for mp in plan.models.values():
        workers = by_id[f"workers-{mp.name}"]
        engine = by_id[f"engine-{mp.name}"]
        assert f"memory-{mp.name}" in ids
        pool_text = _texts(by_id[f"pool-{mp.pool.name}"])
        assert mp.name in _texts(workers) and mp.spec.model in _texts(engine)
        assert f"TP {mp.spec.engine.tensor_parallel_size}" in _texts(engine)
        pods = [i for i in ids if i.startswith(f"pod-{mp.name}-")]
        if mp.ray is not None:
            assert f"{mp.pool.name}-workers" in _texts(workers)
            assert mp.ray.placement_strategy in _texts(workers)
            assert len(pods) == mp.ray.max_workers
            bundles = [t.text for t in by_id[pods[0]].iter(f"{{{SVG_NS}}}text")][1:]
            assert bundles == [f"B{i}" for i in range(mp.ray.gpus_per_worker)]
        else:
            assert len(pods) == mp.max_replicas
        assert f"{mp.name}" in pool_text
        cap = mp.capacity
        assert cap is not None
        assert f"{cap.kv.tokens:,} tokens" in _texts(engine)
        # The memory bar: weights, runtime, KV cache, headroom, in proportion.
        bar = by_id[f"memory-{mp.name}"]
        widths = {
            r.get("class"): float(r.get("width", 0))
            for r in bar.iter(f"{{{SVG_NS}}}rect")
            if (r.get("class") or "").startswith("mem-")
        }
        assert set(widths) == {"mem-weights", "mem-runtime", "mem-kv", "mem-headroom"}
        ratio = widths["mem-kv"] / widths["mem-weights"]
        expected = cap.memory.available_kv_bytes / cap.weights.bytes_per_gpu
        assert ratio == pytest.approx(expected, rel=1e-3)  # widths have one decimal


def test_prod_diagram_renders_to_png(prod: tuple[StackPlan, str], tmp_path: Path) -> None:
    _, svg = prod
    root = ET.fromstring(svg)
    png = cairosvg.svg2png(bytestring=svg.encode())
    (tmp_path / "prod.png").write_bytes(png)
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.size == (int(root.get("width", 0)), int(float(root.get("height", 0))))
    colours = {c for _, c in image.getcolors(maxcolors=1 << 20) or []}
    for name in ("weights", "kv"):
        rgb = tuple(int(MEMORY_COLOURS[name][i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in colours, f"no {name} pixels in the PNG"


def _font(bold: bool, size: float) -> ImageFont.FreeTypeFont:
    path = FONTS / ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")
    if not path.exists():
        pytest.skip(f"{path} missing (Debian fonts-dejavu-core): cannot measure labels")
    return ImageFont.truetype(str(path), size=size)


def _labels_stay_in_their_boxes(svg: str) -> int:
    """Every label lies inside its group's frame (real glyph widths); returns labels seen."""
    root = ET.fromstring(svg)
    parents = {child: parent for parent in root.iter() for child in parent}
    checked = 0
    for text in root.iter(f"{{{SVG_NS}}}text"):
        group = parents[text]
        frame = next((r for r in group.findall("svg:rect", NS) if r.get("class") == "frame"), None)
        while frame is None and group in parents:
            group = parents[group]
            frame = next(
                (r for r in group.findall("svg:rect", NS) if r.get("class") == "frame"), None
            )
        size = float(text.get("font-size", 12))
        width = _font(text.get("font-weight") == "bold", size).getlength(text.text or "")
        x = float(text.get("x", 0))
        left = x - width / 2 if text.get("text-anchor") == "middle" else x
        if frame is None:  # title and legend: inside the canvas
            lo, hi = 0.0, float(root.get("width", 0))
        else:
            lo = float(frame.get("x", 0))
            hi = lo + float(frame.get("width", 0))
        assert lo <= left and left + width <= hi, (text.text, left, left + width, lo, hi)
        checked += 1
    return checked


def test_prod_labels_fit(prod: tuple[StackPlan, str]) -> None:
    assert _labels_stay_in_their_boxes(prod[1]) > 40


def test_a_context_that_does_not_fit_is_drawn_in_red(tmp_path: Path) -> None:
    text = stack_path("staging").read_text(encoding="utf-8")
    path = tmp_path / "Pulumi.staging.yaml"
    text = text.replace("max_model_len: 8192", "max_model_len: 32768")
    # A model the catalogue lacks, to draw the card without a bar.
    text = text.replace("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "example-org/private-70b")
    path.write_text(text, "utf-8")
    plan = _plan(path)
    svg = diagram_svg(plan)
    root = ET.fromstring(svg)
    lines = [e for e in root.iter(f"{{{SVG_NS}}}line") if e.get("class") == "kv-needed"]
    assert len(lines) == 1
    engine = next(e for e in root.iter() if e.get("id") == "engine-llama-8b")
    largest = plan.models["llama-8b"].capacity.largest_max_model_len  # type: ignore[union-attr]
    assert "vLLM refuses to start" in _texts(engine)
    assert f"largest max_model_len that fits: {largest:,}" in _texts(engine)
    # A model the catalogue lacks: a card without a bar, saying why.
    other = next(e for e in root.iter() if e.get("id") == "engine-llama-70b-fp8")
    assert "GPU memory not estimated" in _texts(other)
    assert _labels_stay_in_their_boxes(svg) > 20


def test_cli_writes_the_diagram(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "dev.svg"
    args = ["plan", "--stack", "dev", "--project-dir", str(ROOT), "--diagram"]
    assert main([*args, str(out)]) == 0
    assert ET.parse(out).getroot().tag == f"{{{SVG_NS}}}svg"
    capsys.readouterr()
    assert main([*args, str(tmp_path / "missing" / "dev.svg")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpustrata: --diagram {tmp_path / 'missing' / 'dev.svg'}: cannot write")
