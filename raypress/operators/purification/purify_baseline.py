"""``purify_baseline``: the training-free purifications BridgePure is compared against.

Why these four: they are the classic "shortcut squeezing" defences against availability attacks
-- JPEG compression and bit-depth reduction (ISS, Liu et al., ICML 2023), Gaussian blur and a
median filter -- and each needs no data and no model, so they bound what a learned purifier must
beat.  Each is a few lines over Pillow/numpy on the decoded uint8 image; the row keeps every
column, its ``image`` is replaced by the purified PNG and ``purified_by`` names the method.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa
from PIL import Image, ImageFilter
from pydantic import Field, model_validator

from raypress.image_codecs import decode_image, encode_png
from raypress.operators.base import Mapper, Params
from raypress.operators.purification.purifiers.rows import PURIFIED_BY, replace_images
from raypress.operators.registry import register
from raypress.schema import ID_COL

BaselineMethod = Literal["jpeg", "bit_depth", "gaussian_blur", "median"]
METHOD_PARAMS: dict[str, tuple[str, ...]] = {
    "jpeg": ("quality",), "bit_depth": ("bits",), "gaussian_blur": ("radius",), "median": ("size",),
}


def jpeg(image: np.ndarray, quality: int) -> np.ndarray:
    """Compress and decompress: JPEG's 8x8 DCT quantisation wipes out fine, high-frequency noise."""
    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="JPEG", quality=quality)
    buf.seek(0)
    with Image.open(buf) as img:  # JPEG keeps the mode it was saved in (L or RGB)
        return np.asarray(img, dtype=np.uint8)


def bit_depth(image: np.ndarray, bits: int) -> np.ndarray:
    """Keep ``2**bits`` grey levels (ISS's round(x * (2^b - 1)) / (2^b - 1) on [0, 1]): small
    perturbations fall inside one level and vanish."""
    levels = 2**bits - 1
    return (np.rint(image.astype(np.float64) / 255.0 * levels) / levels * 255.0).round().astype(np.uint8)


def gaussian_blur(image: np.ndarray, radius: float) -> np.ndarray:
    """Pillow's Gaussian blur (``radius`` is the standard deviation, in pixels)."""
    return np.asarray(Image.fromarray(image).filter(ImageFilter.GaussianBlur(radius)), dtype=np.uint8)


def median(image: np.ndarray, size: int) -> np.ndarray:
    """A ``size`` x ``size`` median filter: removes isolated pixels (salt noise, one-pixel shortcuts)."""
    return np.asarray(Image.fromarray(image).filter(ImageFilter.MedianFilter(size)), dtype=np.uint8)


class PurifyBaselineParams(Params):
    method: BaselineMethod = Field(description="jpeg | bit_depth | gaussian_blur | median")
    quality: int = Field(10, ge=1, le=95, description="jpeg: quality (ISS uses 10)")
    bits: int = Field(2, ge=1, le=7, description="bit_depth: bits kept per pixel (ISS uses 2 for grey images)")
    radius: float = Field(1.0, gt=0, description="gaussian_blur: standard deviation in pixels (1.0 smooths a "
                                                 "1-pixel pattern but keeps a 28x28 garment's outline)")
    size: int = Field(3, ge=3, description="median: odd window side")
    mode: Literal["L", "RGB"] = Field("L", description="PIL mode images are decoded to")

    @model_validator(mode="after")
    def _applies(self):
        if self.size % 2 == 0:
            raise ValueError(f"size must be odd, got {self.size}")
        every = {name for names in METHOD_PARAMS.values() for name in names}
        foreign = sorted((self.model_fields_set & every) - set(METHOD_PARAMS[self.method]))
        if foreign:
            raise ValueError(f"{foreign} do not apply to method {self.method!r} "
                             f"(it takes {list(METHOD_PARAMS[self.method])})")
        return self

    def transform(self) -> Callable[[np.ndarray], np.ndarray]:
        """The chosen method with its parameter bound."""
        if self.method == "jpeg":
            return lambda image: jpeg(image, self.quality)
        if self.method == "bit_depth":
            return lambda image: bit_depth(image, self.bits)
        if self.method == "gaussian_blur":
            return lambda image: gaussian_blur(image, self.radius)
        return lambda image: median(image, self.size)


@register("purify_baseline", requires={"PIL": "purify"})
class PurifyBaseline(Mapper[PurifyBaselineParams]):
    """Purify images without a model: JPEG, bit-depth reduction, Gaussian blur or a median filter."""

    reads = (ID_COL, "image")
    writes = ("image", PURIFIED_BY)
    batch_size: ClassVar[int | None] = 256

    def process_batch(self, table: pa.Table) -> pa.Table:
        p = self.params
        fn = p.transform()
        ids = [str(i) for i in table.column(ID_COL).to_pylist()]
        blobs = table.column("image").to_pylist()
        pngs = [encode_png(fn(decode_image(blob, rid, size=None, mode=p.mode))) for blob, rid in zip(blobs, ids)]
        return replace_images(table, pngs, p.method)
