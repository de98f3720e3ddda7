"""Whole text files as rows: one row per file, ``id`` = ``path`` = the path as matched."""

from __future__ import annotations

import codecs
from functools import partial
from typing import Iterator

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.shared.files import Globs, expand_globs, map_files, open_maybe_compressed
from raypress.operators.shared.rows import combine
from raypress.operators.registry import register
from raypress.schema import ID_COL, TombstoneKind, with_tombstones

COLUMNS = (ID_COL, "text", "path")


class ReadTextFilesParams(Params):
    paths: Globs = Field(description="glob patterns of files, relative to the current directory")
    encoding: str = Field(default="utf-8", description="text encoding; undecodable files become tombstones")

    @field_validator("encoding")
    @classmethod
    def _known(cls, value: str) -> str:
        try:
            codecs.lookup(value)
        except LookupError as exc:
            raise ValueError(str(exc)) from exc
        return value


@register("read_text_files")
class ReadTextFiles(Reader[ReadTextFilesParams]):
    """Read whole text files (one row each); files that do not decode become error tombstones."""

    writes = COLUMNS

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        return map_files(files, partial(read_text_file, node=ctx.node_id, encoding=self.params.encoding), ctx=ctx)


def read_text_file(path: str, abs_path: str, node: str, encoding: str) -> Iterator[pa.Table]:
    """One table with one row: the decoded file, or a tombstone saying why it is not there."""
    try:
        with open_maybe_compressed(abs_path) as f:
            data = f.read()
    except (OSError, EOFError) as exc:
        yield dead_file(path, node, "unreadable_file", f"{type(exc).__name__}: {exc}")
        return
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        yield dead_file(path, node, "decode_error", f"not {encoding}: {exc}")
        return
    yield combine(file_row(path, text), None)


def file_row(path: str, text: str | None) -> pa.Table:
    return pa.table({ID_COL: [path], "text": pa.array([text], pa.string()), "path": [path]})


def dead_file(path: str, node: str, reason: str, detail: str) -> pa.Table:
    """A tombstone with the same columns as a live row (text null), so every block has one schema."""
    return with_tombstones(file_row(path, None), node, TombstoneKind.ERROR, reasons=[reason], details=[detail])
