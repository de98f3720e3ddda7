"""How rows are cut into Ray Data blocks between a segment's steps: enough blocks to keep every
CPU busy, few enough that per-block overhead does not dominate.

Why this exists: Ray Data fuses a reader's tasks with the streaming ops after it and bundles its
inputs (one row per file) up to the largest batch size of the fused ops, so a segment reading two
WARC files ran its whole chain -- extraction, language ID, the NSFW detector -- as one task on one
core (``bench/mint1t_html.py``: 24 s of a 33 s run).  Cutting the reader's output into blocks of
``settings.rows_per_block`` rows and capping the ops' batch size at that gives one task per block,
spread over every core.  The other side: a segment's sink writes one file per block, and the next
segment read those back as one block each; hundreds of tiny blocks made the dedup steps after the
MINT-1T filters 3-5x slower, so small files are joined again when read (``coalesce_tables``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

DEFAULT_ROWS_PER_BLOCK = 256
MAX_JOINED_BYTES = 64 << 20  # a joined block stops growing here, however few its rows


def cut_into_blocks(ds: "ray.data.Dataset", rows_per_block: int) -> "ray.data.Dataset":
    """``ds`` re-cut (streaming, no shuffle) into blocks of at most ``rows_per_block`` rows."""
    return ds.repartition(target_num_rows_per_block=rows_per_block)


def capped_batch_size(preferred: int | None, rows_per_block: int) -> int | None:
    """An op's batch size in a cut segment: its own, at most one block (None stays None: whole blocks)."""
    return None if preferred is None else min(preferred, rows_per_block)


def coalesce_tables(tables: list[pa.Table], min_rows: int, max_bytes: int = MAX_JOINED_BYTES) -> list[pa.Table]:
    """Consecutive tables joined until a block has ``min_rows`` rows or ``max_bytes`` bytes; order kept.

    A table already that large stays as it is; the last block may be smaller.  Schemas are unified
    the way Arrow does it; tables whose schemas cannot be unified stay in separate blocks: joining
    is an optimisation, never a cast."""
    groups = plan_joins([t.num_rows for t in tables], [t.nbytes for t in tables], [t.schema for t in tables],
                        min_rows, max_bytes)
    return [joined([tables[i] for i in group]) for group in groups]


def plan_joins(rows: list[int], sizes: list[int], schemas: list[pa.Schema], min_rows: int,
               max_bytes: int = MAX_JOINED_BYTES) -> list[list[int]]:
    """``coalesce_tables``'s grouping planned from metadata alone (rows, bytes and schema of each
    table), so the tables can be read and joined where they are loaded rather than in the driver.
    A group's schemas unify the way Arrow does it (a column missing or all-null in one table is
    null there); a table whose schema cannot join the group's starts a new group."""
    out: list[list[int]] = []
    group: list[int] = []
    unified: pa.Schema | None = None
    rows_in = size = 0
    for i, (n, b, schema) in enumerate(zip(rows, sizes, schemas)):
        if group:
            try:
                unified = pa.unify_schemas([unified, schema], promote_options="permissive")
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                out.append(group)
                group, rows_in, size = [], 0, 0
        if not group:
            unified = schema
        group.append(i)
        rows_in += n
        size += b
        if rows_in >= min_rows or size >= max_bytes:
            out.append(group)
            group, rows_in, size = [], 0, 0
    if group:
        out.append(group)
    return out


def joined(group: list[pa.Table]) -> pa.Table:
    """The tables of one planned group as one block."""
    return group[0] if len(group) == 1 else pa.concat_tables(group, promote_options="permissive").combine_chunks()
