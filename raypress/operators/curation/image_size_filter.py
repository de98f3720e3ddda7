"""`image_size_filter`: Data-Juicer's filter on the file size of a row's images.

(raypress's MINT-1T op that removes images by their sides and aspect ratio, which carried this name
before, is ``remove_images_by_shape_mapper``.)
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from raypress.operators.curation.images.list_filter import (ImageListFilter, ImageListParams, RowImage, in_range,
                                                            size_to_bytes)
from raypress.operators.registry import register

_MINT_PARAMS = {"min_side", "max_side", "max_aspect_ratio", "max_aspect_ratio_pdf"}


class ImageSizeParams(ImageListParams):
    min_size: str | int = Field(default="0", description="keep images of at least this many bytes: a whole number "
                                "with an optional unit of powers of 1024 ('0', '124KB', '2MiB')")
    max_size: str | int = Field(default="1TB", description="keep images of at most this many bytes ('1TB': no limit "
                                "in practice)")

    @model_validator(mode="before")
    @classmethod
    def _mint_params_moved(cls, data: Any) -> Any:
        if isinstance(data, dict) and _MINT_PARAMS & set(data):
            raise ValueError(f"{sorted(_MINT_PARAMS & set(data))}: image_size_filter is Data-Juicer's filter on "
                             "image file sizes (min_size/max_size); MINT-1T's rules on image sides and aspect "
                             "ratio are the op remove_images_by_shape_mapper")
        return data

    @field_validator("min_size", "max_size")
    @classmethod
    def _size(cls, value: str | int) -> str | int:
        size_to_bytes(value)
        return value


@register("image_size_filter", requires={"PIL": "images"})
class ImageSizeFilter(ImageListFilter[ImageSizeParams]):
    """Keep rows whose images' file sizes are within [min_size, max_size] bytes, by any or all
    of their images (Data-Juicer's op; rows without images are kept).

    Sizes are the images' encoded bytes when the row carries them (``image_bytes``), else their
    files' sizes; stat ``image_sizes`` (bytes, per image)."""

    stat_names = ("image_sizes",)
    group = "image_sizes"

    def __init__(self, params: ImageSizeParams, artifacts: dict | None = None):
        super().__init__(params, artifacts)
        self.min_bytes = size_to_bytes(params.min_size)
        self.max_bytes = size_to_bytes(params.max_size)

    def image_stats(self, image: RowImage) -> tuple[int]:
        return (image.file_size(),)

    def image_reason(self, values: tuple[Any, ...]) -> str | None:
        side = in_range(values[0], self.min_bytes, self.max_bytes)
        return None if side is None else f"image_sizes {side}"
