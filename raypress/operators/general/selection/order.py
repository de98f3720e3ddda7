"""The order rows are ranked in, and the cut after the first k rows of it.

Data-Juicer ranks with ``heapq.nlargest`` / ``nsmallest`` over row positions and ``sorted`` over
groups, all stable: of equal values, the row (or group) first in the dataset comes first, in
either direction.  A Ray Dataset has no stable position, so here the input order is read from the
ids: readers name rows ``<path>:<line>``, and :func:`order_keys` makes every run of digits compare
as a number (``data.jsonl:9`` before ``data.jsonl:10``), then the id itself breaks what is left.
The result is a total order that does not depend on how the rows were split into blocks.

A selection is then "the first k rows in the order (value ascending or descending, order key
ascending or descending)": :func:`first_rows` finds the last row inside with one sort of the slim
projection, and :class:`Cut` tells any row whether it is inside from that one (value, order key)
pair, so the marking pass needs nothing else.  (Two live rows with the same id and the same value
compare equal: both are inside or both out, which can move the count by one.)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

VALUE_COL = "_rp_value"
ORDER_COL = "_rp_order"

_DIGITS = re.compile(r"[0-9]+")


def _padded(match: re.Match) -> str:
    digits = match.group().lstrip("0") or "0"
    return f"{len(digits):03d}{digits}"


def order_key(row_id: str) -> str:
    """``row_id`` with each run of digits prefixed by its length (numbers compare as numbers), then
    a NUL and the id itself (unique, so no two ids share a key)."""
    return _DIGITS.sub(_padded, row_id) + "\0" + row_id


def order_keys(ids: pa.ChunkedArray | pa.Array) -> pa.Array:
    text = pc.cast(ids, pa.string()).to_pylist()
    return pa.array([order_key(t or "") for t in text], pa.string())


def draws(ids: pa.ChunkedArray | pa.Array, seed: int) -> np.ndarray:
    """A reproducible pseudo-random int64 per row from its id and the run's seed."""
    text = pc.cast(ids, pa.string()).to_pylist()
    s = seed % 2**64
    return np.array([xxhash.xxh64_intdigest((t or "").encode(), seed=s) >> 1 for t in text], dtype=np.int64)


@dataclass(frozen=True)
class Cut:
    """The first rows of an order: by value (descending when ``value_desc``), then by order key
    (descending when ``order_desc``).  ``last`` is the (value, order key) of the last row inside;
    without it, every row is inside (``everything``) or none is."""

    value_desc: bool = False
    order_desc: bool = False
    last: tuple[Any, str] | None = None
    everything: bool = True

    def inside(self, values: np.ndarray, orders: pa.Array | pa.ChunkedArray) -> np.ndarray:
        """Per row: at or before ``last`` in the order."""
        if self.last is None:
            return np.full(len(values), self.everything)
        value, order = self.last
        before = values > value if self.value_desc else values < value
        same = values == value
        if not same.any():
            return before
        scalar = pa.scalar(order, pa.string())
        order_ok = (pc.greater_equal if self.order_desc else pc.less_equal)(orders, scalar)
        return before | (same & order_ok.to_numpy(zero_copy_only=False))


def _direction(desc: bool) -> str:
    return "descending" if desc else "ascending"


def first_rows(table: pa.Table, k: int, value_desc: bool = False, order_desc: bool = False) -> Cut:
    """The cut holding the first ``k`` rows of ``table`` (columns ``VALUE_COL``, ``ORDER_COL``)."""
    if k >= table.num_rows:
        return Cut(value_desc, order_desc, None, True)
    if k <= 0:
        return Cut(value_desc, order_desc, None, False)
    ranked = pc.sort_indices(table, sort_keys=[(VALUE_COL, _direction(value_desc)),
                                               (ORDER_COL, _direction(order_desc))])
    i = ranked[k - 1].as_py()
    return Cut(value_desc, order_desc, (table.column(VALUE_COL)[i].as_py(), table.column(ORDER_COL)[i].as_py()),
               False)


def inside(table: pa.Table, cut: Cut) -> np.ndarray:
    """``cut.inside`` over the rows of a projection."""
    return cut.inside(table.column(VALUE_COL).to_numpy(), table.column(ORDER_COL))
