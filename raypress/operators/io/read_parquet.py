"""Parquet in.  Ids name the file and the row's index in it, so they survive re-runs."""

from __future__ import annotations

from functools import partial
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.shared.files import Globs, expand_globs, map_files
from raypress.operators.shared.rows import with_row_ids
from raypress.operators.registry import register
from raypress.schema import ID_COL

BATCH_ROWS = 65_536  # rows decoded at a time per worker


class ReadParquetParams(Params):
    paths: Globs = Field(description="glob patterns of files, relative to the current directory")
    columns: list[str] | None = Field(default=None, description="columns to read (default: all)")
    id_key: str | None = Field(
        default=None,
        description="column whose value (as a string) is the row id; rows where it is null become "
        "'missing_id' tombstones. Without it, id = '{path}:{row}' (0-based row index in the file) "
        "and an 'id' column in the data is replaced (set id_key: id to keep it)",
    )


@register("read_parquet")
class ReadParquet(Reader[ReadParquetParams]):
    """Read Parquet files in parallel (one file per task, streamed by batches)."""

    def columns_written(self) -> tuple[str, ...] | None:
        cols = self.params.columns
        return (ID_COL, *[c for c in cols if c != ID_COL]) if cols else None

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        p = self.params
        return map_files(files, partial(read_parquet_file, node=ctx.node_id, columns=p.columns, id_key=p.id_key), ctx=ctx)


def read_parquet_file(
    path: str, abs_path: str, node: str, columns: list[str] | None, id_key: str | None
) -> Iterator[pa.Table]:
    """Stream one file as tables with ids; only the id column is read beyond ``columns``."""
    wanted = None if columns is None else list(dict.fromkeys(columns + ([id_key] if id_key else [])))
    batches = pq.ParquetFile(abs_path).iter_batches(batch_size=BATCH_ROWS, columns=wanted)
    yield from with_row_ids((pa.Table.from_batches([b]) for b in batches), path, node, columns, id_key)
