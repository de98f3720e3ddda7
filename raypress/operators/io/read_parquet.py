"""Parquet in.  Ids name the file and the row's index in it, so they survive re-runs."""

from __future__ import annotations

from functools import partial
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.shared.files import Globs, expand_globs, map_items, parquet_items
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
    """Read Parquet files in parallel (a task per file, or per share of a large file's row groups;
streamed by batches)."""

    def columns_written(self) -> tuple[str, ...] | None:
        cols = self.params.columns
        return (ID_COL, *[c for c in cols if c != ID_COL]) if cols else None

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        p = self.params
        return map_items(parquet_items(files, ctx),
                         partial(read_parquet_span, node=ctx.node_id, columns=p.columns, id_key=p.id_key), ctx)


def read_parquet_span(item: dict, node: str, columns: list[str] | None, id_key: str | None) -> Iterator[pa.Table]:
    """One item of ``parquet_items``: a whole file, or some of its row groups."""
    return read_parquet_file(item["path"], item["abs_path"], node, columns, id_key, item["row_groups"],
                             item["first_row"])


def read_parquet_file(
    path: str, abs_path: str, node: str, columns: list[str] | None, id_key: str | None,
    row_groups: list[int] | None = None, first_row: int = 0,
) -> Iterator[pa.Table]:
    """Stream one file (or ``row_groups`` of it, whose first row is row ``first_row`` of the file) as
    tables with ids; only the id column is read beyond ``columns``."""
    wanted = None if columns is None else list(dict.fromkeys(columns + ([id_key] if id_key else [])))
    batches = pq.ParquetFile(abs_path).iter_batches(batch_size=BATCH_ROWS, columns=wanted, row_groups=row_groups)
    yield from with_row_ids((pa.Table.from_batches([b]) for b in batches), path, node, columns, id_key,
                            offset=first_row)
