"""`image_shape_filter`: Data-Juicer's filter on the width and height of a row's images."""

from __future__ import annotations

import sys
from typing import Any

from pydantic import Field

from raypress.operators.curation.images.list_filter import ImageListFilter, ImageListParams, RowImage, in_range
from raypress.operators.registry import register


class ImageShapeParams(ImageListParams):
    min_width: int = Field(default=1, description="keep images at least this wide (px)")
    max_width: int = Field(default=sys.maxsize, description="keep images at most this wide (px)")
    min_height: int = Field(default=1, description="keep images at least this high (px)")
    max_height: int = Field(default=sys.maxsize, description="keep images at most this high (px)")


@register("image_shape_filter", requires={"PIL": "images"})
class ImageShapeFilter(ImageListFilter[ImageShapeParams]):
    """Keep rows whose images' widths are within [min_width, max_width] and heights within
    [min_height, max_height], by any or all of their images (Data-Juicer's op; rows without images
    are kept).

    Sides come from the image header (or ``image_metadata``); stats ``image_width`` and
    ``image_height`` (px, per image)."""

    stat_names = ("image_width", "image_height")
    group = "image_shape"

    def image_stats(self, image: RowImage) -> tuple[int, int]:
        return image.width_height()

    def image_reason(self, values: tuple[Any, ...]) -> str | None:
        p = self.params
        width, height = values
        side = in_range(width, p.min_width, p.max_width)
        if side is not None:
            return f"image_width {side}"
        side = in_range(height, p.min_height, p.max_height)
        return None if side is None else f"image_height {side}"
