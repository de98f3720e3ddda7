"""``idx_images``: an IDX image file and its label file (MNIST / Fashion-MNIST format) as a Dataset.

IDX is a big-endian header (magic, then one uint32 per dimension) followed by raw uint8 data;
numpy parses it directly.  Gzip/bzip2/xz compression is recognised by content, not by name (a
browser that un-gzips a download keeps its ``.gz``).  The driver reads only the two headers (to
check them and to plan the split); each read task then seeks to its own slice, so disjoint
``offset``/``limit`` windows and large files cost only what they read.  Images leave as PNG
bytes, the column convention every image op shares (``raypress.image_codecs``).
"""

from __future__ import annotations

import contextlib
import os
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator, Literal

import numpy as np
import pyarrow as pa
from pydantic import Field, model_validator

from raypress.image_codecs import encode_png
from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.io.sniff.magic import describe
from raypress.operators.registry import register
from raypress.operators.shared.files import compression_of, map_items, open_maybe_compressed
from raypress.operators.shared.rows import combine
from raypress.schema import ID_COL

IDX_IMAGES_MAGIC = 0x00000803  # unsigned byte data, 3 dimensions (count, rows, cols)
IDX_LABELS_MAGIC = 0x00000801  # unsigned byte data, 1 dimension (count)
ROWS_PER_TASK = 10_000  # one read task decodes this many images (one seek + one read per file)
ROWS_PER_TABLE = 1_000  # output tables of a sensible block size
COLUMNS = (ID_COL, "image", "label", "index", "split")

# Where the Debian package dataset-fashion-mnist installs the files; the environment variable
# points elsewhere (e.g. a shared disk on a cluster whose nodes lack the package).
FASHION_MNIST_ENV = "RAYPRESS_FASHION_MNIST_DIR"
FASHION_MNIST_DIR = "/usr/share/datasets/fashion-mnist"
DATASETS = {
    "fashion-mnist-train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "train"),
    "fashion-mnist-test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "test"),
}
_CORRUPT = (OSError, EOFError, zlib.error)  # gzip.BadGzipFile is an OSError


@dataclass(frozen=True)
class IdxHeader:
    """What an IDX header promises: the item count, each item's shape, where the data starts."""

    magic: int
    count: int
    item_shape: tuple[int, ...]

    @property
    def header_bytes(self) -> int:
        return 4 * (1 + 1 + len(self.item_shape))

    @property
    def item_bytes(self) -> int:
        return int(np.prod(self.item_shape, dtype=np.int64)) if self.item_shape else 1


def _read_exact(f: IO[bytes], n: int, path: str, what: str) -> bytes:
    try:
        data = f.read(n)
    except _CORRUPT as exc:
        raise ValueError(f"{path}: corrupt file while reading {what} ({type(exc).__name__}: {exc})") from exc
    if len(data) != n:
        raise ValueError(f"{path}: truncated: {what} needs {n} bytes but only {len(data)} remain")
    return data


def _parse_header(f: IO[bytes], path: str, expect_magic: int) -> IdxHeader:
    head = _read_exact(f, 4, path, "the IDX magic number")
    magic = int(np.frombuffer(head, ">u4")[0])
    if magic != expect_magic:
        kind = "images (0x00000803)" if expect_magic == IDX_IMAGES_MAGIC else "labels (0x00000801)"
        with contextlib.suppress(*_CORRUPT):
            head += f.read(60)
        raise ValueError(f"{path}: bad magic number 0x{magic:08x}, expected IDX unsigned-byte {kind}; "
                         f"the file {describe(head)}")
    ndim = magic & 0xFF
    dims = np.frombuffer(_read_exact(f, 4 * ndim, path, "the IDX dimensions"), ">u4").astype(np.int64)
    return IdxHeader(magic, int(dims[0]), tuple(int(d) for d in dims[1:]))


def read_idx_header(path: str, expect_magic: int) -> IdxHeader:
    """The header of one IDX file (plain or .gz/.bz2/.xz), without reading its data."""
    with open_maybe_compressed(path) as f:
        return _parse_header(f, path, expect_magic)


def idx_count(images_path: str, labels_path: str) -> tuple[int, tuple[int, ...]]:
    """Number of (image, label) pairs and the image shape, after checking both headers agree
    (and, for uncompressed files, that the file sizes match what the headers promise)."""
    img = read_idx_header(images_path, IDX_IMAGES_MAGIC)
    lab = read_idx_header(labels_path, IDX_LABELS_MAGIC)
    if img.count != lab.count:
        raise ValueError(f"{images_path} holds {img.count} images but {labels_path} holds {lab.count} labels")
    for path, h in ((images_path, img), (labels_path, lab)):
        _check_plain_size(path, h)
    return img.count, img.item_shape


def _check_plain_size(path: str, h: IdxHeader) -> None:
    if compression_of(path) is not None:  # by content, as open_maybe_compressed decides
        return  # the size is known only after decompressing; truncation shows when a slice is read
    expected = h.header_bytes + h.count * h.item_bytes
    actual = os.path.getsize(path)
    if actual < expected:
        raise ValueError(f"{path}: truncated: the header promises {h.count} items ({expected} bytes) "
                         f"but the file has {actual} bytes")
    if actual > expected:
        raise ValueError(f"{path}: {actual - expected} unexpected bytes after the {h.count} items the header promises")


def _read_slice(path: str, expect_magic: int, offset: int, limit: int | None) -> np.ndarray:
    """Items ``offset .. offset+limit`` of one IDX file, shaped (n, *item_shape)."""
    with open_maybe_compressed(path) as f:
        h = _parse_header(f, path, expect_magic)
        if offset > h.count:
            raise ValueError(f"{path}: offset {offset} is past the {h.count} items in the file")
        n = h.count - offset if limit is None else min(limit, h.count - offset)
        try:
            f.seek(h.header_bytes + offset * h.item_bytes)
        except _CORRUPT as exc:
            why = f"{type(exc).__name__}: {exc}"
            raise ValueError(f"{path}: corrupt or truncated before item {offset} ({why})") from exc
        data = _read_exact(f, n * h.item_bytes, path, f"items {offset}..{offset + n - 1}")
    return np.frombuffer(data, np.uint8).reshape((n, *h.item_shape))


def read_idx(images_path: str, labels_path: str, offset: int = 0,
             limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images (n, rows, cols) uint8 and labels (n,) int64 from ``offset``, at most ``limit`` of them.

    Pure and Ray-free: the reader's tasks call it on their slice, and tests on whole files."""
    if offset < 0 or (limit is not None and limit < 0):
        raise ValueError(f"offset and limit must be >= 0 (got {offset}, {limit})")
    idx_count(images_path, labels_path)  # both headers checked against each other first
    images = _read_slice(images_path, IDX_IMAGES_MAGIC, offset, limit)
    labels = _read_slice(labels_path, IDX_LABELS_MAGIC, offset, limit).astype(np.int64)
    return images, labels


def dataset_files(name: str) -> tuple[str, str, str]:
    """(images path, labels path, split) of a named dataset shortcut."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known: {sorted(DATASETS)}")
    images_stem, labels_stem, split = DATASETS[name]
    root = Path(os.environ.get(FASHION_MNIST_ENV, FASHION_MNIST_DIR))
    paths = []
    for stem in (images_stem, labels_stem):
        found = [root / f"{stem}{ext}" for ext in (".gz", "") if (root / f"{stem}{ext}").is_file()]
        if not found:
            raise FileNotFoundError(f"{root / stem}[.gz] not found: install the Debian package "
                                    f"dataset-fashion-mnist or set {FASHION_MNIST_ENV} to a folder holding it")
        paths.append(str(found[0]))
    return paths[0], paths[1], split


class IdxImagesParams(Params):
    dataset: Literal["fashion-mnist-train", "fashion-mnist-test"] | None = Field(
        default=None, description=f"a named dataset instead of paths (Debian package dataset-fashion-mnist, "
                                  f"or the folder in ${FASHION_MNIST_ENV})")
    images: str | None = Field(default=None, description="IDX image file (magic 0x00000803), plain or .gz")
    labels: str | None = Field(default=None, description="IDX label file (magic 0x00000801), plain or .gz")
    split: str | None = Field(default=None, description="stored in the 'split' column; default: the "
                                                        "dataset's split; required with paths")
    offset: int = Field(default=0, ge=0, description="first item read, so that disjoint subsets can be read")
    limit: int | None = Field(default=None, ge=1, description="most items read")
    id_prefix: str | None = Field(default=None, description="row id = '{id_prefix}-{index:05d}' "
                                                            "(default: the dataset name, else the split)")

    @model_validator(mode="after")
    def _source(self):
        has_paths = self.images is not None or self.labels is not None
        if self.dataset is not None and has_paths:
            raise ValueError("give either dataset or images+labels, not both")
        if self.dataset is None and (self.images is None or self.labels is None):
            raise ValueError("give dataset, or both images and labels")
        if self.dataset is None and self.split is None:
            raise ValueError("split is required when reading files by path")
        return self


@register("idx_images", requires={"PIL": "images"})
class IdxImages(Reader[IdxImagesParams]):
    """Read an IDX image file and its label file (MNIST/Fashion-MNIST, plain or .gz) as PNG-bytes rows."""

    writes = COLUMNS[1:]

    def resolve(self) -> tuple[str, str, str, str]:
        """(images path, labels path, split, id prefix), absolute paths so workers can open them."""
        p = self.params
        if p.dataset is not None:
            images, labels, split = dataset_files(p.dataset)
            prefix = p.id_prefix or p.dataset
        else:
            images, labels, split = p.images, p.labels, ""
            prefix = p.id_prefix or p.split
        return os.path.abspath(images), os.path.abspath(labels), p.split or split, prefix

    def plan(self) -> list[dict[str, Any]]:
        """One item per read task: its slice of the files and how to name its rows."""
        p = self.params
        images, labels, split, prefix = self.resolve()
        count, _ = idx_count(images, labels)
        if p.offset >= count:
            raise ValueError(f"offset {p.offset} is past the {count} items of {images}")
        stop = count if p.limit is None else min(count, p.offset + p.limit)
        width = max(5, len(str(count - 1)))
        return [{"images": images, "labels": labels, "start": s, "stop": min(stop, s + ROWS_PER_TASK),
                 "split": split, "prefix": prefix, "width": width}
                for s in range(p.offset, stop, ROWS_PER_TASK)]

    def read(self, ctx: RunContext):
        return map_items(self.plan(), read_slice_tables, ctx)


def read_slice_tables(item: dict[str, Any]) -> Iterator[pa.Table]:
    """One planned slice as tables of at most ``ROWS_PER_TABLE`` rows."""
    start, stop = int(item["start"]), int(item["stop"])
    images, labels = read_idx(item["images"], item["labels"], start, stop - start)
    for lo in range(0, len(images), ROWS_PER_TABLE):
        hi = min(len(images), lo + ROWS_PER_TABLE)
        yield rows_table(images[lo:hi], labels[lo:hi], start + lo, item["split"], item["prefix"], int(item["width"]))


def rows_table(images: np.ndarray, labels: np.ndarray, first_index: int, split: str, prefix: str,
               width: int = 5) -> pa.Table:
    """Arrow rows (id, image PNG bytes, label, index, split) for consecutive items from ``first_index``."""
    index = np.arange(first_index, first_index + len(images), dtype=np.int64)
    table = pa.table({
        ID_COL: pa.array([f"{prefix}-{i:0{width}d}" for i in index], pa.string()),
        "image": pa.array([encode_png(img) for img in images], pa.binary()),
        "label": pa.array(labels.astype(np.int64), pa.int64()),
        "index": pa.array(index, pa.int64()),
        "split": pa.array([split] * len(images), pa.string()),
    })
    return combine(table, None)
