"""`image_blur_mapper`: Data-Juicer's op that blurs a row's images, each with probability ``p``.

As in Data-Juicer: the kernel is Pillow's ``ImageFilter.BLUR`` (``mean``), ``BoxBlur(radius)``
(``box``) or ``GaussianBlur(radius)`` (``gaussian``), applied to the image converted to RGB; an
image listed twice in a row is blurred once; ``__dj__source_file__`` records the row's original
image references; with ``save_dir`` each blurred image that came from a local file is written
there as ``<name>__dj_hash_#<hash>#<ext>`` (in the format its extension names, e.g. JPEG at
Pillow's default quality) and the row's reference points to it.

Where raypress differs, and why:
- which images are blurred is decided by a hash of the row's ``id`` and the image's reference, not
  by ``np.random``: the same rows are blurred on every run and every worker (resume, retries);
- without ``save_dir`` nothing is written next to the input files (Data-Juicer writes to
  ``<input dir>/__dj__produced_data__/``): the blurred image travels in the row, as encoded bytes in
  ``image_bytes_key`` (a column added when the input has none), which every raypress image op
  reads before the path; its reference stays as it was.  With ``save_dir`` and no such column, the
  files are the only copy, as in Data-Juicer;
- ``image_bytes_key`` holds encoded images (the format the reference's extension names, else the
  source's own format, else PNG), where Data-Juicer stores raw pixel buffers (``Image.tobytes``)
  that no decoder can open; images that are not blurred keep their bytes as they were;
- on an interleaved document, ``image_metadata`` of a blurred image gets the new sha256, format and
  sides, so that ``image_hash_dedup`` sees the blurred image;
- a file name's hash is the blurred content's (the same image gives the same file, written once,
  atomically), where Data-Juicer hashes the parameters, process id and time.
Images are read as Data-Juicer reads them (bytes first, else the local file with its EXIF
orientation); one that cannot be read quarantines its row.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import tempfile
from typing import Any, Literal

import pyarrow as pa
import xxhash
from PIL import Image, ImageFilter
from pydantic import Field

from raypress.operators.base import Mapper, Params
from raypress.operators.registry import register
from raypress.operators.shared.image_rows import ImageSource, image_sources
from raypress.schema import ID_COL

SOURCE_FILE_COL = "__dj__source_file__"  # Data-Juicer's Fields.source_file
_DJ_HASH = re.compile(r"__dj_hash_#(.*?)#")
_SCALE = float(2**64)


class ImageBlurParams(Params):
    p: float = Field(0.2, ge=0.0, le=1.0, description="probability that an image is blurred (decided by a hash of "
                     "the row's id and the image, the same on every run)")
    blur_type: Literal["mean", "box", "gaussian"] = Field("gaussian", description="kernel: Pillow's BLUR (mean), "
                                                          "BoxBlur(radius) or GaussianBlur(radius)")
    radius: float = Field(2, ge=0.0, description="radius of the box or gaussian kernel (px)")
    save_dir: str | None = Field(None, description="write blurred images that came from local files here and point "
                                 "the rows at them; unset: the blurred image travels as bytes in image_bytes_key")
    image_key: str = Field("images", description="column holding each row's list of images (paths, or an "
                           "interleaved document's references, null at text positions)")
    image_bytes_key: str = Field("image_bytes", description="column holding the images' encoded bytes, parallel to "
                                 "image_key; read before the path, and where blurred images are put")


def blur_kernel(blur_type: str, radius: float) -> ImageFilter.Filter:
    if blur_type == "mean":
        return ImageFilter.BLUR
    if blur_type == "box":
        return ImageFilter.BoxBlur(radius)
    return ImageFilter.GaussianBlur(radius)


def chance(row_key: str, ref: str) -> float:
    """A uniform number in [0, 1) fixed by the row and the image: blurred when below ``p``."""
    return xxhash.xxh64_intdigest(f"{row_key}\0{ref}".encode()) / _SCALE


def output_format(image: ImageSource) -> str:
    """Pillow's format for the blurred image: the one the reference's extension names (what
    Data-Juicer's ``save(path)`` picks), else the source's own, else PNG; always one Pillow can write."""
    Image.init()
    candidates = (Image.registered_extensions().get(os.path.splitext(image.ref)[1].lower()), image.format())
    return next((fmt for fmt in candidates if fmt and fmt in Image.SAVE), "PNG")


def encode(image: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt)
    return buf.getvalue()


def saved_name(ref: str, data: bytes, fmt: str) -> str:
    """Data-Juicer's produced-file name: ``<stem>__dj_hash_#<hash>#<ext>`` (an earlier op's hash replaced)."""
    stem, ext = os.path.splitext(os.path.basename(ref))
    match = _DJ_HASH.search(stem)
    if match:
        stem = stem[: match.start()]
    if Image.registered_extensions().get(ext.lower()) != fmt:
        ext = "." + fmt.lower()
    return f"{stem}__dj_hash_#{hashlib.sha256(data).hexdigest()[:32]}#{ext}"


def write_once(folder: str, name: str, data: bytes) -> str:
    """``folder/name`` holding ``data``; content-addressed, so a file already there is the same image."""
    path = os.path.join(folder, name)
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".blur-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path


@register("image_blur_mapper", requires={"PIL": "images"})
class ImageBlurMapper(Mapper[ImageBlurParams]):
    """Blur each image of a row with probability p (mean, box or gaussian kernel; Data-Juicer's op);
    blurred images go to image_bytes, or to files in save_dir."""

    def __init__(self, params: ImageBlurParams, artifacts: dict | None = None):
        super().__init__(params, artifacts)
        self.kernel = blur_kernel(params.blur_type, params.radius)

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.image_key,)

    def columns_written(self) -> tuple[str, ...]:
        p = self.params
        return (p.image_key,) + (() if p.save_dir else (p.image_bytes_key,)) + (SOURCE_FILE_COL,)

    def blurred(self, image: ImageSource) -> tuple[str, bytes, Image.Image, str]:
        """(new reference, encoded bytes, the blurred image, format) of one image."""
        picture = image.open().filter(self.kernel)
        fmt = output_format(image)
        data = encode(picture, fmt)
        ref = image.ref
        if self.params.save_dir:  # Data-Juicer writes a file for each image that is a local file
            path = None if "://" in ref and not ref.startswith("file://") else image.local_path()
            if path is not None and os.path.isfile(path):
                ref = write_once(self.params.save_dir, saved_name(path, data, fmt), data)
        return ref, data, picture, fmt

    def process_batch(self, table: pa.Table) -> pa.Table:
        p = self.params
        n = table.num_rows
        names = table.column_names
        if p.image_key not in names:  # no images: Data-Juicer records an empty source list
            return _put(table, SOURCE_FILE_COL, [[] for _ in range(n)], pa.list_(pa.string()))
        if not pa.types.is_list(table.schema.field(p.image_key).type):
            raise ValueError(f"{p.image_key!r} must be a list of image references, not "
                             f"{table.schema.field(p.image_key).type}")
        refs = table.column(p.image_key).to_pylist()
        blobs = table.column(p.image_bytes_key).to_pylist() if p.image_bytes_key in names else [None] * n
        sources = table.column(SOURCE_FILE_COL).to_pylist() if SOURCE_FILE_COL in names else [None] * n
        with_meta = p.image_key == "images" and "image_metadata" in names
        metas = table.column("image_metadata").to_pylist() if with_meta else [None] * n
        ids = table.column(ID_COL).to_pylist() if ID_COL in names else list(range(n))
        for r, images in enumerate(image_sources(table, p.image_key, p.image_bytes_key)):
            original = list(refs[r] or [])
            row_refs, row_blobs = list(original), _padded(blobs[r], len(original))
            row_meta = _padded(metas[r], len(original)) if with_meta else None
            done: dict[str, tuple[str, bytes, Image.Image, str] | None] = {}
            for image in images:
                if image.ref not in done:
                    done[image.ref] = self.blurred(image) if chance(str(ids[r]), image.ref) < p.p else None
                result = done[image.ref]
                if result is None:
                    continue
                row_refs[image.position], row_blobs[image.position] = result[0], result[1]
                if row_meta is not None:
                    row_meta[image.position] = _metadata(row_meta[image.position], *result[1:])
            sources[r] = _source_files(sources[r], original, row_refs)
            refs[r], blobs[r] = row_refs, row_blobs
            if with_meta:
                metas[r] = row_meta
        table = _put(table, p.image_key, refs, table.schema.field(p.image_key).type)
        if p.image_bytes_key in names:
            table = _put(table, p.image_bytes_key, blobs, table.schema.field(p.image_bytes_key).type)
        elif not p.save_dir:  # the blurred images have nowhere else to go (with save_dir: their files)
            table = _put(table, p.image_bytes_key, blobs, pa.list_(pa.binary()))
        if with_meta:
            table = _put(table, "image_metadata", metas, table.schema.field("image_metadata").type)
        return _put(table, SOURCE_FILE_COL, sources, pa.list_(pa.string()))


def _padded(values: list | None, length: int) -> list:
    values = list(values or [])
    return values + [None] * (length - len(values))


def _metadata(meta: dict[str, Any] | None, data: bytes, picture: Image.Image, fmt: str) -> dict[str, Any]:
    meta = dict(meta or {})
    meta.update(sha256=hashlib.sha256(data).hexdigest(), format=fmt.lower(), width=picture.width,
                height=picture.height)
    return meta


def _source_files(recorded: list | None, original: list, new: list) -> list:
    """Data-Juicer's ``__dj__source_file__``: the references before this op (an earlier op's record
    kept), and where a reference changed but the record differs from what it was, what it was."""
    sources = list(recorded) if recorded else list(original)
    for i, value in enumerate(original):
        if i < len(sources) and sources[i] != value and new[i] != value:
            sources[i] = value
    return sources


def _put(table: pa.Table, name: str, values: list, type_: pa.DataType) -> pa.Table:
    column = pa.array(values, type_)
    i = table.schema.get_field_index(name)
    return table.set_column(i, name, column) if i >= 0 else table.append_column(name, column)
