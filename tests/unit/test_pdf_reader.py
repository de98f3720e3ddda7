"""read_pdf's per-file function on PDFs built with PyMuPDF: live rows, MINT-1T's limits, bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pymupdf")

from pydantic import ValidationError  # noqa: E402

import raypress.operators.io.read_pdf as pdf_io  # noqa: E402
from raypress.operators.io.read_pdf import MAX_FILE_BYTES, MAX_PAGES, ReadPdf, read_pdf_file  # noqa: E402
from raypress.operators.registry import get_op  # noqa: E402
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL  # noqa: E402
import pdf_fixtures as fx  # noqa: E402  (tests/ is on sys.path: its conftest.py puts it there)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return fx.build_pdf_corpus(tmp_path_factory.mktemp("pdfs"))


def read_one(path: Path, **limits) -> dict:
    tables = list(read_pdf_file(f"docs/{path.name}", str(path), node="pdfs", **limits))
    assert len(tables) == 1 and tables[0].num_rows == 1
    return tables[0].to_pylist()[0]


def test_registered_with_mint1t_defaults():
    assert get_op("read_pdf") is ReadPdf
    params = ReadPdf.Params(paths="x/*.pdf")
    assert params.paths == ["x/*.pdf"]
    assert params.max_pages == MAX_PAGES == 50
    assert params.max_file_bytes == MAX_FILE_BYTES == 50 * 1024 * 1024
    with pytest.raises(ValidationError):
        ReadPdf.Params(paths="x", max_page=3)
    with pytest.raises(ValidationError):
        ReadPdf.Params(paths="x", max_pages=0)


def test_live_row_holds_the_file(corpus):
    path = corpus["two_column"]
    row = read_one(path)
    assert row["id"] == row["path"] == "docs/two_column.pdf"  # the path as matched, not the absolute one
    assert row["pdf_bytes"] == path.read_bytes()
    assert row["n_pages"] == 2
    assert row["file_bytes"] == path.stat().st_size
    assert row[NODE_COL] is None and row[KIND_COL] is None


def test_sixty_pages_filtered_with_reason(corpus):
    row = read_one(corpus["long_60_pages"])
    assert (row[NODE_COL], row[KIND_COL], row[REASON_COL]) == ("pdfs", "filtered", "too_many_pages")
    assert json.loads(row[DETAIL_COL]) == {"n_pages": 60, "max_pages": 50}
    assert row["n_pages"] == 60 and row["pdf_bytes"] is None


@pytest.mark.parametrize("max_pages, kept", [(59, False), (60, True), (61, True)])
def test_page_limit_boundary(corpus, max_pages, kept):
    row = read_one(corpus["long_60_pages"], max_pages=max_pages)
    assert (row[REASON_COL] is None) is kept
    assert row["n_pages"] == 60


@pytest.mark.parametrize("delta, kept", [(-1, False), (0, True), (1, True)])
def test_size_limit_boundary(corpus, delta, kept):
    path = corpus["textless_page"]
    size = path.stat().st_size
    row = read_one(path, max_file_bytes=size + delta)
    assert (row[REASON_COL] is None) is kept
    assert row["file_bytes"] == size
    if not kept:
        assert row[KIND_COL] == "filtered" and row[REASON_COL] == "file_too_large"
        assert json.loads(row[DETAIL_COL]) == {"file_bytes": size, "max_file_bytes": size - 1}


def test_too_large_file_is_never_read(corpus, monkeypatch):
    def no_open(*args, **kwargs):
        raise AssertionError("a file over the size limit was opened")

    monkeypatch.setattr(pdf_io, "open", no_open, raising=False)
    row = read_one(corpus["two_column"], max_file_bytes=1000)
    assert row[REASON_COL] == "file_too_large"


def test_corrupt_file_is_an_error_tombstone(corpus):
    row = read_one(corpus["corrupt"])
    assert (row[KIND_COL], row[REASON_COL]) == ("error", "corrupt_pdf")
    assert "FileDataError" in row[DETAIL_COL] and "Failed to open" in row[DETAIL_COL]
    assert row["pdf_bytes"] is None and row["file_bytes"] == corpus["corrupt"].stat().st_size


def test_empty_file(tmp_path):
    path = tmp_path / "empty.pdf"
    path.write_bytes(b"")
    row = read_one(path)
    assert (row[KIND_COL], row[REASON_COL], row["file_bytes"]) == ("error", "empty_file", 0)


def test_encrypted_file(tmp_path):
    row = read_one(fx.build_encrypted_pdf(tmp_path / "secret.pdf"))
    assert (row[KIND_COL], row[REASON_COL]) == ("error", "encrypted_pdf")
    assert "password" in row[DETAIL_COL]


def test_not_a_pdf(tmp_path):
    path = tmp_path / "notes.pdf"
    path.write_text("just some words, no PDF at all\n")
    row = read_one(path)
    assert (row[KIND_COL], row[REASON_COL]) == ("error", "not_a_pdf")


def test_vanished_file(tmp_path):
    row = read_one(tmp_path / "gone.pdf")
    assert (row[KIND_COL], row[REASON_COL]) == ("error", "unreadable_file")
    assert "FileNotFoundError" in row[DETAIL_COL]


def test_truncated_file_is_repaired_and_kept(corpus, tmp_path):
    path = fx.build_truncated_pdf(tmp_path / "cut.pdf", corpus["two_column"], keep=0.5)
    row = read_one(path)
    assert row[REASON_COL] is None
    assert row["n_pages"] >= 1 and len(row["pdf_bytes"]) == path.stat().st_size


def test_live_and_dead_rows_share_one_schema(corpus):
    tables = [t for p in corpus.values() for t in read_pdf_file(p.name, str(p), node="pdfs")]
    merged = pa.concat_tables(tables)  # raises if the blocks disagree
    assert merged.num_rows == 4
    assert merged.schema.field("pdf_bytes").type == pa.large_binary()
    assert sorted(r or "live" for r in merged.column(REASON_COL).to_pylist()) == [
        "corrupt_pdf", "live", "live", "too_many_pages"]
