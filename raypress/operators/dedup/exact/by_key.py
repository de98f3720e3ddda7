"""Exact dedup of a whole Ray Dataset by a key column: each group keeps its smallest ``id``.

Why this shape: a keyed hash shuffle (``Dataset.repartition(n, keys=[key])``) sends every row
of a key to one partition, and Ray emits each partition as one unsplit block (its hash-shuffle
reducers set ``disallow_block_splitting``: the same guarantee ``groupby().map_groups()`` rests
on).  So a ``map_batches(batch_size=None)`` call sees whole groups and picks the winners of all
of them at once with vectorised Arrow ops, instead of ``map_groups``' one Python call per group
(almost every group is a single row).  Nothing is pulled into the driver.

The winner is the smallest ``id``, so the result depends neither on block order nor on the
number of partitions.  Rows that are already tombstones pass through untouched and never take
part in a group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raypress.operators.base import json_detail
from raypress.schema import (
    ID_COL,
    TombstoneKind,
    alive_mask,
    ensure_tombstone_columns,
    with_tombstones,
)

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

KeyRender = Callable[[object], str]


def _hex(value: object) -> str:
    return value.hex() if isinstance(value, bytes) else str(value)


def mark_duplicates(
    table: pa.Table, key: str, node: str, detail_key: str = "key", render: KeyRender = _hex,
    prefer: str | None = None,
) -> pa.Table:
    """Within ``table``: keep the smallest-``id`` live row per ``key`` (with ``prefer``, a numeric
    column: the row with the largest value, then the smallest id); tombstone the others.

    Each duplicate gets reason = the kept row's id and detail ``{detail_key: rendered key}``.
    The ``key`` (and ``prefer``) columns are dropped from the result; every row of a key must be
    in ``table``."""
    table = ensure_tombstone_columns(table)
    alive = alive_mask(table)
    if alive is None:
        parts = _mark_live(table, key, node, detail_key, render, prefer)
    else:
        dead = table.filter(pc.invert(alive))
        parts = _mark_live(table.filter(alive), key, node, detail_key, render, prefer) + [dead]
    out = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
    return out.drop_columns([key] + ([prefer] if prefer else []))


def _mark_live(
    live: pa.Table, key: str, node: str, detail_key: str, render: KeyRender, prefer: str | None = None
) -> list[pa.Table]:
    """Sort by (key, [-prefer,] id): the first row of each key run is the winner."""
    n = live.num_rows
    if n < 2:
        return [live]
    order = [(key, "ascending")] + ([(prefer, "descending")] if prefer else []) + [(ID_COL, "ascending")]
    live = live.sort_by(order)
    keys = live.column(key).combine_chunks()
    first = np.ones(n, dtype=bool)
    first[1:] = pc.not_equal(keys.slice(1), keys.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    if first.all():
        return [live]
    head = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    dup_rows = np.flatnonzero(~first)
    kept_ids = live.column(ID_COL).take(pa.array(head[dup_rows])).to_pylist()
    dup_keys = keys.take(pa.array(dup_rows)).to_pylist()
    dups = with_tombstones(
        live.take(pa.array(dup_rows)),
        node,
        TombstoneKind.DUPLICATE,
        reasons=kept_ids,
        details=[json_detail({detail_key: render(k)}) for k in dup_keys],
    )
    return [live.filter(pa.array(first)), dups]


def _keyed_repartition_supported(ds: "ray.data.Dataset") -> bool:
    from ray.data.context import ShuffleStrategy

    hash_based = (ShuffleStrategy.HASH_SHUFFLE, ShuffleStrategy.SHUFFLE_V2)
    return ds.context.shuffle_strategy in hash_based


def keep_smallest_id(
    ds: "ray.data.Dataset",
    key: str,
    node: str,
    *,
    detail_key: str = "key",
    num_partitions: int | None = None,
    prefer: str | None = None,
) -> "ray.data.Dataset":
    """Shuffle ``ds`` by ``key`` and run :func:`mark_duplicates` on each whole partition (``prefer``:
    see there; the name is kept for the common case).

    Under a sort-based shuffle strategy (where Ray refuses keyed repartitions) the same function
    runs through ``groupby().map_groups()``: slower (one call per group), same result."""
    kwargs = dict(key=key, node=node, detail_key=detail_key, prefer=prefer)
    return map_key_partitions(ds, key, mark_duplicates, kwargs, num_partitions)


def map_key_partitions(
    ds: "ray.data.Dataset",
    key: str,
    fn: Callable[..., pa.Table],
    fn_kwargs: dict,
    num_partitions: int | None = None,
) -> "ray.data.Dataset":
    """Shuffle ``ds`` by ``key`` and call ``fn(table, **fn_kwargs)`` on tables that each hold every
    row of their keys (a whole hash partition, one block for ``num_partitions == 1``, or one group
    under a sort-based shuffle strategy)."""
    if num_partitions == 1:  # small input: one block holds every group; no shuffle actors needed
        return ds.repartition(1).map_batches(
            fn, batch_size=None, batch_format="pyarrow", fn_kwargs=fn_kwargs
        )
    if not _keyed_repartition_supported(ds):
        return ds.groupby(key, num_partitions=num_partitions).map_groups(
            fn, batch_format="pyarrow", fn_kwargs=fn_kwargs
        )
    n = num_partitions or ds.context.default_hash_shuffle_parallelism
    return ds.repartition(n, keys=[key]).map_batches(
        fn, batch_size=None, batch_format="pyarrow", fn_kwargs=fn_kwargs
    )
