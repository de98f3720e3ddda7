"""Data-Juicer's image_size_filter, image_aspect_ratio_filter and image_shape_filter.

Expected values follow Data-Juicer's code (data_juicer/ops/filter/image_*_filter.py, mm_utils'
size_to_bytes / load_image): closed intervals, ``any_or_all`` over a row's images, rows without
images kept, bytes in ``image_bytes`` used instead of the path, a path opened the way HF
``datasets`` opens it (EXIF orientation applied).  A one-off run of Data-Juicer's own filter code
on 718 real images (521 rows, 8 parameter sets, paths and bytes) gave the same stats, the same
kept rows and the same failing rows as these ops.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow as pa
import pytest
from PIL import Image
from pydantic import ValidationError

from raypress.dag.batch_exec import StreamingOpRunner
from raypress.operators.curation.image_aspect_ratio_filter import ImageAspectRatioFilter
from raypress.operators.curation.image_shape_filter import ImageShapeFilter
from raypress.operators.curation.image_size_filter import ImageSizeFilter
from raypress.operators.curation.images.list_filter import UnreadableImage, row_images, size_to_bytes
from raypress.operators.registry import get_op, requirements
from raypress.operators.shared.documents import Document, documents_to_table


def encoded(width: int, height: int, fmt: str = "PNG", orientation: int | None = None) -> bytes:
    buf = io.BytesIO()
    kwargs = {}
    if orientation is not None:
        exif = Image.Exif()
        exif[0x0112] = orientation
        kwargs["exif"] = exif
    Image.new("RGB", (width, height), (10, 120, 200)).save(buf, fmt, **kwargs)
    return buf.getvalue()


def write(folder: Path, name: str, data: bytes) -> str:
    path = folder / name
    path.write_bytes(data)
    return str(path)


def dj_rows(images: list[list[str]], image_bytes: list[list[bytes]] | None = None) -> pa.Table:
    cols = {"id": [str(i) for i in range(len(images))], "text": ["t"] * len(images),
            "images": pa.array(images, pa.list_(pa.string()))}
    if image_bytes is not None:
        cols["image_bytes"] = pa.array(image_bytes, pa.list_(pa.binary()))
    return pa.table(cols)


def run(op, table: pa.Table):
    stats = op.compute_stats(table)
    return stats, op.drop_reasons(stats)


def make(cls, **params):
    return cls(cls.Params(**params))


# -- names, params ------------------------------------------------------------------------------


def test_registered_with_data_juicer_names_and_the_images_extra():
    assert get_op("image_size_filter") is ImageSizeFilter
    assert get_op("image_aspect_ratio_filter") is ImageAspectRatioFilter
    assert get_op("image_shape_filter") is ImageShapeFilter
    for name in ("image_size_filter", "image_aspect_ratio_filter", "image_shape_filter"):
        assert requirements(name) == {"PIL": "images"}


def test_data_juicer_defaults():
    assert ImageSizeFilter.Params().model_dump() == {"image_key": "images", "image_bytes_key": "image_bytes",
                                                     "any_or_all": "any", "min_size": "0", "max_size": "1TB"}
    p = ImageAspectRatioFilter.Params()
    assert (p.min_ratio, p.max_ratio, p.any_or_all) == (0.333, 3.0, "any")
    s = ImageShapeFilter.Params()
    assert (s.min_width, s.min_height) == (1, 1) and s.max_width == s.max_height == 2**63 - 1


def test_any_or_all_only_takes_any_or_all():
    with pytest.raises(ValidationError):
        ImageShapeFilter.Params(any_or_all="most")


def test_old_mint1t_params_point_to_the_renamed_op():
    with pytest.raises(ValidationError, match="remove_images_by_shape_mapper"):
        ImageSizeFilter.Params(min_side=150, max_side=20000)


@pytest.mark.parametrize("text, expected", [
    ("0", 0), ("10", 10), ("124KB", 124 << 10), ("124kb", 124 << 10), ("3MiB", 3 << 20), (" 2 GB ", 2 << 30),
    ("1TB", 1 << 40), ("007KB", 7 << 10), (1024, 1024),
])
def test_size_to_bytes_reads_data_juicers_sizes(text, expected):
    assert size_to_bytes(text) == expected


@pytest.mark.parametrize("text", ["1.5MB", "-1", "1e3", "abc", "", "100B", "5 XB", "1K2B"])
def test_size_to_bytes_refuses_what_data_juicer_would_misread_or_reject(text):
    with pytest.raises(ValueError):
        size_to_bytes(text)


def test_bad_size_is_a_params_error():
    with pytest.raises(ValidationError, match="1536KB"):
        ImageSizeFilter.Params(max_size="1.5MB")


# -- image_size_filter ----------------------------------------------------------------------------


def test_image_size_boundaries_on_files(tmp_path):
    # file sizes only: Data-Juicer's op takes os.path.getsize, the content need not be an image
    at_max = write(tmp_path, "a.bin", b"x" * 1024)
    over = write(tmp_path, "b.bin", b"x" * 1025)
    small = write(tmp_path, "c.bin", b"x" * 10)
    table = dj_rows([[at_max], [over], [at_max, over], [small, over], []])
    stats, reasons = run(make(ImageSizeFilter, min_size="10", max_size="1KB"), table)
    assert stats == {"image_sizes": [[1024], [1025], [1024, 1025], [10, 1025], []]}
    assert reasons == [None, "image_sizes > max", None, None, None]
    _, reasons = run(make(ImageSizeFilter, min_size="11", max_size="1KB", any_or_all="all"), table)
    assert reasons == [None, "image_sizes > max", "image_sizes > max", "image_sizes out of range", None]


def test_image_size_uses_bytes_over_the_path(tmp_path):
    table = dj_rows([["/nonexistent/a.png", "/nonexistent/b.png"]], [[b"x" * 5, b"y" * 3000]])
    stats, reasons = run(make(ImageSizeFilter, max_size="2KB", any_or_all="all"), table)
    assert stats["image_sizes"] == [[5, 3000]] and reasons == ["image_sizes > max"]


def test_image_size_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError):
        make(ImageSizeFilter).compute_stats(dj_rows([[str(tmp_path / "gone.png")]]))


def test_table_without_the_image_column_keeps_every_row():
    table = pa.table({"id": ["a", "b"], "text": ["x", "y"]})
    stats, reasons = run(make(ImageShapeFilter, min_width=10_000), table)
    assert stats == {"image_width": [[], []], "image_height": [[], []]} and reasons == [None, None]


# -- image_aspect_ratio_filter ------------------------------------------------------------------------


def test_aspect_ratio_closed_interval_any_and_all(tmp_path):
    p = {name: write(tmp_path, f"{name}.png", encoded(*wh)) for name, wh in
         {"min": (333, 1000), "below": (332, 1000), "max": (300, 100), "above": (301, 100), "sq": (50, 50)}.items()}
    table = dj_rows([[p["min"]], [p["below"]], [p["max"]], [p["above"]], [p["below"], p["sq"]],
                     [p["below"], p["above"]], []])
    stats, reasons = run(make(ImageAspectRatioFilter), table)
    assert stats["aspect_ratios"] == [[0.333], [0.332], [3.0], [3.01], [0.332, 1.0], [0.332, 3.01], []]
    assert reasons == [None, "aspect_ratios < min", None, "aspect_ratios > max", None, "aspect_ratios out of range",
                       None]
    _, reasons = run(make(ImageAspectRatioFilter, any_or_all="all"), table)
    assert reasons[4] == "aspect_ratios < min" and reasons[0] is None


def test_aspect_ratio_custom_key_and_bytes_key():
    table = pa.table({"pics": pa.array([["x", "y"]], pa.list_(pa.string())),
                      "blobs": pa.array([[encoded(40, 10), encoded(10, 10)]], pa.list_(pa.binary()))})
    op = make(ImageAspectRatioFilter, image_key="pics", image_bytes_key="blobs", max_ratio=2.0, any_or_all="all")
    assert op.columns_read() == ("pics",)
    stats, reasons = run(op, table)
    assert stats["aspect_ratios"] == [[4.0, 1.0]] and reasons == ["aspect_ratios > max"]


def test_unreadable_image_raises_naming_it(tmp_path):
    bad = write(tmp_path, "bad.png", b"<html>404</html>")
    with pytest.raises(UnreadableImage, match="bad.png"):
        make(ImageAspectRatioFilter).compute_stats(dj_rows([[bad]]))


# -- image_shape_filter ---------------------------------------------------------------------------------


def test_shape_llava_recipe_bounds(tmp_path):
    # llava-pretrain-refine.yaml: max_width 727, max_height 606, any
    p = {wh: write(tmp_path, f"{wh[0]}x{wh[1]}.jpg", encoded(*wh, fmt="JPEG"))
         for wh in [(727, 606), (728, 10), (10, 607), (5, 5)]}
    table = dj_rows([[p[(727, 606)]], [p[(728, 10)]], [p[(10, 607)]], [p[(728, 10)], p[(10, 607)]],
                     [p[(728, 10)], p[(5, 5)]]])
    stats, reasons = run(make(ImageShapeFilter, max_width=727, max_height=606), table)
    assert stats["image_width"] == [[727], [728], [10], [728, 10], [728, 5]]
    assert stats["image_height"] == [[606], [10], [607], [10, 607], [10, 5]]
    assert reasons == [None, "image_width > max", "image_height > max", "image_shape out of range", None]
    _, reasons = run(make(ImageShapeFilter, max_width=727, max_height=606, any_or_all="all"), table)
    assert reasons[4] == "image_width > max"


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_exif_orientation_counts_for_paths_not_for_bytes(tmp_path, fmt):
    """Data-Juicer opens a path through HF datasets (EXIF orientation applied: a 40x10 image with
    orientation 6 is 10x40) and bytes with Pillow as they are (40x10)."""
    data = encoded(40, 10, fmt=fmt, orientation=6)
    path = write(tmp_path, f"turned.{fmt.lower()}", data)
    op = make(ImageShapeFilter)
    assert op.compute_stats(dj_rows([[path]])) == {"image_width": [[10]], "image_height": [[40]]}
    assert op.compute_stats(dj_rows([[path]], [[data]])) == {"image_width": [[40]], "image_height": [[10]]}
    upright = write(tmp_path, f"upright.{fmt.lower()}", encoded(40, 10, fmt=fmt, orientation=1))
    assert op.compute_stats(dj_rows([[upright]])) == {"image_width": [[40]], "image_height": [[10]]}


def test_real_figures(shared_data):
    """Real arXiv figures: im1.png 600x800 (2,525 bytes), im2_included.jpg 1000x200 (2,869 bytes),
    im_not_included.png 20x20 (115 bytes)."""
    root = shared_data / "arxiv" / "tex" / "images"
    paths = [str(root / n) for n in ("im1.png", "im2_included.jpg", "im_not_included.png")]
    table = dj_rows([paths, paths[:1], paths[1:]])
    size_stats, size_reasons = run(make(ImageSizeFilter, max_size="2KB", any_or_all="any"), table)
    assert size_stats["image_sizes"] == [[2525, 2869, 115], [2525], [2869, 115]]
    assert size_reasons == [None, "image_sizes > max", None]
    ratio_stats, ratio_reasons = run(make(ImageAspectRatioFilter, any_or_all="all"), table)
    assert ratio_stats["aspect_ratios"] == [[0.75, 5.0, 1.0], [0.75], [5.0, 1.0]]
    assert ratio_reasons == ["aspect_ratios > max", None, "aspect_ratios > max"]
    _, shape_reasons = run(make(ImageShapeFilter, min_width=200, min_height=200), table)
    assert shape_reasons == [None, None, None]  # 1000x200 is on the bound: kept
    _, shape_reasons = run(make(ImageShapeFilter, min_width=200, min_height=201), table)
    assert shape_reasons == [None, None, "image_shape out of range"]  # 1000x200: height; 20x20: width


# -- raypress's interleaved documents ------------------------------------------------------------------


def interleaved() -> pa.Table:
    with_bytes = Document(id="bytes", url="u", source="html")
    with_bytes.add_text("intro")
    with_bytes.add_image("https://e.com/wide.png", encoded(400, 100))
    with_bytes.add_text("middle")
    with_bytes.add_image("https://e.com/sq.png", encoded(100, 100))
    recorded = Document(id="meta", url="u", source="pdf")
    recorded.add_image("page_0_image_3", None, {"width": 1000, "height": 100})
    text_only = Document(id="text", url="u", source="html")
    text_only.add_text("no images at all")
    return documents_to_table([with_bytes, recorded, text_only])


def test_interleaved_rows_skip_text_positions_and_use_bytes_and_metadata():
    table = interleaved()
    assert [[i.ref for i in row] for row in row_images(table, "images", "image_bytes")] == [
        ["https://e.com/wide.png", "https://e.com/sq.png"], ["page_0_image_3"], []]
    stats, reasons = run(make(ImageAspectRatioFilter), table)
    assert stats["aspect_ratios"] == [[4.0, 1.0], [10.0], []]
    assert reasons == [None, "aspect_ratios > max", None]
    stats, _ = run(make(ImageShapeFilter), table)
    assert stats == {"image_width": [[400, 100], [1000], []], "image_height": [[100, 100], [100], []]}


def test_interleaved_image_without_bytes_or_file_raises_and_the_runner_quarantines_it():
    doc = Document(id="url_only", url="u", source="html")
    doc.add_image("https://e.com/never-fetched.jpg")
    with pytest.raises(UnreadableImage, match="attach_images"):
        make(ImageSizeFilter).compute_stats(documents_to_table([doc]))
    table = pa.concat_tables([interleaved(), documents_to_table([doc])])
    cls = get_op("image_size_filter")
    out = StreamingOpRunner(cls, cls.Params(max_size="1MB", any_or_all="all"), None, "sizes")(table).to_pylist()
    by_id = {r["id"]: r for r in out}
    assert by_id["url_only"]["_rp_kind"] == "error" and by_id["url_only"]["_rp_reason"] == "UnreadableImage"
    # a file size needs the bytes or a file: the PDF image known only by its metadata has neither
    assert by_id["meta"]["_rp_kind"] == "error" and by_id["meta"]["_rp_reason"] == "FileNotFoundError"
    sizes = [len(encoded(400, 100)), len(encoded(100, 100))]
    assert by_id["bytes"]["_rp_node"] is None and by_id["bytes"]["stats"]["image_sizes"] == sizes
    assert by_id["text"]["_rp_node"] is None and by_id["text"]["stats"]["image_sizes"] == []


def test_dropped_row_detail_lists_the_per_image_stats(tmp_path):
    path = write(tmp_path, "wide.png", encoded(90, 10))
    cls = get_op("image_aspect_ratio_filter")
    table = dj_rows([[path], []])
    out = StreamingOpRunner(cls, cls.Params(), None, "ratios")(table).to_pylist()
    assert out[0]["_rp_reason"] == "aspect_ratios > max"
    assert json.loads(out[0]["_rp_detail"]) == {"aspect_ratios": [9.0]}
    assert out[1]["_rp_node"] is None and out[1]["stats"]["aspect_ratios"] == []
