"""attach_images (images Dataset folder and local image_dir) and the shared image_info helper."""

from __future__ import annotations

import hashlib
import io
import struct
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from pydantic import ValidationError

from raypress.artifacts import DatasetArtifact
from raypress.operators.curation.attach_images import AttachImages, ImageIndex, SiteMirror, url_key
from raypress.operators.curation.images.info import UnreadableImage, image_info, read_image_info
from raypress.operators.registry import get_op
from raypress.operators.shared.documents import Document, documents_to_table, table_to_documents
from raypress.schema import ArtifactType

SITE = "https://site.test/en/"


def encode(size: tuple[int, int], fmt: str = "PNG", color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, color).save(buf, fmt)
    return buf.getvalue()


PNG = encode((300, 200))
JPEG = encode((640, 480), "JPEG")
WEBP = encode((160, 90), "WEBP")


def png_header_only(width: int, height: int) -> bytes:
    """A PNG signature + IHDR and nothing else: a size without pixels (cheap 'huge' images)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"") + chunk(b"IEND", b"")


# ---- image_info -------------------------------------------------------------------------------


def test_image_info_reads_size_format_and_hash():
    info = read_image_info(PNG)
    assert (info.width, info.height, info.format) == (300, 200, "png")
    assert info.sha256 == hashlib.sha256(PNG).hexdigest()
    assert read_image_info(JPEG).format == "jpeg" and read_image_info(WEBP).metadata() == {
        "height": 90, "width": 160, "sha256": hashlib.sha256(WEBP).hexdigest(), "format": "webp"}


def test_image_info_reads_huge_sizes_from_the_header_only():
    info = read_image_info(png_header_only(20_000, 19_000))  # 380 Mpx: over Pillow's bomb limit
    assert (info.width, info.height) == (20_000, 19_000)
    assert Image.MAX_IMAGE_PIXELS is not None  # the limit is restored for code that decodes


@pytest.mark.parametrize("data, message", [
    (None, "null"), (b"", "empty"), (b"<svg xmlns='http://www.w3.org/2000/svg'/>", "not a recognised image"),
    (PNG[:12], "not a recognised image"), (b"\xff\xd8\xff" + b"\x00" * 10, "image"),
    (png_header_only(0, 10), "image"),
])
def test_corrupt_bytes_raise_a_clear_error(data, message):
    with pytest.raises(UnreadableImage, match=message):
        read_image_info(data)
    assert image_info(data) is None


# ---- the images index ---------------------------------------------------------------------------


def write_images(folder: Path, rows: list[tuple[str, bytes | None]], files: int = 2) -> DatasetArtifact:
    folder.mkdir(parents=True, exist_ok=True)
    per = -(-len(rows) // files)
    for i in range(files):
        part = rows[i * per:(i + 1) * per]
        table = pa.table({"id": [f"img{i}:{j}" for j in range(len(part))], "url": [u for u, _ in part],
                          "image_bytes": pa.array([b for _, b in part], pa.binary())})
        pq.write_table(table, folder / f"part-{i:05d}.parquet", row_group_size=2)
    return DatasetArtifact(ds=None, path=str(folder), rows=len(rows))


def doc(i: int, *positions: str) -> Document:
    d = Document(id=f"d{i}", url=SITE + f"p{i}.html", source="html")
    for p in positions:
        if p.startswith("img:"):
            d.add_image(SITE + p[4:])
        else:
            d.add_text(p)
    return d


def run(op: AttachImages, docs: list[Document]) -> tuple[list[Document], pa.Table]:
    out = op.process_batch(documents_to_table(docs))
    assert out.num_rows == len(docs)
    return table_to_documents(out), out


IMAGES = [
    (SITE + "images/a.png", PNG),
    (SITE + "images/b.jpg", JPEG),
    (SITE + "images/my pic.webp", WEBP),
    (SITE + "images/broken.png", b"\x89PNG not really"),
    (SITE + "images/null.png", None),
    (SITE + "images/a.png", JPEG),  # a second copy of a URL: the first one wins
]


def test_images_are_attached_with_metadata(tmp_path):
    op = get_op("attach_images")(AttachImages.Params(), {"images": write_images(tmp_path / "imgs", IMAGES)})
    docs, out = run(op, [doc(0, "intro", "img:images/a.png", "middle", "img:images/b.jpg", "end")])
    d = docs[0]
    assert d.texts == ["intro", None, "middle", None, "end"]
    assert d.image_bytes[1] == PNG and d.image_bytes[3] == JPEG
    assert d.image_metadata[1] == {"height": 200, "width": 300, "sha256": hashlib.sha256(PNG).hexdigest(),
                                   "page": None, "xref": None, "format": "png"}
    assert d.image_metadata[3]["format"] == "jpeg" and d.image_metadata[3]["width"] == 640
    assert out.column("images_unresolved").to_pylist() == [0]
    assert out.column("images_unreadable").to_pylist() == [0]
    assert out.schema.field("images_unresolved").type == pa.int32()


def test_unresolvable_and_unreadable_images_are_dropped_and_counted(tmp_path):
    op = AttachImages(AttachImages.Params(), {"images": write_images(tmp_path / "imgs", IMAGES)})
    docs, out = run(op, [
        doc(0, "a", "img:images/missing.png", "b", "img:images/broken.png", "c", "img:images/a.png"),
        doc(1, "img:images/null.png", "only text"),
        doc(2),  # an empty document stays empty
    ])
    assert docs[0].texts == ["a\n\nb\n\nc", None]  # texts that became neighbours are merged
    assert docs[0].images == [None, SITE + "images/a.png"]
    assert len(docs[0].image_bytes) == len(docs[0].image_metadata) == 2
    assert docs[1].texts == ["only text"] and docs[1].images == [None]
    assert docs[2].texts == []
    assert out.column("images_unresolved").to_pylist() == [1, 1, 0]
    assert out.column("images_unreadable").to_pylist() == [1, 0, 0]


def test_urls_match_without_fragment_and_with_either_percent_encoding(tmp_path):
    index = ImageIndex.from_artifact(write_images(tmp_path / "imgs", IMAGES))
    assert len(index) == 5  # duplicates indexed once
    found = index.lookup({SITE + "images/b.jpg#frag", SITE + "images/my%20pic.webp", "HTTPS://SITE.TEST/en/images/a.png"})
    assert found[SITE + "images/b.jpg#frag"] == JPEG
    assert found[SITE + "images/my%20pic.webp"] == WEBP
    assert found["HTTPS://SITE.TEST/en/images/a.png"] == PNG
    assert url_key("https://x.test/a b.png#top") == "https://x.test/a%20b.png"


def test_cache_is_bounded(tmp_path):
    index = ImageIndex.from_artifact(write_images(tmp_path / "imgs", IMAGES), cache_bytes=0)
    assert index.lookup({SITE + "images/a.png"}) == {SITE + "images/a.png": PNG}
    assert index.lookup({SITE + "images/b.jpg"}) == {SITE + "images/b.jpg": JPEG}
    assert len(index._cache) == 1


def test_images_input_needs_url_and_bytes_columns(tmp_path):
    (tmp_path / "bad").mkdir()
    pq.write_table(pa.table({"url": ["x"]}), tmp_path / "bad" / "part-0.parquet")
    with pytest.raises(ValueError, match="needs 'url' and 'image_bytes'"):
        AttachImages(AttachImages.Params(), {"images": DatasetArtifact(ds=None, path=str(tmp_path / "bad"))})
    with pytest.raises(ValueError, match="not materialized"):
        AttachImages(AttachImages.Params(), {"images": DatasetArtifact(ds=None, path=None)})


# ---- a local folder -----------------------------------------------------------------------------


def mirror(tmp_path: Path) -> Path:
    root = tmp_path / "mirror"
    (root / "images").mkdir(parents=True)
    (root / "images" / "a.png").write_bytes(PNG)
    (root / "images" / "my pic.webp").write_bytes(WEBP)
    (root / "images" / "junk.png").write_bytes(b"not an image")
    (tmp_path / "secret.png").write_bytes(PNG)
    return root


def test_image_dir_alone_resolves_by_url_prefix(tmp_path):
    root = mirror(tmp_path)
    op = AttachImages(AttachImages.Params(image_dir=str(root), url_prefix=SITE))
    docs, out = run(op, [doc(0, "t", "img:images/a.png?v=2", "img:images/my%20pic.webp", "img:images/junk.png",
                             "img:images/nope.png", "img:../secret.png")])
    assert docs[0].images == [None, SITE + "images/a.png?v=2", SITE + "images/my%20pic.webp"]
    assert docs[0].image_bytes[1:] == [PNG, WEBP]
    assert out.column("images_unresolved").to_pylist() == [2]  # nope.png, and ../ refused
    assert out.column("images_unreadable").to_pylist() == [1]


def test_folder_refuses_paths_outside_it(tmp_path):
    folder = SiteMirror(str(mirror(tmp_path)), SITE)
    assert folder.get(SITE + "../secret.png") is None
    assert folder.get(SITE + "images/%2e%2e/%2e%2e/secret.png") is None
    assert folder.get("https://other.test/images/a.png") is None
    assert folder.get(SITE + "images/a.png") == PNG


def test_images_input_first_then_folder(tmp_path):
    art = write_images(tmp_path / "imgs", [(SITE + "images/a.png", JPEG)], files=1)
    op = AttachImages(AttachImages.Params(image_dir=str(mirror(tmp_path)), url_prefix=SITE), {"images": art})
    docs, _ = run(op, [doc(0, "img:images/a.png", "img:images/my pic.webp")])
    assert docs[0].image_bytes == [JPEG, WEBP]


def test_params_and_declared_inputs():
    assert AttachImages.inputs == {"data": ArtifactType.DATASET, "images": ArtifactType.DATASET}
    assert AttachImages.stateful
    with pytest.raises(ValidationError, match="go together"):
        AttachImages.Params(image_dir="/x")
    with pytest.raises(ValueError, match="needs an 'images' input"):
        AttachImages(AttachImages.Params())
    assert all(f.description for f in AttachImages.Params.model_fields.values())


def test_bytes_already_present_are_kept(tmp_path):
    op = AttachImages(AttachImages.Params(image_dir=str(tmp_path), url_prefix="https://none.test/"))
    d = doc(0, "t")
    d.add_image("page_0_image_7", PNG, {"page": 0, "xref": 7})
    docs, out = run(op, [d])
    assert docs[0].image_metadata[1]["page"] == 0 and docs[0].image_metadata[1]["xref"] == 7
    assert docs[0].image_metadata[1]["width"] == 300
    assert out.column("images_unresolved").to_pylist() == [0]
