"""``hash_split_filter``: a deterministic train / held-out split as a Filter.

Why a filter and not a random sample: the same row lands in the same split on every run and on
every worker (a hash of its id and the seed, no shared state), the two branches of a pipeline
(`keep: sample` and `keep: rest`) partition the input exactly, and each dropped row is in the
ledger with the reason ``held_out`` / ``not_sampled``, so nothing is lost.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Sequence

import pyarrow as pa
import xxhash
from pydantic import Field

from raypress.operators.base import Filter, Params
from raypress.operators.registry import register

_SCALE = float(2**64)


class HashSplitParams(Params):
    fraction: float = Field(0.1, gt=0.0, lt=1.0, description="share of rows in the sample")
    keep: Literal["sample", "rest"] = Field("sample", description="which side of the split this node keeps")
    key: str = Field("id", description="column hashed to place a row (a stable row id)")
    seed: int = Field(0, ge=0, description="another seed gives another split")


@register("hash_split_filter")
class HashSplitFilter(Filter[HashSplitParams]):
    """Keep a deterministic `fraction` of rows by a hash of their id (`keep: sample`) or the rest."""

    stat_names: ClassVar[tuple[str, ...]] = ("split_position",)

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.key,)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        p = self.params
        keys = table.column(p.key).to_pylist()
        return {"split_position": [xxhash.xxh64_intdigest(str(k).encode(), seed=p.seed) / _SCALE for k in keys]}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        p = self.params
        in_sample = [position < p.fraction for position in stats["split_position"]]
        if p.keep == "sample":
            return [None if inside else "not_sampled" for inside in in_sample]
        return ["held_out" if inside else None for inside in in_sample]
