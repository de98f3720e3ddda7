"""A row's images as Data-Juicer's image ops load them, for ops of any domain (dedup, curation).

Rows name their images in a list column (``image_key``, Data-Juicer's ``images``): file paths in
Data-Juicer rows, and in raypress's interleaved documents one entry per position, null at text
positions.  A parallel list (``image_bytes_key``) may hold the encoded bytes; an image with bytes
is read from them, otherwise from its path, which must be a local file (raypress fetches nothing).

Loading follows Data-Juicer's ``load_image``: bytes are opened as they are, a path as HF
``datasets`` opens it (its EXIF orientation applied), then both are converted to RGB.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import pyarrow as pa
from PIL import Image, ImageOps


class ImageLoadError(ValueError):
    """An image of the row cannot be read: no bytes and no local file, or not an image."""


@dataclass(frozen=True)
class ImageSource:
    """One image of a row: where it sits in the row's list, its reference, its bytes if carried."""

    position: int
    ref: str
    data: bytes | None = None

    def open(self) -> Image.Image:
        """The image in RGB (see the module's docstring); ImageLoadError naming it otherwise."""
        try:
            if self.data is not None:
                with Image.open(io.BytesIO(self.data)) as im:
                    return im.convert("RGB")
            with Image.open(self.local_path()) as im:
                return ImageOps.exif_transpose(im).convert("RGB")
        except ImageLoadError:
            raise
        except Exception as exc:  # noqa: BLE001 - Pillow's plugins raise many types on bad input
            raise ImageLoadError(f"image {self.ref!r}: {type(exc).__name__}: {exc}") from None

    def local_path(self) -> str:
        if "://" in self.ref and not self.ref.startswith("file://"):
            raise ImageLoadError(f"image {self.ref!r} has no bytes and is not a local file (raypress fetches "
                                 "nothing from the network): attach its bytes first, e.g. with attach_images")
        return self.ref.removeprefix("file://")

    def format(self) -> str | None:
        """Pillow's name of the encoded format ("PNG", "JPEG"...), read from the header; None if unknown."""
        try:
            source = io.BytesIO(self.data) if self.data is not None else self.local_path()
            with Image.open(source) as im:
                return im.format
        except Exception:  # noqa: BLE001
            return None


def image_sources(table: pa.Table, image_key: str, image_bytes_key: str) -> list[list[ImageSource]]:
    """Per row, its images in list order (null entries left out).  A table without ``image_key`` has
    no images; a single string there is a list of one."""
    if image_key not in table.column_names:
        return [[] for _ in range(table.num_rows)]
    refs = table.column(image_key).to_pylist()
    has_bytes = image_bytes_key in table.column_names
    blobs = table.column(image_bytes_key).to_pylist() if has_bytes else [None] * table.num_rows
    out: list[list[ImageSource]] = []
    for row_refs, row_blobs in zip(refs, blobs):
        row_refs = [row_refs] if isinstance(row_refs, str) else (row_refs or [])
        row_blobs = row_blobs if isinstance(row_blobs, list) else []
        out.append([ImageSource(i, ref, _bytes_at(row_blobs, i)) for i, ref in enumerate(row_refs) if ref is not None])
    return out


def _bytes_at(blobs: list, i: int) -> bytes | None:
    """Data-Juicer's rule: bytes at the image's index when there are some, else None (read the path)."""
    return blobs[i] if i < len(blobs) and isinstance(blobs[i], bytes) else None


def distinct_by_ref(images: list[ImageSource]) -> list[ImageSource]:
    """The first image of each reference, in order: Data-Juicer loads a row's images into a dict
    keyed by path, so a path listed twice is loaded (and hashed, blurred...) once."""
    seen: set[str] = set()
    out = []
    for image in images:
        if image.ref not in seen:
            seen.add(image.ref)
            out.append(image)
    return out
