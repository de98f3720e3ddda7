"""Parquet out: one file per part, or one file when ``path`` ends in ``.parquet``."""

from __future__ import annotations

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Writer, WriterParams
from raypress.operators.io.parts.atomic import part_path, write_parquet_part
from raypress.operators.io.parts.single_file import is_file_path, join_parquet, joined_path
from raypress.operators.registry import register


class WriteParquetParams(WriterParams):
    path: str = Field(description="output directory, or one file when it ends in .parquet "
                                  "('{run_dir}' expands to the run directory)")
    compression: str = Field(default="zstd", description="parquet codec: zstd, snappy, gzip, lz4, none")


@register("write_parquet")
class WriteParquet(Writer[WriteParquetParams]):
    """Write rows as Parquet, one file per part."""

    def single_file(self) -> bool:
        return is_file_path(self.params.path, ".parquet")

    def finalize(self, dest: str, ctx) -> None:
        if self.single_file():
            join_parquet(dest, joined_path(dest, self.params.path), self.params.compression)

    def write_batch(self, table: pa.Table, dest: str, part: str) -> None:
        write_parquet_part(table, part_path(dest, part, ".parquet"), self.params.compression)
