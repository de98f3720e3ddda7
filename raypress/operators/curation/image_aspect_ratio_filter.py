"""`image_aspect_ratio_filter`: Data-Juicer's filter on the width/height ratio of a row's images."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from raypress.operators.curation.images.list_filter import ImageListFilter, ImageListParams, RowImage, in_range
from raypress.operators.registry import register


class ImageAspectRatioParams(ImageListParams):
    min_ratio: float = Field(default=0.333, description="keep images whose width / height is >= min_ratio")
    max_ratio: float = Field(default=3.0, description="keep images whose width / height is <= max_ratio")


@register("image_aspect_ratio_filter", requires={"PIL": "images"})
class ImageAspectRatioFilter(ImageListFilter[ImageAspectRatioParams]):
    """Keep rows whose images' aspect ratios (width / height) are within [min_ratio, max_ratio], by
    any or all of their images (Data-Juicer's op; rows without images are kept).

    Sides come from the image header (or ``image_metadata``); stat ``aspect_ratios`` (per image)."""

    stat_names = ("aspect_ratios",)
    group = "aspect_ratios"

    def image_stats(self, image: RowImage) -> tuple[float]:
        width, height = image.width_height()
        return (width / height,)

    def image_reason(self, values: tuple[Any, ...]) -> str | None:
        side = in_range(values[0], self.params.min_ratio, self.params.max_ratio)
        return None if side is None else f"aspect_ratios {side}"
