"""A small table sent to every worker of a streamed pass and looked up by row id there.

Why: a global op decides on slim rows (ids, keys) and then marks the input rows in a second pass
streamed over the input, so the rows' text never travels through the object store.  Each worker
of that pass needs the decisions, looked up by the id of every row it sees.  ``pc.is_in`` would
rebuild a hash table of all decisions for every batch; here each worker process fetches and
indexes them once per run (``cached_index``), and a batch costs one vectorised hash and a
``searchsorted``.  Matches are checked exactly on the ids' text, so a hash collision costs a
comparison, never a wrong mark.
"""

from __future__ import annotations

import threading
import uuid
from collections import OrderedDict
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raypress.operators.dedup.shuffle.tasks import concat, stable_hash
from raypress.schema import ID_COL


def id_text(ids: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Ids as one ``large_string`` array: integer and string ids compare and hash alike."""
    arr = ids.combine_chunks() if isinstance(ids, pa.ChunkedArray) else ids
    return arr.cast(pa.large_string())


class IdIndex:
    """Rows of ``table`` by the value of its ``key`` column (several rows may share one id)."""

    def __init__(self, table: pa.Table, key: str = ID_COL):
        self.table = table.combine_chunks()
        self.ids = id_text(self.table.column(key))
        hashes = stable_hash(self.ids) if len(self.ids) else np.zeros(0, np.uint64)
        self.order = np.argsort(hashes, kind="stable")
        self.sorted = hashes[self.order]

    def __len__(self) -> int:
        return self.table.num_rows

    def lookup(self, ids: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, positions)``: every pair of a query row and an index row with the same id,
        by query row (and index order within one)."""
        empty = np.zeros(0, np.int64)
        if len(ids) == 0 or len(self.sorted) == 0:
            return empty, empty
        query = id_text(ids)
        live = np.flatnonzero(query.is_valid().to_numpy(zero_copy_only=False))
        if len(live) == 0:
            return empty, empty
        hashes = stable_hash(query.take(pa.array(live)))
        lo = np.searchsorted(self.sorted, hashes, side="left")
        hi = np.searchsorted(self.sorted, hashes, side="right")
        counts = hi - lo
        if not counts.any():
            return empty, empty
        rows = np.repeat(live, counts)
        starts = np.repeat(lo - np.cumsum(counts) + counts, counts)  # each run's first slot, per slot
        positions = self.order[starts + np.arange(len(rows))]
        same = pc.equal(query.take(pa.array(rows)), self.ids.take(pa.array(positions)))
        exact = same.to_numpy(zero_copy_only=False)
        return rows[exact], positions[exact]


MAX_INDEXES_PER_PROCESS = 2
_indexes: "OrderedDict[str, IdIndex]" = OrderedDict()
_lock = threading.Lock()


def cached_index(token: str, pieces: Sequence[Any], key: str = ID_COL) -> IdIndex:
    """The index of the run ``token``'s ``pieces`` (object refs of tables, or the tables), built
    once per process; the least recently used beyond ``MAX_INDEXES_PER_PROCESS`` are dropped."""
    with _lock:
        index = _indexes.get(token)
        if index is not None:
            _indexes.move_to_end(token)
            return index
    tables = [p for p in pieces if isinstance(p, pa.Table)]
    refs = [p for p in pieces if not isinstance(p, pa.Table)]
    if refs:
        import ray

        tables += ray.get(refs)
    index = IdIndex(concat(tables), key)
    with _lock:
        _indexes[token] = index
        while len(_indexes) > MAX_INDEXES_PER_PROCESS:
            _indexes.popitem(last=False)
    return index


def new_token() -> str:
    """A name for one run's index, pickled along with the callable that uses it."""
    return uuid.uuid4().hex
