"""``ray_image_deduplicator`` (Data-Juicer's Ray-mode image dedup) on ``image_deduplicator``'s machinery.

The same key (imagededup's ``method`` hash of each distinct image, concatenated) and the same
result for rows with images; two things differ from ``image_deduplicator``, as in Data-Juicer:

- every row without images hashes to the constant ``EMPTY``: they are one group, of which one row
  (the smallest id) is kept;
- there is no ``consider_text``; instead ``backend`` / ``redis_address`` say where Data-Juicer keeps
  the hashes it has seen (Ray actors or a Redis server).  raypress decides duplicates with a hash
  shuffle inside Ray either way: both values are accepted and mean the same, and no Redis server is
  used.

Data-Juicer's Ray variant keeps whichever copy a worker saw first; raypress keeps the smallest id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from raypress.operators.base import Deduplicator, RunContext
from raypress.operators.dedup.exact.image_keys import EMPTY_KEY
from raypress.operators.dedup.exact.ray_backend import RayBackendParams, note_backend
from raypress.operators.dedup.image_deduplicator import ImageKeyParams, dedup_by_image_keys
from raypress.operators.registry import register
from raypress.schema import ID_COL

if TYPE_CHECKING:  # pragma: no cover
    import ray.data


# Data-Juicer's params (backend, redis_address, method) and the image columns.  No docstring: it would
# become the description of the op's param schema.
class RayImageDedupParams(RayBackendParams, ImageKeyParams):
    pass


@register("ray_image_deduplicator", requires={"PIL": "images", "scipy": "images"})
class RayImageDeduplicator(Deduplicator[RayImageDedupParams]):
    """Exact dedup of rows by the perceptual hashes of their images (phash by default); rows without
    images are one group (Data-Juicer's EMPTY hash); each group keeps its smallest id."""

    reads = (ID_COL,)

    def columns_read(self) -> tuple[str, ...]:
        return (ID_COL, self.params.image_key)

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        note_backend(self.params, ctx)
        return dedup_by_image_keys(ds, ctx, self.params, empty_key=EMPTY_KEY)
