"""The one reader of the catalogue's packaged data files (gpustrata.catalog.packaged)."""

from __future__ import annotations

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
