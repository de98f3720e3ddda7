"""Shared, Ray-free vocabulary: artifact types and the tombstone columns that keep the ledger exact.

Filters and failing rows do not vanish mid-stream: they keep flowing as *tombstones* (the row
with ``_rp_node`` set), later operators pass them through untouched, and each sink routes them
to ``rejects/<node>/`` / ``quarantine/<node>/`` of the node that set it.  The ledger is then an aggregation of what reached the sinks.
"""

from __future__ import annotations

from enum import Enum

import pyarrow as pa
import pyarrow.compute as pc


class ArtifactType(str, Enum):
    """What flows along an edge of the DAG."""

    DATASET = "Dataset"
    MODEL = "Model"
    REPORT = "Report"


# Tombstone columns (null on live rows).
NODE_COL = "_rp_node"  # id of the node that removed the row
KIND_COL = "_rp_kind"  # one of TombstoneKind
REASON_COL = "_rp_reason"  # ledger category: filter rule, error type, or the kept twin's id
DETAIL_COL = "_rp_detail"  # row-specific detail: stat values, error message
TOMBSTONE_COLS = (NODE_COL, KIND_COL, REASON_COL, DETAIL_COL)


class TombstoneKind(str, Enum):
    FILTERED = "filtered"
    ERROR = "error"
    DUPLICATE = "duplicate"


ID_COL = "id"
NO_SOURCE = "(none)"  # the source of rows dropped before a branch tagged them (settings.source_key)
STATS_COL = "stats"


def alive_mask(table: pa.Table) -> pa.ChunkedArray | None:
    """Boolean mask of live rows, or None when every row is alive (the common, cheap case)."""
    if NODE_COL not in table.column_names:
        return None
    col = table.column(NODE_COL)
    if col.null_count == len(col):
        return None
    return pc.is_null(col)


def with_tombstones(
    table: pa.Table, node: str, kind: TombstoneKind, reasons: list[str], details: list[str | None]
) -> pa.Table:
    """Mark every row of ``table`` as removed by ``node``."""
    n = table.num_rows
    cols = {
        NODE_COL: pa.array([node] * n, pa.string()),
        KIND_COL: pa.array([kind.value] * n, pa.string()),
        REASON_COL: pa.array(reasons, pa.string()),
        DETAIL_COL: pa.array(details, pa.string()),
    }
    for name, arr in cols.items():
        if name in table.column_names:
            table = table.set_column(table.schema.get_field_index(name), name, arr)
        else:
            table = table.append_column(name, arr)
    return table


def ensure_tombstone_columns(table: pa.Table) -> pa.Table:
    """Add all-null string tombstone columns where missing (or typed null), so batches concatenate."""
    for name in TOMBSTONE_COLS:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, pa.string()))
        elif table.schema.field(name).type != pa.string():
            idx = table.schema.get_field_index(name)
            table = table.set_column(idx, name, table.column(name).cast(pa.string()))
    return table


def strip_tombstone_columns(table: pa.Table) -> pa.Table:
    keep = [c for c in table.column_names if c not in TOMBSTONE_COLS]
    return table.select(keep)
