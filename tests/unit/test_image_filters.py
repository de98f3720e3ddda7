"""image_count_filter, image_url_filter, remove_images_by_shape_mapper on interleaved documents."""

from __future__ import annotations

import io

import pyarrow as pa
import pytest
from PIL import Image
from pydantic import ValidationError

from raypress.operators.shared.documents import Document, documents_to_table, table_to_documents
from raypress.operators.curation.image_count_filter import ImageCountFilter, image_counts
from raypress.operators.curation.image_url_filter import ImageUrlFilter, url_extension
from raypress.operators.curation.remove_images_by_shape_mapper import RemoveImagesByShapeMapper
from raypress.operators.registry import get_op


def png(width: int, height: int, color=(200, 30, 30)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (width, height), color).save(buf, "PNG")
    return buf.getvalue()


def doc(*parts, id="d", source="html", url="https://example.com/page") -> Document:
    """parts: str -> a text position; tuple (ref, bytes, meta) -> an image position."""
    d = Document(id=id, url=url, source=source)
    for part in parts:
        if isinstance(part, str):
            d.add_text(part)
        else:
            ref, data, meta = (tuple(part) + (None, None))[:3]
            d.add_image(ref, data, meta)
    return d


def run_filter(op, docs):
    stats = op.compute_stats(documents_to_table(docs))
    return stats, op.drop_reasons(stats)


def test_registered():
    assert get_op("image_count_filter") is ImageCountFilter
    assert get_op("image_url_filter") is ImageUrlFilter
    assert get_op("remove_images_by_shape_mapper") is RemoveImagesByShapeMapper


# -- image_count_filter --------------------------------------------------------------------------


def test_image_count_boundaries():
    op = ImageCountFilter(ImageCountFilter.Params())
    docs = [doc("only text", id="0")]
    for n in (1, 2, 30, 31):
        docs.append(doc("t", *[(f"https://x/{i}.jpg",) for i in range(n)], id=str(n)))
    stats, reasons = run_filter(op, docs)
    assert stats["image_count"] == [0, 1, 2, 30, 31]
    assert reasons == ["image_count < min", None, None, None, "image_count > max"]


def test_image_count_empty_and_null_lists():
    table = pa.table({"images": pa.array([None, [], [None, None], [None, "a.png"]], pa.list_(pa.string()))})
    assert image_counts(table) == [0, 0, 0, 1]
    op = ImageCountFilter(ImageCountFilter.Params(min_images=0, max_images=0))
    assert op.drop_reasons(op.compute_stats(table)) == [None, None, None, "image_count > max"]


def test_image_count_sliced_table():
    docs = [doc(*[(f"u{i}",) for i in range(n)], id=str(n)) for n in (3, 1, 4)]
    table = documents_to_table(docs).slice(1, 2)  # offsets not starting at 0
    assert image_counts(table) == [1, 4]


# -- image_url_filter ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, ext",
    [
        ("https://cdn.example.com/a/b/photo.JPG?w=300#x", "jpg"),
        ("https://example.com/img/photo", None),
        ("https://example.com/img/", None),
        ("https://example.com/v1.2/photo", None),
        ("https://example.com/pic.php?id=3", "php"),
        ("https://example.com/pic%2Egif", "gif"),
        ("data:image/gif;base64,R0lGODlh", "gif"),
        ("data:image/svg+xml;utf8,<svg/>", "svg"),
        ("page_3_image_17", None),
    ],
)
def test_url_extension(url, ext):
    assert url_extension(url) == ext


def test_image_url_banned_words_and_extensions():
    op = ImageUrlFilter(ImageUrlFilter.Params())
    docs = [
        doc("t", ("https://example.com/photos/cat.jpg",), ("https://example.com/img/dog",), id="ok"),
        doc("t", ("https://example.com/static/Site-LOGO.png",), id="logo"),
        doc("t", ("https://example.com/u/AVATAR_12.webp",), id="avatar"),
        doc("t", ("https://example.com/a.jpg",), ("https://example.com/spinner.gif",), id="gif"),
        doc("t", ("https://xxx.example.com/a.svg",), id="both"),
        doc("text only", id="none"),
    ]
    stats, reasons = run_filter(op, docs)
    assert stats["image_url_banned_hits"] == [0, 1, 1, 0, 1, 0]
    assert stats["image_url_bad_extensions"] == [0, 0, 0, 1, 1, 0]
    assert reasons == [None, "image_url_banned_word", "image_url_banned_word", "image_url_extension",
                       "image_url_banned_word", None]


def test_image_url_params_override_and_validate():
    op = ImageUrlFilter(ImageUrlFilter.Params(banned_substrings=["Banner"], allowed_extensions=[".GIF"]))
    docs = [doc("t", ("https://e.com/logo.gif",)), doc("t", ("https://e.com/top-banner.gif",)),
            doc("t", ("https://e.com/a.jpg",))]
    assert run_filter(op, docs)[1] == [None, "image_url_banned_word", "image_url_extension"]
    with pytest.raises(ValidationError):
        ImageUrlFilter.Params(banned_substrings=[" "])
    with pytest.raises(ValidationError):
        ImageUrlFilter.Params(unknown=1)


def test_image_url_null_lists():
    op = ImageUrlFilter(ImageUrlFilter.Params())
    table = pa.table({"images": pa.array([None, [], [None]], pa.list_(pa.string()))})
    assert op.drop_reasons(op.compute_stats(table)) == [None, None, None]


# -- remove_images_by_shape_mapper ---------------------------------------------------------------


def sized(table):
    """(refs kept, images_removed_shape) per row."""
    docs = table_to_documents(table)
    return [[r for r in d.images if r is not None] for d in docs], table.column("images_removed_shape").to_pylist()


def test_remove_by_shape_boundaries_from_headers():
    op = RemoveImagesByShapeMapper(RemoveImagesByShapeMapper.Params())
    images = {
        "150x150": png(150, 150),  # both sides exactly min_side: kept
        "149x300": png(149, 300),  # a side one below min_side: removed
        "300x600": png(300, 600),  # ratio exactly 2: kept
        "300x601": png(300, 601),  # ratio 2.003: removed
        "600x300": png(600, 300),  # landscape, ratio 2: kept
    }
    d = doc("intro", *[(ref, data) for ref, data in images.items()], "outro")
    out = op.process_batch(documents_to_table([d]))
    kept, removed = sized(out)
    assert kept == [["150x150", "300x600", "600x300"]]
    assert removed == [2]
    (result,) = table_to_documents(out)
    assert result.texts == ["intro", None, None, None, "outro"]  # text positions untouched
    meta = [m for m in result.image_metadata if m is not None]
    sizes = [(m["width"], m["height"], m["format"]) for m in meta]
    assert sizes == [(150, 150, "png"), (300, 600, "png"), (600, 300, "png")]
    assert all(len(m["sha256"]) == 64 for m in meta)


def test_remove_by_shape_max_side_uses_metadata_without_bytes():
    op = RemoveImagesByShapeMapper(RemoveImagesByShapeMapper.Params(max_aspect_ratio=10))
    d = doc(
        ("at_max", None, {"width": 20_000, "height": 10_000}),
        ("over_max", None, {"width": 20_001, "height": 10_000}),
        # metadata wins over the bytes: these bytes are 10x10 but the metadata says 500x500
        ("meta_wins", png(10, 10), {"width": 500, "height": 500}),
    )
    kept, removed = sized(op.process_batch(documents_to_table([d])))
    assert kept == [["at_max", "meta_wins"]] and removed == [1]


def test_remove_by_shape_pdf_aspect_ratio():
    op = RemoveImagesByShapeMapper(RemoveImagesByShapeMapper.Params())
    parts = [("r3", None, {"width": 900, "height": 300}), ("r3.01", None, {"width": 903, "height": 300})]
    html, pdf = doc("t", *parts, id="h", source="html"), doc("t", *parts, id="p", source="pdf")
    kept, removed = sized(op.process_batch(documents_to_table([html, pdf])))
    assert kept == [[], ["r3"]] and removed == [2, 1]
    same = RemoveImagesByShapeMapper(RemoveImagesByShapeMapper.Params(max_aspect_ratio_pdf=None))
    assert sized(same.process_batch(documents_to_table([pdf])))[0] == [[]]


def test_remove_by_shape_corrupt_missing_and_empty():
    op = RemoveImagesByShapeMapper(RemoveImagesByShapeMapper.Params())
    good = png(400, 300)
    d = doc(
        "t",
        ("corrupt", b"\x89PNG\r\n\x1a\n not really a png"),
        ("html", b"<html>404</html>"),
        ("truncated_header", good[:20]),
        ("no_bytes", None),
        ("empty_bytes", b""),
        ("good", good),
    )
    out = op.process_batch(documents_to_table([d, doc(id="empty"), doc("text only", id="text")]))
    kept, removed = sized(out)
    assert kept == [["good"], [], []]
    assert removed == [5, 0, 0]


def test_remove_by_shape_null_content_lists():
    op = RemoveImagesByShapeMapper(RemoveImagesByShapeMapper.Params())
    table = documents_to_table([doc("t", ("a", png(200, 200)))])
    nulls = table.set_column(table.schema.get_field_index("image_metadata"), "image_metadata",
                             pa.nulls(1, table.schema.field("image_metadata").type))
    kept, removed = sized(op.process_batch(nulls))
    assert kept == [["a"]] and removed == [0]


def test_remove_by_shape_replaces_existing_column():
    op = RemoveImagesByShapeMapper(RemoveImagesByShapeMapper.Params())
    table = documents_to_table([doc("t", ("a", png(10, 10)))], extra={"images_removed_shape": [7]})
    out = op.process_batch(table)
    assert out.column_names.count("images_removed_shape") == 1
    assert out.column("images_removed_shape").to_pylist() == [1]


def test_remove_by_shape_real_arxiv_figures(shared_data):
    """Real PNG/JPEG figures: 600x800 (kept), 1000x200 (ratio 5: removed), 20x20 (too small)."""
    root = shared_data / "arxiv" / "tex" / "images"
    names = ["im1.png", "im2_included.jpg", "im_not_included.png"]
    d = doc("t", *[(n, (root / n).read_bytes()) for n in names])
    out = RemoveImagesByShapeMapper(RemoveImagesByShapeMapper.Params()).process_batch(documents_to_table([d]))
    kept, removed = sized(out)
    assert kept == [["im1.png"]] and removed == [2]
    (result,) = table_to_documents(out)
    assert [m for m in result.image_metadata if m][0]["width"] == 600
