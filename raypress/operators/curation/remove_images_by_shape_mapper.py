"""`remove_images_by_shape_mapper`: MINT-1T's rules on image sides and aspect ratio, applied to
single images.

MINT-1T drops the image, not the page, so this op is a Mapper that removes image positions; a
later ``image_count_filter`` then drops the documents it left without images.  (It was called
``image_size_filter`` until that name went to Data-Juicer's op, which filters rows by file size.)
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import Field, PositiveFloat, PositiveInt

from raypress.operators.base import Mapper, Params
from raypress.operators.curation.images.info import ImageInfo, image_info
from raypress.operators.registry import register
from raypress.operators.shared.documents import CONTENT_COLUMNS, replace_documents, table_to_documents


class RemoveImagesByShapeParams(Params):
    min_side: PositiveInt = Field(default=150, description="remove images whose width or height is below this (px)")
    max_side: PositiveInt = Field(default=20_000, description="remove images whose width or height is above this (px)")
    max_aspect_ratio: PositiveFloat = Field(
        default=2.0, description="remove images whose long side / short side exceeds this (MINT-1T HTML: 2)"
    )
    max_aspect_ratio_pdf: PositiveFloat | None = Field(
        default=3.0,
        description="the aspect-ratio limit for documents whose source is 'pdf' (MINT-1T: 3); "
        "None: max_aspect_ratio applies to them too",
    )


@register("remove_images_by_shape_mapper", requires={"PIL": "curation"})
class RemoveImagesByShapeMapper(Mapper[RemoveImagesByShapeParams]):
    """Remove images with a side outside [min_side, max_side] px or a long/short side ratio above
    max_aspect_ratio (2 for HTML, 3 for PDF), and images whose bytes are not a readable image.

    Sizes come from ``image_metadata`` height/width when set, else from the image header (no
    pixel decoding, ``images.info``); what a header gives fills the null fields of
    ``image_metadata`` (height, width, format, sha256).  Images with neither a size nor bytes
    are removed too: they cannot be checked.  Adds ``images_removed_shape`` (per document)."""

    reads = CONTENT_COLUMNS + ("source",)
    writes = CONTENT_COLUMNS + ("images_removed_shape",)

    def image_ok(self, width: int, height: int, source: str | None) -> bool:
        p = self.params
        if min(width, height) < p.min_side or max(width, height) > p.max_side:
            return False
        limit = p.max_aspect_ratio_pdf if source == "pdf" and p.max_aspect_ratio_pdf is not None else p.max_aspect_ratio
        return max(width, height) / min(width, height) <= limit

    def process_batch(self, table: pa.Table) -> pa.Table:
        docs = table_to_documents(table)
        removed = []
        for doc in docs:
            keep = []
            for i, ref in enumerate(doc.images):
                if ref is None:
                    keep.append(True)
                    continue
                meta = doc.image_metadata[i]
                size = _known_size(meta)
                if size is None:
                    info = image_info(doc.image_bytes[i])
                    if info is not None:
                        size = info.width, info.height
                        doc.image_metadata[i] = _with_info(meta, info)
                keep.append(size is not None and self.image_ok(size[0], size[1], doc.source))
            removed.append(keep.count(False))
            doc.keep_positions(keep)
        out = replace_documents(table, docs)
        column = pa.array(removed, pa.int64())
        idx = out.schema.get_field_index("images_removed_shape")
        if idx >= 0:
            return out.set_column(idx, "images_removed_shape", column)
        return out.append_column("images_removed_shape", column)


def _known_size(meta: dict[str, Any] | None) -> tuple[int, int] | None:
    if not meta or not meta.get("width") or not meta.get("height"):
        return None
    return int(meta["width"]), int(meta["height"])


def _with_info(meta: dict[str, Any] | None, info: ImageInfo) -> dict[str, Any]:
    """``meta`` completed with what the header gave (its null fields only), so later ops (image
    dedup, writers) need not read the image again."""
    updated = dict(meta or {})
    for name, value in info.metadata().items():
        if updated.get(name) is None:
            updated[name] = value
    return updated
