"""`image_count_filter`: MINT-1T's rule on how many images a document has (1 to 30).

Counting runs on the Arrow list column directly (no per-row Python), so the filter costs little
even where it runs after ``remove_images_by_shape_mapper`` to drop documents that lost all their images.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, NonNegativeInt

from raypress.operators.base import Filter, Params, range_reason
from raypress.operators.registry import register


def image_counts(table: pa.Table) -> list[int]:
    """Non-null entries of each row's ``images`` list (a null list counts 0), vectorised."""
    col = table.column("images").combine_chunks()
    if len(col) == 0:
        return []
    parents = pc.list_parent_indices(col).to_numpy()
    valid = pc.is_valid(pc.list_flatten(col)).to_numpy(zero_copy_only=False)
    return np.bincount(parents[valid], minlength=len(col)).tolist()


class ImageCountParams(Params):
    min_images: NonNegativeInt = Field(default=1, description="keep documents with at least this many images")
    max_images: NonNegativeInt = Field(default=30, description="keep documents with at most this many images")


@register("image_count_filter")
class ImageCountFilter(Filter[ImageCountParams]):
    """Keep documents with min_images <= number of images <= max_images (MINT-1T: 1-30)."""

    reads = ("images",)
    stat_names = ("image_count",)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        return {"image_count": image_counts(table)}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        lo, hi = self.params.min_images, self.params.max_images
        return [range_reason(v, "image_count", lo, hi) for v in stats["image_count"]]
