"""Shuffle pieces kept in files instead of the object store, for the shuffles whose size grows with
the input (a MinHash op's band rows: ``num_bands`` rows per document; the candidate edges of its
connected-components rounds).

Why: everything a shuffle routes stays in the object store until the next step has read it, and a
store that holds O(documents x bands) makes peak memory grow with the input (and spill at Ray's
pace when it fills).  A piece written as an Arrow IPC file under the run directory (shared storage
on a cluster, as the run directory must be) leaves only its path in the object store; the next
step's ``concat`` reads it back.  The op removes the folder when its shuffle is done.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa

FILE_COL = "_rp_piece_file"


def to_file(table: pa.Table, folder: str) -> pa.Table:
    """Write ``table`` to a new file in ``folder``; the one-row table that stands for it."""
    path = Path(folder) / f"{uuid.uuid4().hex}.arrow"
    path.parent.mkdir(parents=True, exist_ok=True)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    return pa.table({FILE_COL: [str(path)]})


def is_file_piece(table: pa.Table) -> bool:
    return table.num_columns == 1 and table.column_names[0] == FILE_COL


def read_piece(table: pa.Table) -> pa.Table:
    """The table a file piece stands for (read whole into this process: no mapped file pages)."""
    (path,) = table.column(FILE_COL).to_pylist()
    with pa.OSFile(path, "rb") as source:
        return pa.ipc.open_file(source).read_all()
