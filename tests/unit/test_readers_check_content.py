"""Readers decide by content, not by file name: a misnamed file is one quarantined row saying what it is.

An HTML error page saved as ``x.pdf`` is no one-page PDF, a gzipped text file named ``x.warc.gz``
is no fifty broken records, and a real file under the wrong compression suffix still reads.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import tarfile
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from raypress.operators.io.idx_images import read_idx
from raypress.operators.io.image_folder import read_image_files
from raypress.operators.io.read_arxiv import read_source
from raypress.operators.io.read_warc import read_warc_file
from raypress.operators.io.sniff.magic import describe, kind
from raypress.operators.shared.files import compression_of, open_maybe_compressed
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL

HTML_PAGE = (b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n"
             b"<body><h1>Not Found</h1><p>The requested URL was not found on this server.</p></body></html>\n")
# text whose lines have five space-separated fields: warcio takes each for an ARC record header
FIVE_FIELD_LINES = b"".join(b"the quick brown fox %d\n" % i for i in range(50))


def png(size=(4, 3), fmt="PNG") -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (200, 30, 30)).save(buf, fmt)
    return buf.getvalue()


def rows_of(tables) -> list[dict]:
    return [r for t in tables for r in t.to_pylist()]


def dead(rows: list[dict]) -> list[tuple[str, str]]:
    return [(r[KIND_COL], r[REASON_COL]) for r in rows if r[NODE_COL] is not None]


# ---- sniff ------------------------------------------------------------------------------------

KIND_CASES = [
    (HTML_PAGE, "HTML"),
    (b"  <!-- a comment -->\n<html lang=en>", "HTML"),
    (gzip.compress(b"x"), "gzip"),
    (b"PK\x03\x04\x14\x00", "zip"),
    (png(), "PNG"),
    (png(fmt="JPEG"), "JPEG"),
    (b"%PDF-1.7\n", "PDF"),
    (b"WARC/1.0\r\n", "WARC"),
    (b"hello, plain words\n", "text"),
    (b'{"a": 1}\n', "JSON or text"),
    (b"\xef\xbb\xbf<?xml version='1.0'?>", "XML"),
    (b"caf\xc3", "text"),  # a UTF-8 character cut by the end of the head is still text
]


@pytest.mark.parametrize("head, name", KIND_CASES, ids=[f"{i}-{n}" for i, (_, n) in enumerate(KIND_CASES)])
def test_kind_names_common_formats(head, name):
    assert kind(head) == name


def test_describe_shows_the_start_and_the_guess():
    assert describe(HTML_PAGE) == "starts with '<!DOCTYPE html>' (HTML?)"
    assert describe(b"") == "is empty"
    assert describe(b"\x1f\x8b\x08\x00\x00") == r"starts with b'\x1f\x8b\x08\x00\x00' (gzip?)"
    assert describe(b"\x00\x01\x02\xfe\xff") == r"starts with b'\x00\x01\x02\xfe\xff' (binary data)"
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as t:
        info = tarfile.TarInfo("a.txt")
        t.addfile(info, io.BytesIO(b""))
    assert kind(tar.getvalue()) == "tar"


# ---- read_pdf ---------------------------------------------------------------------------------

def read_pdf(path: Path) -> list[dict]:
    pytest.importorskip("pymupdf")
    from raypress.operators.io.read_pdf import read_pdf_file

    return rows_of(read_pdf_file(f"docs/{path.name}", str(path), node="pdfs"))


def real_pdf(pages: int = 1) -> bytes:
    pymupdf = pytest.importorskip("pymupdf")
    doc = pymupdf.open()
    for i in range(pages):
        doc.new_page().insert_text((72, 72), f"page {i + 1}")
    return doc.tobytes()


def test_html_named_pdf_is_one_quarantined_row_not_a_one_page_pdf(tmp_path):
    path = tmp_path / "x.pdf"
    path.write_bytes(HTML_PAGE)
    (row,) = read_pdf(path)  # before: a live row with n_pages 1 (MuPDF opened the HTML)
    assert (row[NODE_COL], row[KIND_COL], row[REASON_COL]) == ("pdfs", "error", "not_a_pdf")
    assert row[DETAIL_COL] == "docs/x.pdf: not a PDF: starts with '<!DOCTYPE html>' (HTML?)"
    assert row["pdf_bytes"] is None and row["n_pages"] is None and row["file_bytes"] == len(HTML_PAGE)


@pytest.mark.parametrize("data, looks", [(png(), "PNG"), (gzip.compress(b"%PDF-1.4 gzipped"), "gzip"),
                                         (b"plain words\n", "text")], ids=["png", "gzip", "text"])
def test_other_formats_named_pdf_say_what_they_are(tmp_path, data, looks):
    path = tmp_path / "y.pdf"
    path.write_bytes(data)
    (row,) = read_pdf(path)
    assert (row[KIND_COL], row[REASON_COL]) == ("error", "not_a_pdf")
    assert f"({looks}?)" in row[DETAIL_COL] and "docs/y.pdf" in row[DETAIL_COL]


def test_pdf_magic_after_leading_junk_is_still_a_pdf(tmp_path):
    path = tmp_path / "junk.pdf"
    path.write_bytes(b"\r\n" * 100 + real_pdf(2))  # %PDF- at byte 200: PDF readers accept this
    (row,) = read_pdf(path)
    assert row[NODE_COL] is None and row["n_pages"] == 2
    path.write_bytes(b" " * 1100 + real_pdf(2))  # beyond the first 1024 bytes: not a PDF
    (row,) = read_pdf(path)
    assert row[REASON_COL] == "not_a_pdf"


def test_a_document_mupdf_opened_as_another_format_is_not_a_pdf(tmp_path, monkeypatch):
    """MuPDF recognises content before it heeds filetype='pdf'; the opened document's is_pdf decides."""
    pymupdf = pytest.importorskip("pymupdf")
    path = tmp_path / "odd.pdf"
    path.write_bytes(real_pdf(1))
    real_open = pymupdf.open

    def open_as_html(*args, **kwargs):
        doc = real_open(stream=HTML_PAGE, filetype="html")
        assert not doc.is_pdf
        return doc

    monkeypatch.setattr(pymupdf, "open", open_as_html)
    (row,) = read_pdf(path)
    assert (row[KIND_COL], row[REASON_COL]) == ("error", "not_a_pdf")
    assert row[DETAIL_COL] == "docs/odd.pdf: not a PDF: MuPDF opened it as HTML5"


# ---- read_warc --------------------------------------------------------------------------------

def build_warc(n: int = 3, gz: bool = True) -> bytes:
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=gz)
    for i in range(1, n + 1):
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html; charset=utf-8")], protocol="HTTP/1.1")
        body = f"<html><body><p>page {i}</p></body></html>".encode()
        writer.write_record(writer.create_warc_record(f"http://a.test/{i}", "response", payload=io.BytesIO(body),
                                                      http_headers=http))
    return out.getvalue()


def read_warc(path: Path) -> list[dict]:
    return rows_of(read_warc_file(f"crawl/{path.name}", str(path), "warc"))


def test_gzipped_text_named_warc_gz_is_one_row_not_one_per_line(tmp_path):
    path = tmp_path / "x.warc.gz"
    path.write_bytes(gzip.compress(FIVE_FIELD_LINES, mtime=0))
    rows = read_warc(path)  # before: 21 rows (18 malformed_record, 2 not_html, 1 truncated_record)
    assert dead(rows) == [("error", "not_a_warc")]
    (row,) = rows
    assert row["id"] == "crawl/x.warc.gz@0"
    assert row[DETAIL_COL] == ("crawl/x.warc.gz: not a WARC file: once decompressed, it starts with "
                               "'the quick brown fox 0' (text?)")


def test_plain_text_named_warc_is_one_row(tmp_path):
    path = tmp_path / "notes.warc"
    path.write_bytes(b"a b c d e\n" * 50)
    rows = read_warc(path)  # before: 25 malformed_record rows
    assert dead(rows) == [("error", "not_a_warc")]
    assert rows[0][DETAIL_COL] == "crawl/notes.warc: not a WARC file: it starts with 'a b c d e' (text?)"


def test_html_page_named_warc_gz_says_html(tmp_path):
    path = tmp_path / "page.warc.gz"
    path.write_bytes(HTML_PAGE)  # not even gzip
    (row,) = read_warc(path)
    assert row[REASON_COL] == "not_a_warc" and "(HTML?)" in row[DETAIL_COL]


def test_unsupported_warc_version_is_one_row(tmp_path):
    path = tmp_path / "future.warc"
    path.write_bytes(build_warc(gz=False).replace(b"WARC/1.0\r\n", b"WARC/2.0\r\n"))
    (row,) = read_warc(path)
    assert row[REASON_COL] == "not_a_warc" and "unsupported version WARC/2.0" in row[DETAIL_COL]


@pytest.mark.parametrize("gz, name", [(False, "plain.warc.gz"), (True, "gzipped.warc"), (True, "noext")])
def test_compression_is_read_from_the_content_not_the_suffix(tmp_path, gz, name):
    path = tmp_path / name
    path.write_bytes(build_warc(gz=gz))
    rows = read_warc(path)
    assert [r["url"] for r in rows if r[NODE_COL] is None] == [f"http://a.test/{i}" for i in (1, 2, 3)]
    assert dead(rows) == []


def test_blank_lines_before_the_first_record_and_arc_without_filedesc_are_accepted(tmp_path):
    path = tmp_path / "lead.warc"
    path.write_bytes(b"\r\n\r\n" + build_warc(gz=False))
    rows = read_warc(path)  # before: no rows and no error (warcio took the blank line for the end)
    assert [r["id"] for r in rows if r[NODE_COL] is None][0] == "crawl/lead.warc@4"
    assert len(rows) == 3 and dead(rows) == []
    body = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<html><body>arc page</body></html>"
    arc = b"http://a.test/arc 127.0.0.1 20140216050221 text/html %d\n" % len(body) + body + b"\n"
    path = tmp_path / "old.arc"
    path.write_bytes(arc)
    rows = read_warc(path)
    assert "not_a_warc" not in {r[REASON_COL] for r in rows}
    assert [r["url"] for r in rows if r[NODE_COL] is None] == ["http://a.test/arc"]


def test_empty_file_is_still_no_rows(tmp_path):
    path = tmp_path / "empty.warc.gz"
    path.write_bytes(b"")
    assert read_warc(path) == []


def test_garbage_inside_a_real_warc_still_resynchronises(tmp_path):
    data = build_warc(gz=False)
    second = data.index(b"WARC/1.0", 10)
    path = tmp_path / "spliced.warc"
    path.write_bytes(data[:second] + FIVE_FIELD_LINES + data[second:])
    rows = read_warc(path)  # before: 20 tombstones, the lines read as ARC records (18 malformed, 2 not_html)
    assert [r["url"] for r in rows if r[NODE_COL] is None] == [f"http://a.test/{i}" for i in (1, 2, 3)]
    assert Counter(r for _, r in dead(rows)) == {"malformed_record": 1}
    (bad,) = [r for r in rows if r[NODE_COL] is not None]
    assert bad["id"] == f"crawl/spliced.warc@{second}"  # where the garbage starts
    assert "Invalid WARC record, first line: the quick brown fox 0" in bad[DETAIL_COL]
    assert rows[2]["id"] == f"crawl/spliced.warc@{second + len(FIVE_FIELD_LINES)}"  # record 2 keeps its offset


def test_every_shared_sample_warc_passes_the_check(shared_data):
    files = sorted(p for p in (shared_data / "warc").rglob("*") if p.suffix in (".warc", ".gz"))
    assert files
    for path in files:
        assert "not_a_warc" not in {r[REASON_COL] for r in read_warc(path)}, path


# ---- compressed files (_files) and idx_images ------------------------------------------------

def test_open_maybe_compressed_goes_by_magic(tmp_path):
    data = b"line one\nline two\n"
    cases = {"a.gz": gzip.compress(data), "b.bz2": bz2.compress(data), "c.xz": lzma.compress(data),
             "plain.gz": data, "plain.bz2": data, "gz.txt": gzip.compress(data), "BZh.txt": b"BZh9 is text\n"}
    expected = {"a.gz": "gz", "b.bz2": "bz2", "c.xz": "xz", "gz.txt": "gz"}
    for name, raw in cases.items():
        (tmp_path / name).write_bytes(raw)
        assert compression_of(str(tmp_path / name)) == expected.get(name), name
        with open_maybe_compressed(str(tmp_path / name)) as f:
            assert f.read() == (b"BZh9 is text\n" if name == "BZh.txt" else data), name
    assert compression_of(str(tmp_path / "missing")) is None


def write_idx_pair(tmp_path: Path, n: int = 5, compress_as: tuple[bool, bool] = (False, False),
                   names: tuple[str, str] = ("images-idx", "labels-idx")) -> tuple[str, str, np.ndarray]:
    images = np.arange(n * 28 * 28, dtype=np.uint64).reshape(n, 28, 28).astype(np.uint8)
    labels = np.arange(n, dtype=np.uint8) % 10
    img = np.array([0x803, n, 28, 28], ">u4").tobytes() + images.tobytes()
    lab = np.array([0x801, n], ">u4").tobytes() + labels.tobytes()
    paths = []
    for raw, gz, name in ((img, compress_as[0], names[0]), (lab, compress_as[1], names[1])):
        (tmp_path / name).write_bytes(gzip.compress(raw) if gz else raw)
        paths.append(str(tmp_path / name))
    return paths[0], paths[1], images


def test_idx_named_gz_but_uncompressed_and_gzipped_without_suffix_both_read(tmp_path):
    # before: "Not a gzipped file" for the first pair, a bad magic 0x1f8b0800 for the second
    img, lab, images = write_idx_pair(tmp_path, names=("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"))
    got, labels = read_idx(img, lab)
    assert np.array_equal(got, images) and labels.tolist() == [0, 1, 2, 3, 4]
    img, lab, images = write_idx_pair(tmp_path, compress_as=(True, True), names=("imgs", "labs"))
    got, _ = read_idx(img, lab, offset=2, limit=2)
    assert np.array_equal(got, images[2:4])


def test_html_instead_of_idx_says_so(tmp_path):
    img, lab, _ = write_idx_pair(tmp_path)
    Path(img).write_bytes(HTML_PAGE)
    with pytest.raises(ValueError, match=r"images-idx: bad magic number 0x3c21444f.*starts with '<!DOCTYPE html>' "
                                         r"\(HTML\?\)"):
        read_idx(img, lab)


# ---- image_folder -----------------------------------------------------------------------------

def test_image_folder_decodes_by_content_and_names_what_a_non_image_is(tmp_path):
    (tmp_path / "jpeg.png").write_bytes(png(fmt="JPEG"))  # a JPEG under a .png name: still an image
    (tmp_path / "page.png").write_bytes(HTML_PAGE)
    files = [{"path": f"cls/{n}", "abs_path": str(tmp_path / n), "label": 0, "class_name": "cls"}
             for n in ("jpeg.png", "page.png")]
    rows = rows_of(read_image_files(files, node="imgs"))
    live = [r for r in rows if r[NODE_COL] is None]
    assert [r["id"] for r in live] == ["cls/jpeg.png"]
    assert Image.open(io.BytesIO(live[0]["image"])).format == "PNG"
    (bad,) = [r for r in rows if r[NODE_COL] is not None]
    assert (bad["id"], bad[REASON_COL]) == ("cls/page.png", "unreadable_image")
    assert bad[DETAIL_COL].startswith("cls/page.png: cannot read image (UnidentifiedImageError")
    assert bad[DETAIL_COL].endswith("; the file starts with '<!DOCTYPE html>' (HTML?)")


# ---- read_arxiv -------------------------------------------------------------------------------

def read_arxiv(path: Path) -> dict:
    (row,) = rows_of(read_source(path.name, str(path), node="arxiv"))
    return row


def test_arxiv_html_named_tarball_says_html(tmp_path):
    path = tmp_path / "2401.00001v1.tar.gz"
    path.write_bytes(HTML_PAGE)
    row = read_arxiv(path)
    assert row[REASON_COL] == "unreadable_archive"
    assert row[DETAIL_COL] == "2401.00001v1.tar.gz is not a tar archive: it starts with '<!DOCTYPE html>' (HTML?)"


def test_arxiv_pdf_eprint_is_not_taken_for_latex(tmp_path):
    path = tmp_path / "2401.00002"  # arXiv serves the PDF when a paper has no source
    path.write_bytes(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\n")
    row = read_arxiv(path)
    assert row[REASON_COL] == "no_main_file"
    assert row[DETAIL_COL] == "2401.00002 is a single file that is not LaTeX: it starts with '%PDF-1.5' (PDF?)"


def test_arxiv_plain_tar_named_tar_gz_and_gzipped_tex_without_suffix_read(tmp_path):
    tex = b"\\documentclass{article}\n\\begin{document}\nHello.\n\\end{document}\n"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("main.tex")
        info.size = len(tex)
        t.addfile(info, io.BytesIO(tex))
    (tmp_path / "2401.00003.tar.gz").write_bytes(buf.getvalue())  # a plain tar under a .tar.gz name
    row = read_arxiv(tmp_path / "2401.00003.tar.gz")
    assert row[NODE_COL] is None and row["main_file"] == "main.tex" and "Hello." in row["tex"]
    (tmp_path / "2401.00004").write_bytes(gzip.compress(tex.replace(b"Hello", b"Latin-1 caf\xe9")))
    row = read_arxiv(tmp_path / "2401.00004")
    assert row[NODE_COL] is None and "café" in row["tex"]
