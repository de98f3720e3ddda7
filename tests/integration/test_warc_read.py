"""read_warc through Ray: every shared sample file at once, and the HTML + images path end to end."""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from raypress.artifacts import DatasetArtifact
from raypress.operators.base import RunContext
from raypress.operators.curation.attach_images import AttachImages
from raypress.operators.shared.documents import table_to_documents
from raypress.operators.curation.html_to_interleaved import HtmlToInterleaved
from raypress.operators.io.read_warc import ReadWarc
from raypress.schema import NODE_COL, REASON_COL, TOMBSTONE_COLS

pytestmark = pytest.mark.integration


def read(tmp_path: Path, **params) -> list[dict]:
    op = ReadWarc(ReadWarc.Params(**params))
    return op.read(RunContext(run_dir=str(tmp_path / "run"), node_id="warc")).take_all()


def test_every_shared_warc_is_read_in_parallel(shared_data, tmp_path, monkeypatch):
    monkeypatch.chdir(shared_data)
    rows = read(tmp_path, paths=["warc/**/*.warc", "warc/**/*.warc.gz", "warc/**/*.arc.gz"])
    live = [r for r in rows if r[NODE_COL] is None]
    assert len(live) == 51  # 16 + 29 CC/ClueWeb pages, 6 single pages (ARC and two bad files included)
    assert Counter(r[REASON_COL] for r in rows if r[NODE_COL] is not None) == {
        "not_html": 3, "truncated_record": 1, "malformed_record": 1}
    assert len({r["id"] for r in rows}) == len(rows)
    assert "warc/warcio/example.warc.gz@784" in {r["id"] for r in live}  # relative pattern, relative id


def png(size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (10, 120, 200)).save(buf, "PNG")
    return buf.getvalue()


def test_html_and_images_of_one_warc_make_documents(tmp_path):
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=True)
    html = (b'<html><body><nav>menu</nav><p>Intro text.</p><img src="img/a.png"><p>More.</p>'
            b'<img src="/missing.png"><img src="img/b.png"></body></html>')
    for url, body, ctype in [("https://t.test/doc/page.html", html, "text/html; charset=utf-8"),
                             ("https://t.test/doc/img/a.png", png((300, 200)), "image/png"),
                             ("https://t.test/doc/img/b.png", png((200, 200)), "image/png")]:
        http = StatusAndHeaders("200 OK", [("Content-Type", ctype)], protocol="HTTP/1.1")
        writer.write_record(writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http))
    warc = tmp_path / "site.warc.gz"
    warc.write_bytes(out.getvalue())

    images = [r for r in read(tmp_path, paths=[str(warc)], content="images") if r[NODE_COL] is None]
    assert sorted(r["url"] for r in images) == ["https://t.test/doc/img/a.png", "https://t.test/doc/img/b.png"]
    (tmp_path / "images").mkdir()
    pq.write_table(pa.Table.from_pylist([{k: r[k] for k in ("id", "url", "image_bytes")} for r in images]),
                   tmp_path / "images" / "part-0.parquet")

    pages = [r for r in read(tmp_path, paths=[str(warc)]) if r[NODE_COL] is None]
    table = pa.Table.from_pylist([{k: v for k, v in r.items() if k not in TOMBSTONE_COLS} for r in pages])
    docs = HtmlToInterleaved(HtmlToInterleaved.Params()).process_batch(table)
    attach = AttachImages(AttachImages.Params(), {"images": DatasetArtifact(ds=None, path=str(tmp_path / "images"))})
    result = attach.process_batch(docs)
    (doc,) = table_to_documents(result)
    assert doc.texts == ["Intro text.", None, "More.", None]
    assert doc.images == [None, "https://t.test/doc/img/a.png", None, "https://t.test/doc/img/b.png"]
    assert [m["width"] for m in doc.image_metadata if m] == [300, 200]
    assert result.column("images_unresolved").to_pylist() == [1]
