"""The one reader of the catalogue's packaged data files (gpustrata.catalog.packaged)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpustrata.catalog import packaged
from gpustrata.catalog.packaged import CatalogError, packaged_document, packaged_text


def test_a_packaged_file_is_read_and_parsed() -> None:
    doc = packaged_document("data/gpus.yaml")
    assert isinstance(doc, dict) and doc["gpus"]
    assert packaged_text("data/gpus.yaml").count("\n") > 10


def test_a_missing_file_is_a_catalogue_error_naming_it() -> None:
    with pytest.raises(CatalogError, match=r"^data/nope\.yaml: cannot be read: "):
        packaged_document("data/nope.yaml")


def test_bad_yaml_is_a_catalogue_error_naming_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(packaged, "packaged_text", lambda path: "a: [unclosed\n")
    with pytest.raises(CatalogError, match=r"^data/x\.yaml: not valid YAML: "):
        packaged_document("data/x.yaml")


def test_a_cited_table_reads_its_rows_and_source() -> None:
    table = packaged.cited_table("data/eks-ami-drivers.yaml", "fallback")
    assert table.source.startswith("awslabs/amazon-eks-ami@") and table.source != "fallback"
    assert table.releases and all(k.startswith("v") for k in table.releases)
    assert table.document["releases"] is table.releases
    # A document that is not a table: no rows, the stated fallback as its source.
    other = packaged.cited_table("data/gpus.yaml", "the fallback")
    assert (dict(other.releases), other.source) == ({}, "the fallback")


def test_a_packaged_model_names_the_file_key_and_value(monkeypatch: pytest.MonkeyPatch) -> None:
    """The DRA driver releases are validated as a pydantic model: an entry missing a key or
    with a key of the wrong kind is a CatalogError naming the file, the key and the value."""
    from gpustrata.catalog import dra

    good = packaged_document("data/dra-driver.yaml")
    assert [r.version for r in dra.dra_driver_releases()] == sorted(
        (str(e["version"]) for e in good["dra_driver_releases"]),
        key=lambda v: tuple(int(p) for p in v.split(".")),
        reverse=True,
    )
    entry = dict(good["dra_driver_releases"][0], sources="not-a-list")
    del entry["chart"]
    monkeypatch.setattr(packaged, "packaged_text", lambda path: "")
    monkeypatch.setattr(
        packaged, "packaged_document", lambda path: {"dra_driver_releases": [entry]}
    )
    dra.dra_driver_releases.cache_clear()
    try:
        with pytest.raises(CatalogError) as info:
            dra.dra_driver_releases()
    finally:
        dra.dra_driver_releases.cache_clear()
    message = str(info.value)
    assert message.startswith("data/dra-driver.yaml: invalid: ")
    assert "dra_driver_releases.0.chart" in message and "Field required" in message
    assert "dra_driver_releases.0.sources" in message and "not-a-list" in message


def test_a_per_release_table_gives_each_release_its_row_oldest_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Rows list several releases each; the result orders them as versions (0.10.0 after
    0.9.1), not as text, and each record is built from its own row."""
    text = "releases:\n- {tool: [0.10.0, v0.9.1], image: b}\n- {tool: [0.2.0], image: a}\n"
    monkeypatch.setattr(packaged, "packaged_text", lambda path: text)
    table = packaged.per_release(
        "data/per-release-test.yaml", "tool", lambda row, release: f"{release}:{row['image']}"
    )
    assert list(table.items()) == [
        ("0.2.0", "0.2.0:a"),
        ("v0.9.1", "v0.9.1:b"),
        ("0.10.0", "0.10.0:b"),
    ]


def test_catalogue_yaml_errors_name_the_file_in_each_catalogues_error(tmp_path: Path) -> None:
    """A user's model catalogue and the compatibility documents are parsed by the one reader
    (packaged.catalog_yaml), each raising its own catalogue's error."""
    from gpustrata.catalog.architectures import ModelCatalogError, load_model_catalog_file
    from gpustrata.catalog.compat import CompatCatalogError, catalog_from_documents

    bad = tmp_path / "models.yaml"
    bad.write_text("models: [unclosed\n", encoding="utf-8")
    with pytest.raises(ModelCatalogError, match=rf"^{re.escape(str(bad))}: not valid YAML: "):
        load_model_catalog_file(bad)
    with pytest.raises(CompatCatalogError, match=r"^compat-x\.yaml: not valid YAML: "):
        catalog_from_documents([("compat-x.yaml", "a: [unclosed\n")])
