"""write_webdataset: one JSON per document plus its images, readable by a plain tar reader."""

from __future__ import annotations

import json
import tarfile

import pytest

from raypress.operators.shared.documents import Document, documents_to_table
from raypress.operators.io.write_webdataset import WriteWebDataset, document_sample, sample_key


def _write(tmp_path, docs):
    op = WriteWebDataset(WriteWebDataset.Params(path=str(tmp_path)))
    op.write_batch(documents_to_table(docs), str(tmp_path), "0000")
    return tarfile.open(tmp_path / "part-0000.tar")


def test_document_and_images_share_one_key(tmp_path):
    doc = Document("pages/a.warc.gz@120", "https://example.org/a", "html")
    doc.add_text("A caption.")
    doc.add_image("https://example.org/a.png", b"PNGDATA", {"format": "png", "height": 200, "width": 300})
    doc.add_image("https://example.org/b.jpg", b"JPEGDATA", {"format": "jpeg"})
    with _write(tmp_path, [doc]) as tar:
        names = sorted(m.name for m in tar.getmembers())
        key = sample_key(doc.id)
        assert names == sorted([f"{key}.json", f"{key}.image1.png", f"{key}.image2.jpg"])
        meta = json.loads(tar.extractfile(f"{key}.json").read())
        assert tar.extractfile(f"{key}.image2.jpg").read() == b"JPEGDATA"
        assert {m.mtime for m in tar.getmembers()} == {0}
    assert meta["id"] == doc.id
    assert meta["texts"] == ["A caption.", None, None]
    assert meta["images"] == [None, "https://example.org/a.png", "https://example.org/b.jpg"]
    assert meta["image_members"] == [None, f"{key}.image1.png", f"{key}.image2.jpg"]
    assert meta["image_metadata"][1]["width"] == 300


def test_image_without_bytes_has_no_member(tmp_path):
    doc = Document("d1", None, "pdf")
    doc.add_image("page_0_image_7", None, None)
    doc.add_text("text")
    with _write(tmp_path, [doc]) as tar:
        assert [m.name for m in tar.getmembers()] == [f"{sample_key('d1')}.json"]
        meta = json.loads(tar.extractfile(tar.getmembers()[0]).read())
    assert meta["image_members"] == [None, None]


def test_keys_differ_for_ids_with_dots_and_slashes(tmp_path):
    ids = ["a/b.c@1", "a/b.c@2", "a.b/c@1"]
    keys = {sample_key(i) for i in ids}
    assert len(keys) == 3 and all("." not in k and "/" not in k for k in keys)


def test_shards_are_the_bytes_webdatasets_own_writer_writes(tmp_path):
    """The standard-library tar equals ``webdataset.TarWriter``'s, byte for byte, and reads back
    as samples with webdataset's own reader."""
    wds = pytest.importorskip("webdataset")
    docs = []
    for i in range(3):
        doc = Document(f"pages/a.warc.gz@{i}", f"https://example.org/{i}", "html")
        doc.add_text(f"Caption {i}, non-ASCII: é ü 漢.")
        doc.add_image(f"https://example.org/{i}.png", bytes(range(256)) * (i + 1), {"format": "png"})
        docs.append(doc)
    op = WriteWebDataset(WriteWebDataset.Params(path=str(tmp_path)))
    op.write_batch(documents_to_table(docs), str(tmp_path), "ours")
    table = documents_to_table(docs)
    with open(tmp_path / "theirs.tar", "wb") as f:
        writer = wds.TarWriter(f, encoder=False, mtime=0.0, user="raypress", group="raypress")
        for row in table.to_pylist():
            writer.write(document_sample(row))
        writer.close()
    assert (tmp_path / "part-ours.tar").read_bytes() == (tmp_path / "theirs.tar").read_bytes()
    samples = list(wds.WebDataset(str(tmp_path / "part-ours.tar"), shardshuffle=False))
    assert [json.loads(s["json"])["id"] for s in samples] == [d.id for d in docs]
    assert samples[2]["image1.png"] == bytes(range(256)) * 3
