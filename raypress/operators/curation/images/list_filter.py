"""What Data-Juicer's image filters share: where a row's images come from, file sizes and image
sides, and the ``any_or_all`` rule that turns per-image verdicts into a row's.

Two row layouts carry images, and both are read the same way:

- Data-Juicer rows: ``images`` (``image_key``) is a list of image file paths, optionally with
  ``image_bytes`` (``image_bytes_key``), a parallel list of the encoded bytes.
- raypress's interleaved documents (``operators/shared/documents.py``): ``images`` holds one entry
  per position, null at text positions (skipped here), a URL or reference at image positions, with
  ``image_bytes`` and ``image_metadata`` parallel to it.

For each image, bytes win over the path (as in Data-Juicer); without bytes the path must be a
readable local file: raypress never fetches a URL.  Widths and heights come from the image header
(no pixel decoding, ``info``), or from ``image_metadata`` when an interleaved row already
records them; an image read from a path is counted as its EXIF orientation displays it, as in
Data-Juicer.  An image that cannot be read raises: the runner quarantines that row with the
message, where Data-Juicer fails the sample's batch.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Sequence, TypeVar

import pyarrow as pa
from PIL import Image
from pydantic import Field

from raypress.operators.base import Filter, Params
from raypress.operators.curation.images.info import UnreadableImage, read_image_info


# The params every Data-Juicer image filter takes (Data-Juicer's names and defaults).  No docstring:
# it would become the description of the ops' param schema.
class ImageListParams(Params):
    image_key: str = Field(default="images", description="column holding each row's list of images: file paths "
                           "(Data-Juicer rows) or an interleaved document's image references (null at text positions)")
    image_bytes_key: str = Field(default="image_bytes", description="column holding the images' encoded bytes, "
                                 "parallel to image_key; an image with bytes is read from them, not from its path")
    any_or_all: Literal["any", "all"] = Field(default="any", description="keep a row when any of its images "
                                              "passes ('any') or only when all pass ('all'); rows without images are kept")


IP = TypeVar("IP", bound=ImageListParams)


@dataclass(frozen=True)
class RowImage:
    """One image of a row: its path/reference, its bytes when the row has them, and what
    ``image_metadata`` records about it (interleaved rows only)."""

    ref: str
    data: bytes | None = None
    metadata: dict[str, Any] | None = None

    def file_size(self) -> int:
        """Bytes of the encoded image: its bytes' length, else its file's size."""
        if self.data is not None:
            return len(self.data)
        return os.path.getsize(self._local_path())

    def width_height(self) -> tuple[int, int]:
        """(width, height) in pixels, from the metadata, the bytes' header or the file's header."""
        meta = self.metadata or {}
        if meta.get("width") and meta.get("height"):
            return int(meta["width"]), int(meta["height"])
        from_file = self.data is None
        if from_file:
            with open(self._local_path(), "rb") as f:
                data = f.read()
        else:
            data = self.data
        try:
            info = read_image_info(data)
        except UnreadableImage as exc:
            raise UnreadableImage(f"image {self.ref!r}: {exc}") from None
        if from_file and _exif_turns_sideways(data):
            return info.height, info.width
        return info.width, info.height

    def _local_path(self) -> str:
        if "://" in self.ref and not self.ref.startswith("file://"):
            raise UnreadableImage(f"image {self.ref!r} has no bytes and is not a local file (raypress fetches "
                                  "nothing from the network): attach its bytes first, e.g. with attach_images")
        return self.ref.removeprefix("file://")


# EXIF orientations 5-8 mean "display turned by 90 degrees": width and height trade places.
_SIDEWAYS = {5, 6, 7, 8}
_ORIENTATION = 0x0112


def _exif_turns_sideways(data: bytes) -> bool:
    """Whether the image's EXIF orientation turns it sideways.  Data-Juicer opens an image *path*
    through HF ``datasets``, which applies the EXIF orientation (bytes it opens with Pillow as they
    are), so a path's sides are counted as displayed.  Header only: a PNG is asked only when it has
    an eXIf chunk (Pillow would decode its pixels to look for one)."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and b"eXIf" not in data:
        return False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(io.BytesIO(data)) as im:
                return im.getexif().get(_ORIENTATION) in _SIDEWAYS
    except Exception:  # noqa: BLE001 - unreadable EXIF: the header's sides stand
        return False


def row_images(table: pa.Table, image_key: str, image_bytes_key: str) -> list[list[RowImage]]:
    """Per row, its images in order (null entries, i.e. text positions, left out).  A table without
    ``image_key`` has no images: Data-Juicer keeps such rows, and so do the filters here."""
    names = table.column_names
    if image_key not in names:
        return [[] for _ in range(table.num_rows)]
    refs = table.column(image_key).to_pylist()
    blobs = table.column(image_bytes_key).to_pylist() if image_bytes_key in names else [None] * len(refs)
    # image_metadata runs parallel to the interleaved layout's own `images` column only
    interleaved = image_key == "images" and "image_metadata" in names
    metas = table.column("image_metadata").to_pylist() if interleaved else [None] * len(refs)
    rows = []
    for row_refs, row_blobs, row_metas in zip(refs, blobs, metas):
        if isinstance(row_refs, str):
            row_refs = [row_refs]
        row_refs, row_blobs, row_metas = row_refs or [], row_blobs or [], row_metas or []
        images = []
        for i, ref in enumerate(row_refs):
            if ref is None:
                continue
            data = row_blobs[i] if i < len(row_blobs) and isinstance(row_blobs[i], bytes) else None
            meta = row_metas[i] if i < len(row_metas) and isinstance(row_metas[i], dict) else None
            images.append(RowImage(ref, data, meta))
        rows.append(images)
    return rows


_SIZE = re.compile(r"\s*([0-9]+)\s*([A-Za-z]*)\s*", re.ASCII)
_UNIT_SHIFTS = {unit: shift for shift, names in ((10, ("kb", "kib")), (20, ("mb", "mib")), (30, ("gb", "gib")),
                                                 (40, ("tb", "tib")), (50, ("pb", "pib")), (60, ("eb", "eib")),
                                                 (70, ("zb", "zib")), (80, ("yb", "yib"))) for unit in names}


def size_to_bytes(size: str | int) -> int:
    """Data-Juicer's size strings in bytes: a whole number, optionally with a unit of powers of 1024
    ("124KB", "1TB", "3MiB"; case-insensitive; no unit: bytes).  Data-Juicer keeps only the digits
    of what it is given ("1.5MB" means 15 MB there), so anything but a whole number is refused here
    rather than read differently."""
    if isinstance(size, bool):
        raise ValueError(f"a size is a string like '124KB', not {size!r}")
    if isinstance(size, int):
        if size < 0:
            raise ValueError(f"a size cannot be negative: {size}")
        return size
    match = _SIZE.fullmatch(size)
    if not match:
        raise ValueError(f"{size!r} is not a size like '0', '124KB' or '1TB' (a whole number and a unit; "
                         "Data-Juicer would read only its digits, e.g. '1.5MB' as 15 MB: write '1536KB')")
    number, unit = int(match.group(1)), match.group(2).lower()
    if not unit:
        return number
    if unit not in _UNIT_SHIFTS:
        raise ValueError(f"{size!r}: unknown unit {match.group(2)!r}; expected one of KB, MB, GB, TB, PB, EB, ZB, "
                         "YB, KiB, MiB, GiB, TiB, PiB, EiB, ZiB, YiB (case-insensitive, powers of 1024)")
    return number << _UNIT_SHIFTS[unit]


def in_range(value: float, lo: float | None, hi: float | None) -> str | None:
    """Data-Juicer's closed interval: None when ``lo <= value <= hi``, else which side failed."""
    if lo is not None and value < lo:
        return "< min"
    if hi is not None and value > hi:
        return "> max"
    return None


class ImageListFilter(Filter[IP]):
    """A Data-Juicer image filter: stats are per-image lists (one per stat name), each image passes
    or fails, and ``any_or_all`` decides the row; a row without images is kept.

    A dropped row's reason names what failed (``image_sizes > max``), or ``{group} out of range``
    when its failing images failed in different ways."""

    group: ClassVar[str]  # the reason's subject when images failed in different ways

    @abstractmethod
    def image_stats(self, image: RowImage) -> tuple[Any, ...]:
        """The values of ``stat_names`` for one image."""

    @abstractmethod
    def image_reason(self, values: tuple[Any, ...]) -> str | None:
        """None when an image with these stat values passes, else why it fails."""

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.image_key,)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        rows = row_images(table, self.params.image_key, self.params.image_bytes_key)
        per_row = [[self.image_stats(image) for image in images] for images in rows]
        return {name: [[values[k] for values in row] for row in per_row] for k, name in enumerate(self.stat_names)}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        columns = [stats[name] for name in self.stat_names]
        use_any = self.params.any_or_all == "any"
        reasons: list[str | None] = []
        for row in zip(*columns):
            verdicts = [self.image_reason(values) for values in zip(*row)]
            if not verdicts or (any(v is None for v in verdicts) if use_any else all(v is None for v in verdicts)):
                reasons.append(None)
                continue
            failed = {v for v in verdicts if v is not None}
            reasons.append(failed.pop() if len(failed) == 1 else f"{self.group} out of range")
        return reasons
