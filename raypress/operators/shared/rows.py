"""Build Arrow tables from parsed records, give rows ids, and turn unreadable records into tombstones.

Shared by the readers so that every one of them treats ids and bad records the same way.
"""

from __future__ import annotations

import contextlib

from collections import Counter
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from raypress.schema import ID_COL, TombstoneKind, ensure_tombstone_columns, with_tombstones

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError, TypeError, ValueError)
PREVIEW_CHARS = 200


def preview(text: str | bytes) -> str:
    """The start of a bad record, for the tombstone detail (enough to find it, not to copy it)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return repr(text[:PREVIEW_CHARS]) + ("..." if len(text) > PREVIEW_CHARS else "")


def tombstones(ids: list[str], node: str, reasons: list[str], details: list[str | None]) -> pa.Table:
    """Rows that carry only an id and why they were removed."""
    table = pa.table({ID_COL: pa.array(ids, pa.string())})
    return with_tombstones(table, node, TombstoneKind.ERROR, reasons=reasons, details=details)


def combine(live: pa.Table, dead: pa.Table | None) -> pa.Table:
    """Live rows and tombstones in one table with the tombstone columns always present."""
    live = ensure_tombstone_columns(live)
    if dead is None or dead.num_rows == 0:
        return live
    return pa.concat_tables([live, dead], promote_options="default")


def put_ids(table: pa.Table, ids: pa.Array | list[str]) -> pa.Table:
    """Make ``ids`` the first column, replacing any ``id`` column already there."""
    if ID_COL in table.column_names:
        table = table.drop_columns([ID_COL])
    arr = ids if isinstance(ids, (pa.Array, pa.ChunkedArray)) else pa.array(ids, pa.string())
    return table.add_column(0, ID_COL, arr)


def ids_from_column(table: pa.Table, id_key: str, fallback_ids: list[str], node: str) -> pa.Table:
    """Use column ``id_key`` (as strings) for ids; rows where it is missing become tombstones.

    ``fallback_ids`` (the generated path ids) name the tombstones, which still need an id."""
    if id_key not in table.column_names:
        col = pa.nulls(table.num_rows, pa.string())
    else:
        try:
            col = pc.cast(table.column(id_key), pa.string())
        except _ARROW_ERRORS as exc:
            raise ValueError(f"id_key {id_key!r} has type {table.column(id_key).type}, not castable to string") from exc
    missing = pc.is_null(col)
    if not pc.any(missing).as_py():
        return combine(put_ids(table, col), None)
    keep = pc.invert(missing)
    dead_ids = [i for i, m in zip(fallback_ids, missing.to_pylist()) if m]
    n = len(dead_ids)
    dead = tombstones(dead_ids, node, ["missing_id"] * n, [f"no value in column {id_key!r}"] * n)
    return combine(put_ids(table.filter(keep), col.filter(keep)), dead)


def records_to_table(records: list[dict[str, Any]]) -> tuple[pa.Table, dict[int, str]]:
    """Arrow table of the records that fit one schema, and ``{index: why}`` for those that did not.

    Arrow infers one type per column; when records disagree (``1`` here, ``"x"`` there) the type
    most records agree on wins and the others are reported, never silently coerced or dropped."""
    if not records:
        return pa.table({}), {}
    with contextlib.suppress(*_ARROW_ERRORS):  # the fast path; mixed types fall through
        return pa.Table.from_struct_array(pa.array(records)), {}
    names = list(dict.fromkeys(k for r in records for k in r))
    bad: dict[int, str] = {}
    fields = []
    for name in names:
        values = [r.get(name) for r in records]
        col_type = _column_type(values)
        for i, v in enumerate(values):
            if v is None or i in bad:
                continue
            if col_type is None or not _fits(v, col_type):
                bad[i] = f"column {name!r}: {type(v).__name__} value does not fit the column type {col_type}"
        fields.append(pa.field(name, col_type or pa.null()))
    good = [r for i, r in enumerate(records) if i not in bad]
    return pa.Table.from_pylist(good, schema=pa.schema(fields)), bad


def _column_type(values: list[Any]) -> pa.DataType | None:
    with contextlib.suppress(*_ARROW_ERRORS):  # Arrow agrees on one type: done
        return pa.array(values).type
    present = [v for v in values if v is not None]
    kinds = Counter(_kind(v) for v in present)
    majority = kinds.most_common(1)[0][0]
    candidates = [v for v in present if _kind(v) == majority]
    for sample in (candidates, candidates[:1]):
        try:
            return pa.array(sample).type
        except _ARROW_ERRORS:
            continue
    return None


def _kind(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "number"
    return type(value).__name__


def _fits(value: Any, col_type: pa.DataType) -> bool:
    try:
        pa.array([value], type=col_type)
        return True
    except _ARROW_ERRORS:
        return False


def with_row_ids(
    tables, source: str, node: str, columns: list[str] | None, id_key: str | None, offset: int = 0
):
    """Give each table of a columnar file stable ids ``{source}:{row}`` (or from ``id_key``);
    ``id_key`` is dropped again when it was read only for the ids."""
    for table in tables:
        ids = [f"{source}:{offset + i}" for i in range(table.num_rows)]
        offset += table.num_rows
        if id_key is None:
            yield combine(put_ids(table, ids), None)
            continue
        out = ids_from_column(table, id_key, ids, node)
        if columns is not None and id_key not in columns and id_key != ID_COL:
            out = out.drop_columns([id_key])
        yield out
