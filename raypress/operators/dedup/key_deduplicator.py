"""key_deduplicator: rows that share the values of some columns are copies; keep one of them.

Why: some sources re-send the same record.  EDGAR re-disseminates corrected filings, so the same
``(accession, filename)`` document can arrive several times, the later copies more complete; BeanCounter
collapses them before any text-based dedup.  ``keep: longest`` keeps the copy with the longest
``text_key`` (the most complete), ties and ``keep: smallest_id`` going to the smallest id, so the
answer depends neither on input order nor on partitioning.  A row with a null in a key column is
not a copy of anything (it is kept), except in the columns listed in ``null_matches``, where null
is a value like any other (EDGAR's 1990s documents have no file name: their sequence number and
accession identify them).  Each dropped copy names the kept twin's id and the key.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from raypress.operators.base import Deduplicator, Params, RunContext
from raypress.operators.dedup.exact.by_key import keep_smallest_id
from raypress.operators.registry import register
from raypress.schema import ID_COL, alive_mask, ensure_tombstone_columns

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

KEY_COL = "_rp_copy_key"
LENGTH_COL = "_rp_copy_length"


class KeyDedupParams(Params):
    keys: list[str] = Field(min_length=1, description="columns whose values together identify one record")
    keep: Literal["longest", "smallest_id"] = Field(
        "longest", description="which copy stays: the longest text_key (most complete), or the smallest id")
    text_key: str = Field("text", description="column measured by keep: longest")
    null_matches: list[str] = Field(default_factory=list, description="key columns where null equals null "
                                    "(elsewhere a null key means the row is no copy of anything)")
    num_partitions: int | None = Field(None, ge=1, description="partitions of the shuffle (default: by input size)")


def add_copy_key(table: pa.Table, keys: list[str], text_key: str, longest: bool,
                 null_matches: list[str] = ()) -> pa.Table:
    """The key column (the key values as JSON; a row with a null key, or a tombstone, keyed by its
    own id so it matches nothing) and, for ``longest``, the length column."""
    table = ensure_tombstone_columns(table)
    alive = alive_mask(table)
    live = np.ones(table.num_rows, bool) if alive is None else alive.to_numpy(zero_copy_only=False)
    missing = [k for k in keys if k not in table.column_names]
    if missing and live.any():
        raise ValueError(f"key_deduplicator: the input has no column {missing[0]!r} "
                         f"(columns: {', '.join(table.column_names)})")
    values = list(zip(*(table.column(k).to_pylist() for k in keys))) if not missing else [()] * table.num_rows
    ids = table.column(ID_COL).to_pylist()
    must = [k not in null_matches for k in keys]
    rendered = [json.dumps(list(v), default=str)
                if ok and not any(x is None and m for x, m in zip(v, must)) else "\0" + str(i)
                for v, i, ok in zip(values, ids, live)]
    table = table.append_column(KEY_COL, pa.array(rendered, pa.string()))
    if longest:
        lengths = pc.utf8_length(table.column(text_key)).fill_null(0) if text_key in table.column_names \
            else pa.array(np.zeros(table.num_rows, np.int64))
        table = table.append_column(LENGTH_COL, pc.cast(lengths, pa.int64()))
    return table


@register("key_deduplicator")
class KeyDeduplicator(Deduplicator[KeyDedupParams]):
    """Rows with equal values in ``keys`` are copies: keep the longest (or smallest-id) one."""

    def columns_read(self) -> tuple[str, ...]:
        p = self.params
        return tuple(dict.fromkeys([*p.keys, *([p.text_key] if p.keep == "longest" else [])]))

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        p = self.params
        longest = p.keep == "longest"
        keyed = ds.map_batches(add_copy_key, batch_format="pyarrow",
                               fn_kwargs=dict(keys=p.keys, text_key=p.text_key, longest=longest,
                                              null_matches=p.null_matches))
        return keep_smallest_id(keyed, KEY_COL, ctx.node_id, detail_key="key",
                                num_partitions=p.num_partitions or ctx.shuffle_partitions(),
                                prefer=LENGTH_COL if longest else None)
