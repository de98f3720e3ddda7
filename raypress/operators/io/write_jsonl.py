"""JSON Lines out: one JSON object per line, one file per part (or one file for a ``.jsonl`` path)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Writer, WriterParams
from raypress.operators.io.files_atomic import atomic_path, part_path
from raypress.operators.io.single_file import is_file_path, join_jsonl, joined_path
from raypress.operators.registry import register


class WriteJsonlParams(WriterParams):
    path: str = Field(description="output directory, or one file when it ends in .jsonl "
                                  "('{run_dir}' expands to the run directory)")


@register("write_jsonl")
class WriteJsonl(Writer[WriteJsonlParams]):
    """Write rows as JSON Lines, one file per part; bytes become base64 text, times ISO 8601."""

    def single_file(self) -> bool:
        return is_file_path(self.params.path, ".jsonl")

    def finalize(self, dest: str, ctx) -> None:
        if self.single_file():
            join_jsonl(dest, joined_path(dest, self.params.path))

    def write_batch(self, table: pa.Table, dest: str, part: str) -> None:
        if table.num_rows == 0:
            return  # an empty part file would only be noise: jsonl carries no schema
        with atomic_path(part_path(dest, part, ".jsonl")) as tmp, open(tmp, "w", encoding="utf-8") as f:
            for batch in table.to_batches():
                for row in batch.to_pylist():
                    f.write(json.dumps(row, ensure_ascii=False, default=json_default))
                    f.write("\n")


def json_default(value: Any) -> Any:
    """JSON for Arrow values that have no JSON type: bytes as base64, times as ISO 8601."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return str(value)
    raise TypeError(f"cannot write a {type(value).__name__} as JSON")
