"""idx_images and image_folder readers: IDX parsing (plain and gz), errors that name the file,
row tables, planning of disjoint slices, and the real Fashion-MNIST files when installed."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from PIL import Image
from pydantic import ValidationError

from raypress.operators.io import idx_images as idx
from raypress.operators.io.idx_images import IdxImages, idx_count, read_idx, read_slice_tables, rows_table
from raypress.operators.io.image_folder import ImageFolder, list_image_folder, read_image_files
from raypress.image_codecs import decode_image
from raypress.operators.registry import get_op
from raypress.schema import DETAIL_COL, NODE_COL, REASON_COL, alive_mask


def idx_bytes(magic: int, array: np.ndarray) -> bytes:
    header = np.array([magic, *array.shape], dtype=">u4").tobytes()
    return header + array.astype(np.uint8).tobytes()


def write_idx(tmp_path: Path, n: int = 7, gz: bool = False, shape=(28, 28)) -> tuple[str, str, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(n)
    images = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
    labels = rng.integers(0, 10, n).astype(np.uint8)
    suffix = ".gz" if gz else ""
    opener = gzip.open if gz else open
    paths = []
    for name, magic, arr in (("images", 0x803, images), ("labels", 0x801, labels)):
        path = tmp_path / f"{name}-idx{suffix}"
        with opener(path, "wb") as f:
            f.write(idx_bytes(magic, arr))
        paths.append(str(path))
    return paths[0], paths[1], images, labels


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_round_trips_plain_and_gz(tmp_path, gz):
    img_path, lab_path, images, labels = write_idx(tmp_path, gz=gz)
    got_images, got_labels = read_idx(img_path, lab_path)
    np.testing.assert_array_equal(got_images, images)
    np.testing.assert_array_equal(got_labels, labels)
    assert got_labels.dtype == np.int64
    part_images, part_labels = read_idx(img_path, lab_path, offset=2, limit=3)
    np.testing.assert_array_equal(part_images, images[2:5])
    np.testing.assert_array_equal(part_labels, labels[2:5])
    tail, _ = read_idx(img_path, lab_path, offset=5, limit=100)
    assert len(tail) == 2
    assert idx_count(img_path, lab_path) == (7, (28, 28))


def test_bad_magic_names_the_file(tmp_path):
    img_path, lab_path, images, _ = write_idx(tmp_path)
    Path(img_path).write_bytes(idx_bytes(0x801, images.reshape(-1)))  # a labels header on the images file
    with pytest.raises(ValueError, match=r"images-idx: bad magic number 0x00000801, expected IDX unsigned-byte images"):
        read_idx(img_path, lab_path)
    Path(lab_path).write_bytes(idx_bytes(0x803, images))  # an images header on the labels file
    with pytest.raises(ValueError, match=r"labels-idx: bad magic number 0x00000803, expected IDX unsigned-byte labels"):
        idx.read_idx_header(lab_path, idx.IDX_LABELS_MAGIC)


def test_truncated_files_are_errors_naming_the_file(tmp_path):
    img_path, lab_path, _, _ = write_idx(tmp_path)
    data = Path(img_path).read_bytes()
    Path(img_path).write_bytes(data[:-100])
    with pytest.raises(ValueError, match=r"images-idx: truncated: the header promises 7 items"):
        read_idx(img_path, lab_path)
    Path(img_path).write_bytes(data + b"\0\0")
    with pytest.raises(ValueError, match=r"images-idx: 2 unexpected bytes"):
        read_idx(img_path, lab_path)
    Path(img_path).write_bytes(data[:6])
    with pytest.raises(ValueError, match=r"images-idx: truncated: the IDX dimensions needs 12 bytes"):
        read_idx(img_path, lab_path)


def test_truncated_gz_slice_is_an_error(tmp_path):
    img_path, lab_path, images, _ = write_idx(tmp_path, gz=True)
    with gzip.open(img_path, "wb") as f:  # a valid gzip stream holding only 3 of the 7 images
        f.write(idx_bytes(0x803, images)[: 16 + 3 * 784])
    assert read_idx(img_path, lab_path, 0, 3)[0].shape == (3, 28, 28)  # the slice that exists reads
    with pytest.raises(ValueError, match=r"images-idx.gz: truncated: items 2..6 needs 3920 bytes but only 784 remain"):
        read_idx(img_path, lab_path, offset=2)
    Path(img_path).write_bytes(Path(img_path).read_bytes()[:40])  # a cut gzip stream
    with pytest.raises(ValueError, match=r"images-idx.gz: (corrupt|truncated)"):
        read_idx(img_path, lab_path)


def test_count_mismatch_is_an_error(tmp_path):
    img_path, lab_path, _, labels = write_idx(tmp_path)
    Path(lab_path).write_bytes(idx_bytes(0x801, labels[:5]))
    with pytest.raises(ValueError, match=r"holds 7 images but .*labels-idx holds 5 labels"):
        read_idx(img_path, lab_path)


def test_rows_table_ids_pngs_and_columns():
    images = np.arange(2 * 28 * 28, dtype=np.uint32).reshape(2, 28, 28).astype(np.uint8)
    table = rows_table(images, np.array([3, 9]), 41, "train", "fashion-mnist-train")
    assert table.column("id").to_pylist() == ["fashion-mnist-train-00041", "fashion-mnist-train-00042"]
    assert table.column("label").to_pylist() == [3, 9]
    assert table.column("index").to_pylist() == [41, 42]
    assert table.column("split").to_pylist() == ["train", "train"]
    assert table.schema.field("image").type == pa.binary()
    for blob, img in zip(table.column("image").to_pylist(), images):
        assert blob[:8] == b"\x89PNG\r\n\x1a\n"
        np.testing.assert_array_equal(decode_image(blob, "r"), img)
    assert alive_mask(table) is None


def test_plan_splits_the_window_into_disjoint_slices(tmp_path, monkeypatch):
    img_path, lab_path, images, labels = write_idx(tmp_path, n=25)
    monkeypatch.setattr(idx, "ROWS_PER_TASK", 10)
    monkeypatch.setattr(idx, "ROWS_PER_TABLE", 4)
    op = IdxImages(IdxImages.Params(images=img_path, labels=lab_path, split="val", offset=3, limit=15))
    plan = op.plan()
    assert [(p["start"], p["stop"]) for p in plan] == [(3, 13), (13, 18)]
    tables = [t for item in plan for t in read_slice_tables(item)]
    assert [t.num_rows for t in tables] == [4, 4, 2, 4, 1]
    rows = pa.concat_tables(tables)
    assert rows.column("index").to_pylist() == list(range(3, 18))
    assert rows.column("id").to_pylist()[0] == "val-00003"
    assert rows.column("label").to_pylist() == labels[3:18].tolist()
    np.testing.assert_array_equal(decode_image(rows.column("image")[5].as_py(), "x"), images[8])
    with pytest.raises(ValueError, match="offset 25 is past the 25 items"):
        IdxImages(IdxImages.Params(images=img_path, labels=lab_path, split="val", offset=25)).plan()


def test_params_need_one_source_and_a_split():
    with pytest.raises(ValidationError, match="either dataset or images"):
        IdxImages.Params(dataset="fashion-mnist-train", images="a", labels="b")
    with pytest.raises(ValidationError, match="give dataset, or both images and labels"):
        IdxImages.Params(images="a")
    with pytest.raises(ValidationError, match="split is required"):
        IdxImages.Params(images="a", labels="b")
    with pytest.raises(ValidationError):
        IdxImages.Params(dataset="mnist-train")
    assert get_op("idx_images") is IdxImages and get_op("image_folder") is ImageFolder


def test_missing_dataset_folder_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv(idx.FASHION_MNIST_ENV, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="dataset-fashion-mnist"):
        IdxImages(IdxImages.Params(dataset="fashion-mnist-test")).plan()


def test_dataset_shortcut_reads_a_folder_of_plain_files(tmp_path, monkeypatch):
    img_path, lab_path, images, _ = write_idx(tmp_path, n=3)
    Path(img_path).rename(tmp_path / "t10k-images-idx3-ubyte")
    Path(lab_path).rename(tmp_path / "t10k-labels-idx1-ubyte")
    monkeypatch.setenv(idx.FASHION_MNIST_ENV, str(tmp_path))
    [item] = IdxImages(IdxImages.Params(dataset="fashion-mnist-test")).plan()
    [table] = list(read_slice_tables(item))
    assert table.column("id").to_pylist() == [f"fashion-mnist-test-0000{i}" for i in range(3)]
    assert set(table.column("split").to_pylist()) == {"test"}


FASHION = Path(idx.FASHION_MNIST_DIR)


@pytest.mark.skipif(not (FASHION / "train-images-idx3-ubyte.gz").exists(), reason="dataset-fashion-mnist not installed")
def test_real_fashion_mnist_counts_and_labels():
    for name, count in (("fashion-mnist-train", 60_000), ("fashion-mnist-test", 10_000)):
        images_path, labels_path, _ = idx.dataset_files(name)
        assert idx_count(images_path, labels_path) == (count, (28, 28))
        images, labels = read_idx(images_path, labels_path)
        assert images.shape == (count, 28, 28) and images.dtype == np.uint8
        assert labels.min() == 0 and labels.max() == 9
        assert np.bincount(labels).tolist() == [count // 10] * 10  # Fashion-MNIST is balanced
    part, _ = read_idx(images_path, labels_path, offset=9_990)
    np.testing.assert_array_equal(part, images[9_990:])


# ------------------------------------------------------------------------------- image_folder
def _png(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG")
    return buf.getvalue()


def test_image_folder_labels_png_passthrough_jpg_reencoded_and_bad_files(tmp_path):
    root = tmp_path / "root"
    for cls in ("shirt", "bag"):
        (root / cls).mkdir(parents=True)
    gray = np.full((28, 28), 77, np.uint8)
    png = _png(gray)
    (root / "bag" / "a.png").write_bytes(png)
    Image.fromarray(np.full((8, 8, 3), 200, np.uint8)).save(root / "shirt" / "b.JPG", "JPEG")
    (root / "shirt" / "c.png").write_bytes(png[:30])  # truncated
    (root / "shirt" / "notes.txt").write_text("not an image")
    files = list_image_folder(str(root), [".png", ".jpg"])
    assert [(Path(f["path"]).name, f["label"], f["class_name"]) for f in files] == [
        ("a.png", 0, "bag"), ("b.JPG", 1, "shirt"), ("c.png", 1, "shirt")]
    [table] = list(read_image_files(files, "folder"))
    live = table.filter(alive_mask(table))
    dead = table.filter(pa.compute.invert(alive_mask(table)))
    assert live.column("label").to_pylist() == [0, 1]
    assert live.column("class_name").to_pylist() == ["bag", "shirt"]
    assert live.column("image")[0].as_py() == png  # a PNG travels untouched
    jpg_as_png = live.column("image")[1].as_py()
    assert jpg_as_png[:8] == b"\x89PNG\r\n\x1a\n"
    assert decode_image(jpg_as_png, "b", size=(8, 8), mode="RGB").shape == (8, 8, 3)
    assert dead.column("id").to_pylist() == [str(root / "shirt" / "c.png")]
    assert dead.column(NODE_COL).to_pylist() == ["folder"]
    assert dead.column(REASON_COL).to_pylist() == ["unreadable_image"]
    assert str(root / "shirt" / "c.png") in dead.column(DETAIL_COL)[0].as_py()


def test_image_folder_errors_on_missing_or_empty_root(tmp_path):
    with pytest.raises(FileNotFoundError, match="is not a folder"):
        list_image_folder(str(tmp_path / "nope"), [".png"])
    with pytest.raises(ValueError, match="has no class sub-folders"):
        list_image_folder(str(tmp_path), [".png"])
    (tmp_path / "cls").mkdir()
    with pytest.raises(ValueError, match="no .png files"):
        list_image_folder(str(tmp_path), [".png"])
    assert ImageFolder.Params(root="x", extensions=["PNG"]).extensions == [".png"]
