"""JSON Lines out: one JSON object per line, one file per part (or one file for a ``.jsonl`` path)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import gzip
import io
import json
from contextlib import contextmanager
from typing import Any, Iterator, Literal

import pyarrow as pa
from pydantic import Field, model_validator

from raypress.operators.base import Writer, WriterParams
from raypress.operators.io.parts.atomic import atomic_path, part_path
from raypress.operators.io.parts.single_file import is_file_path, join_jsonl, joined_path
from raypress.operators.registry import register


class WriteJsonlParams(WriterParams):
    path: str = Field(description="output directory, or one file when it ends in .jsonl "
                                  "('{run_dir}' expands to the run directory)")
    compression: Literal["none", "gzip"] = Field(
        "none", description="gzip: each part is a .jsonl.gz file (what `datasets.load_dataset('json', "
        "data_files=...)` and most corpus releases read); a directory output only")

    @model_validator(mode="after")
    def _gzip_parts_only(self) -> "WriteJsonlParams":
        if self.compression != "none" and is_file_path(self.path, ".jsonl"):
            raise ValueError(f"compression={self.compression!r} writes .jsonl.gz parts into a directory; "
                             f"{self.path!r} names one .jsonl file (give a directory)")
        return self


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
        gz = self.params.compression == "gzip"
        final = part_path(dest, part, ".jsonl.gz" if gz else ".jsonl")
        with atomic_path(final) as tmp, (_gzip_text(tmp) if gz else open(tmp, "w", encoding="utf-8")) as f:
            for batch in table.to_batches():
                for row in batch.to_pylist():
                    f.write(json.dumps(row, ensure_ascii=False, default=json_default))
                    f.write("\n")


@contextmanager
def _gzip_text(path) -> Iterator[io.TextIOWrapper]:
    """A text writer into a gzip file with no name and no time in its header: the same rows give
    the same bytes on every run (re-runs and resumes stay byte-identical)."""
    with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=raw,
                                                 mtime=0) as gz, io.TextIOWrapper(gz, encoding="utf-8") as f:
        yield f


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
