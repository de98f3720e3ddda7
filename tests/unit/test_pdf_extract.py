"""pdf_to_interleaved: the pure reading-order functions on hand-placed boxes, then the op on PDFs
built with PyMuPDF (two columns with images, a text-less page, bad bytes)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pymupdf")

import pdf_fixtures as fx  # noqa: E402  (tests/ is on sys.path: its conftest.py puts it there)
from raypress.dag.batch_exec import StreamingOpRunner  # noqa: E402
from raypress.operators.shared.documents import DOCUMENT_COLUMNS, TEXT_SEPARATOR  # noqa: E402
from raypress.operators.curation.pdf_to_interleaved import (  # noqa: E402
    ExtractOptions,
    PdfToInterleaved,
    block_text,
    find_gutters,
    merge_texts,
    nearest_block,
    pdf_to_document,
    reading_order,
    rect_distance,
)
from raypress.operators.registry import get_op  # noqa: E402
from raypress.schema import KIND_COL, NODE_COL, REASON_COL  # noqa: E402

W = 612.0
LEFT, RIGHT = (54.0, 297.0), (315.0, 558.0)


def col(side: tuple[float, float], y0: float, y1: float) -> tuple[float, float, float, float]:
    return (side[0], y0, side[1], y1)


def order_of(named: dict[str, tuple], width: float = W, **kw) -> list[str]:
    names = list(named)
    return [names[i] for i in reading_order([named[n] for n in names], width, **kw)]


# -- reading order on hand-placed boxes -----------------------------------------------------------


def test_one_column_is_top_to_bottom_and_a_centred_heading_is_no_column():
    boxes = {
        "p2": (72, 300, 540, 400),
        "heading": (250, 100, 360, 120),  # centred, narrow: must not become a column of its own
        "p1": (72, 140, 540, 280),
        "short": (72, 420, 150, 432),
    }
    assert find_gutters(list(boxes.values()), W) == []
    assert order_of(boxes) == ["heading", "p1", "p2", "short"]


def test_two_columns_title_first_then_left_then_right():
    boxes = {
        "R2": col(RIGHT, 300, 500), "L1": col(LEFT, 150, 290), "title": (54, 60, 558, 90),
        "R1": col(RIGHT, 150, 290), "L2": col(LEFT, 300, 520),
    }
    assert find_gutters(list(boxes.values()), W) == [(297.0, 315.0)]
    assert order_of(boxes) == ["title", "L1", "L2", "R1", "R2"]


def test_narrow_centred_title_across_the_gutter_does_not_merge_the_columns():
    boxes = {"L1": col(LEFT, 150, 400), "R1": col(RIGHT, 150, 400), "title": (200, 60, 420, 90),
             "L2": col(LEFT, 410, 700), "R2": col(RIGHT, 410, 700)}
    assert order_of(boxes) == ["title", "L1", "L2", "R1", "R2"]


def test_full_width_block_mid_page_cuts_the_columns_into_bands():
    boxes = {"L1": col(LEFT, 72, 300), "R1": col(RIGHT, 72, 300), "wide": (54, 320, 558, 380),
             "L2": col(LEFT, 400, 700), "R2": col(RIGHT, 400, 700)}
    assert order_of(boxes) == ["L1", "R1", "wide", "L2", "R2"]


def test_three_columns_left_to_right():
    boxes = {c + str(i): (x0, 100 + 200 * i, x0 + 160, 280 + 200 * i)
             for i in range(2) for c, x0 in (("c", 400.0), ("a", 40.0), ("b", 220.0))}
    assert order_of(boxes) == ["a0", "a1", "b0", "b1", "c0", "c1"]


def test_blocks_on_one_line_read_left_to_right():
    boxes = {"right": (300, 100.5, 400, 112), "left": (72, 101.5, 200, 112), "below": (72, 130, 400, 140)}
    assert order_of(boxes) == ["left", "right", "below"]


@pytest.mark.parametrize("gap, found", [(6.0, False), (6.2, True)])
def test_min_gutter_boundary(gap, found):
    # 1% of 612 pt = 6.12 pt
    boxes = [(54, 100, 300, 500), (300 + gap, 100, 558, 500)]
    assert bool(find_gutters(boxes, W, min_gutter=0.01)) is found


@pytest.mark.parametrize("spanning_height, found", [(100.0, True), (101.0, False)])
def test_gutter_coverage_boundary(spanning_height, found):
    # columns 100 high, a spanning block of h: the gutter's cover h vs 0.5 * (100 + h) on each side
    boxes = [col(LEFT, 200, 300), col(RIGHT, 200, 300), (54, 50, 558, 50 + spanning_height)]
    assert bool(find_gutters(boxes, W, max_coverage=0.5)) is found


def test_no_blocks_or_one_block():
    assert reading_order([], W) == []
    assert reading_order([(10, 10, 20, 20)], W) == [0]


def test_rect_distance_and_nearest_block():
    assert rect_distance((0, 0, 10, 10), (5, 5, 20, 20)) == 0
    assert rect_distance((0, 0, 10, 10), (13, 14, 20, 20)) == 5.0
    blocks = [(0, 0, 100, 10), (0, 50, 100, 60)]
    assert nearest_block((0, 20, 100, 30), blocks) == 0  # 10 from the first, 20 from the second
    assert nearest_block((0, 25, 100, 35), blocks) == 0  # equidistant: the earlier block wins
    assert nearest_block((0, 36, 100, 45), blocks) == 1


def test_block_text_joins_lines_and_dehyphenates():
    raw = "A  line   with\nexam-\nple words and a well-\nKnown name\n  \n"
    assert block_text(raw) == "A line with example words and a well- Known name"
    assert block_text(raw, dehyphenate=False) == "A line with exam- ple words and a well- Known name"
    assert block_text(raw, keep_line_breaks=True) == "A line with\nexample words and a well-\nKnown name"
    assert block_text(" \n\t\n") == ""


def test_merge_texts_keeps_images_between():
    image = object()
    assert merge_texts(["a", "b", image, image, "c"]) == ["a" + TEXT_SEPARATOR + "b", image, image, "c"]


# -- documents from built PDFs -------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return fx.build_pdf_corpus(tmp_path_factory.mktemp("pdfs"))


@pytest.fixture(scope="module")
def two_column(corpus):
    path = corpus["two_column"]
    return pdf_to_document("two_column", str(path), path.read_bytes())


def para(key: str) -> str:
    return " ".join(fx.PARAGRAPHS[key].split())


def test_two_column_reading_order(two_column):
    doc, textless = two_column
    assert textless == 0
    blocks = [b for t in doc.texts if t for b in t.split(TEXT_SEPARATOR)]
    assert blocks == [para(k) for k in fx.TWO_COLUMN_ORDER]


def test_two_column_images_follow_their_nearest_block(two_column):
    doc, _ = two_column
    kinds = ["T" if t is not None else "I" for t in doc.texts]
    assert kinds == ["T", "I", "T", "I", "T", "I", "T"]
    assert doc.texts[0].endswith(para("L1"))  # the PNG drawn under L1
    assert doc.texts[2].endswith(para("R2"))  # the JPEG drawn under R2
    assert doc.texts[4].endswith(para("R4"))  # page 1's PNG drawn under R4
    assert doc.texts[6].startswith(para("wide"))


def test_two_column_image_ids_and_metadata(two_column):
    doc, _ = two_column
    images = [(ref, data, meta) for ref, data, meta in zip(doc.images, doc.image_bytes, doc.image_metadata) if ref]
    assert [m["page"] for _, _, m in images] == [0, 0, 1]
    assert [m["format"] for _, _, m in images] == ["png", "jpeg", "png"]
    for ref, data, meta in images:
        assert ref == f"page_{meta['page']}_image_{meta['xref']}"
        assert (meta["width"], meta["height"]) == fx.IMAGE_SIZE
        assert meta["sha256"] == hashlib.sha256(data).hexdigest()
    assert images[0][1].startswith(b"\x89PNG")
    assert images[1][1] == fx.raster(fmt="JPEG", seed=2)  # a JPEG is passed through byte for byte
    assert len({m["sha256"] for _, _, m in images}) == 3


def test_other_formats_are_reencoded_to_png(corpus):
    path = corpus["two_column"]
    doc, _ = pdf_to_document("d", "d", path.read_bytes(), ExtractOptions(keep_formats=("png",)))
    metas = [m for m in doc.image_metadata if m]
    assert [m["format"] for m in metas] == ["png", "png", "png"]
    jpeg_as_png = [b for b, m in zip(doc.image_bytes, doc.image_metadata) if m and m["page"] == 0][1]
    assert jpeg_as_png.startswith(b"\x89PNG")
    assert (metas[1]["width"], metas[1]["height"]) == fx.IMAGE_SIZE


def test_textless_page_dropped_and_counted(corpus):
    path = corpus["textless_page"]
    doc, textless = pdf_to_document("t", str(path), path.read_bytes())
    assert textless == 1
    assert [t for t in doc.texts if t] == [para("T1"), para("T2")]
    assert [m["page"] for m in doc.image_metadata if m] == [0]  # page 1's image left with its page
    assert doc.images[1].startswith("page_0_image_")


def test_pdf_without_any_text_is_an_empty_document(tmp_path):
    path = fx.build_all_textless_pdf(tmp_path / "scans.pdf", pages=3)
    doc, textless = pdf_to_document("s", str(path), path.read_bytes())
    assert textless == 3
    assert doc.texts == [] and doc.images == [] and doc.text() == ""


@pytest.mark.parametrize("data, message", [(b"", "empty"), (None, "empty"),
                                           (b"%PDF-1.7\n" + bytes(range(256)) * 8, "cannot open the PDF")])
def test_bad_bytes_raise_a_clear_error(data, message):
    with pytest.raises(ValueError, match=message):
        pdf_to_document("bad", "bad.pdf", data)


def test_encrypted_pdf_raises(tmp_path):
    path = fx.build_encrypted_pdf(tmp_path / "secret.pdf")
    with pytest.raises(ValueError, match="password"):
        pdf_to_document("s", str(path), path.read_bytes())


def test_truncated_pdf_gives_what_is_left(corpus, tmp_path):
    path = fx.build_truncated_pdf(tmp_path / "cut.pdf", corpus["two_column"], keep=0.5)
    doc, _ = pdf_to_document("c", str(path), path.read_bytes())
    assert doc.text()  # MuPDF repaired it: some text survives


# -- the op on Arrow batches ---------------------------------------------------------------------


def reader_rows(paths: dict[str, Path]) -> pa.Table:
    """What read_pdf's live rows look like."""
    return pa.table({
        "id": list(paths),
        "path": [str(p) for p in paths.values()],
        "pdf_bytes": pa.array([p.read_bytes() for p in paths.values()], pa.large_binary()),
        "n_pages": pa.array([2, 3], pa.int32()),
        "file_bytes": pa.array([p.stat().st_size for p in paths.values()], pa.int64()),
    })


def test_op_writes_documents_and_drops_the_bytes(corpus):
    assert get_op("pdf_to_interleaved") is PdfToInterleaved
    table = reader_rows({"a.pdf": corpus["two_column"], "b.pdf": corpus["textless_page"]})
    out = PdfToInterleaved(PdfToInterleaved.Params()).process_batch(table)
    assert out.column_names == [*DOCUMENT_COLUMNS, "pages_without_text", "path", "n_pages", "file_bytes"]
    rows = out.to_pylist()
    assert [r["id"] for r in rows] == ["a.pdf", "b.pdf"]
    assert [r["url"] for r in rows] == [str(corpus["two_column"]), str(corpus["textless_page"])]
    assert [r["source"] for r in rows] == ["pdf", "pdf"]
    assert [r["pages_without_text"] for r in rows] == [0, 1]
    assert out.schema.field("pages_without_text").type == pa.int32()
    assert [sum(1 for i in r["images"] if i) for r in rows] == [3, 1]
    assert rows[0]["image_metadata"][1]["width"] == 300 and rows[0]["image_metadata"][0] is None


def test_a_bad_row_is_quarantined_alone(corpus):
    table = reader_rows({"good.pdf": corpus["two_column"], "bad.pdf": corpus["corrupt"]})
    out = StreamingOpRunner(PdfToInterleaved, PdfToInterleaved.Params(), None, "extract")(table)
    rows = {r["id"]: r for r in out.to_pylist()}
    assert rows["good.pdf"][NODE_COL] is None and rows["good.pdf"]["source"] == "pdf"
    assert (rows["bad.pdf"][NODE_COL], rows["bad.pdf"][KIND_COL], rows["bad.pdf"][REASON_COL]) == (
        "extract", "error", "ValueError")
    assert "cannot open the PDF" in rows["bad.pdf"]["_rp_detail"]


def test_keep_formats_use_pymupdf_names():
    assert PdfToInterleaved.Params(keep_formats=["JPG", "Png"]).keep_formats == ["jpeg", "png"]
