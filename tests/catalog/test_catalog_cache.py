"""The prebuilt JSON cache of the catalogue's YAML files (gpustrata.catalog.packaged, issue 35)."""

from __future__ import annotations

import datetime
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from gpustrata.catalog import packaged
from gpustrata.catalog.packaged import CatalogError, cache_name, cache_text
from gpustrata.core.yamlio import safe_load


def same_data(a: Any, b: Any) -> bool:
    """Equal with equal types throughout (1, 1.0 and True differ) and keys in one order."""
    return repr(a) == repr(b)


ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "components/gpustrata/catalog/data"
sys.path.insert(0, str(ROOT / "tools"))
import regen  # noqa: E402

SOURCES = sorted(DATA.glob("*.yaml"))


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_each_cache_reads_as_its_yaml_does(source: Path) -> None:
    """What a catalogue reads from the cache is the YAML's document, type for type."""
    path = f"data/{source.name}"
    name = cache_name(path)
    assert name is not None and (DATA.parent / name).is_file(), "run tools/regen.py"
    text = source.read_text("utf-8")
    cached = packaged._cached_document(path, text)
    assert cached is not packaged._STALE, f"{name} is stale: run tools/regen.py"
    assert same_data(cached, safe_load(text))
    assert same_data(packaged.packaged_document(path), safe_load(text))


def test_the_cache_is_current_and_regen_check_fails_when_it_is_not(tmp_path: Path) -> None:
    assert regen.catalog_cache(check=True).stale == []
    data = tmp_path / "data"
    shutil.copytree(DATA, data, ignore=shutil.ignore_patterns("crds"))
    gpus = data / "gpus.yaml"
    gpus.write_text(gpus.read_text("utf-8") + "# edited\n", encoding="utf-8")
    (data / "cache" / "gone.json").write_text("{}\n", encoding="utf-8")
    stale = regen.catalog_cache(check=True, data=data).stale
    assert sorted(p.name for p in stale) == ["gone.json", "gpus.json"]
    regen.catalog_cache(check=False, data=data)
    assert regen.catalog_cache(check=True, data=data).stale == []
    assert not (data / "cache" / "gone.json").exists()


def test_an_edited_yaml_is_read_from_the_yaml_not_the_stale_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = (DATA / "gateway.yaml").read_text("utf-8")
    edited = text.replace("gateway_api:", "gateway_api:\n  edited: true", 1)
    assert edited != text
    monkeypatch.setattr(
        packaged,
        "packaged_text",
        lambda path: edited if "yaml" in path else (DATA.parent / path).read_text("utf-8"),
    )
    doc = packaged.packaged_document("data/gateway.yaml")
    assert doc["gateway_api"]["edited"] is True


def test_dates_keep_their_type_and_what_json_cannot_carry_is_refused() -> None:
    text = "a:\n  read_on: 2026-07-20\n  n: 1\n  f: 1.0\n  b: yes\n"
    out = cache_text("data/x.yaml", text)
    back = packaged._decode_cache(out)
    assert back["document"]["a"] == {
        "read_on": datetime.date(2026, 7, 20),
        "n": 1,
        "f": 1.0,
        "b": True,
    }
    assert same_data(back["document"], safe_load(text))
    with pytest.raises(CatalogError, match=r"^data/x\.yaml: cannot be cached as JSON: .*datetime"):
        cache_text("data/x.yaml", "t: 2026-07-20 10:00:00\n")
    with pytest.raises(CatalogError, match=r"^data/x\.yaml: its JSON cache does not read back"):
        cache_text("data/x.yaml", "1: one\n")  # a key JSON would turn into "1"
