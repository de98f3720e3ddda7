"""JSON Lines in: one JSON object per line.

Reading survives bad lines: a line that is not a JSON object becomes an error tombstone (reason
``invalid_json``) and the rest of the file is still read; so does a record whose field types
contradict the rest of its file (``schema_conflict``).
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any, Iterator

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.shared.files import Globs, expand_globs, map_files, open_maybe_compressed
from raypress.operators.shared.rows import combine, ids_from_column, preview, put_ids, records_to_table, tombstones
from raypress.operators.registry import register

CHUNK_LINES = 10_000  # lines per output table: bounded memory per worker, blocks of sensible size


class ReadJsonlParams(Params):
    paths: Globs = Field(description="glob patterns of files, relative to the current directory")
    id_key: str | None = Field(
        default=None,
        description="field whose value (as a string) is the row id; rows lacking it become "
        "'missing_id' tombstones. Without it, id = '{path}:{line}' (1-based line number) and an "
        "'id' field in the data is replaced (set id_key: id to keep it)",
    )


@register("read_jsonl")
class ReadJsonl(Reader[ReadJsonlParams]):
    """Read JSON Lines files (.jsonl, also .gz/.bz2/.xz) in parallel; bad lines become error tombstones."""

    def columns_written(self) -> tuple[str, ...] | None:
        return None  # whatever fields the files hold

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        return map_files(files, partial(read_jsonl_file, node=ctx.node_id, id_key=self.params.id_key), ctx=ctx)


def read_jsonl_file(path: str, abs_path: str, node: str, id_key: str | None) -> Iterator[pa.Table]:
    """Parse one file into tables of at most ``CHUNK_LINES`` rows (live rows and tombstones)."""
    chunk = _Chunk(node, id_key)
    line_no = 0
    with open_maybe_compressed(abs_path) as f:
        try:
            for line_no, raw in enumerate(f, start=1):
                if raw.strip():
                    chunk.add(f"{path}:{line_no}", raw)
                if chunk.size >= CHUNK_LINES:
                    yield chunk.flush()
        except (OSError, EOFError) as exc:  # truncated or corrupt compressed file: keep what was read
            chunk.dead(f"{path}:{line_no + 1}", "unreadable_file", f"{type(exc).__name__}: {exc}")
    if chunk.size:
        yield chunk.flush()


class _Chunk:
    """The lines of one output table: parsed records and tombstones, in file order."""

    def __init__(self, node: str, id_key: str | None):
        self.node, self.id_key = node, id_key
        self._reset()

    def _reset(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.record_ids: list[str] = []
        self.dead_ids: list[str] = []
        self.reasons: list[str] = []
        self.details: list[str | None] = []

    @property
    def size(self) -> int:
        return len(self.records) + len(self.dead_ids)

    def add(self, row_id: str, raw: bytes) -> None:
        line = raw.rstrip(b"\r\n")
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            self.dead(row_id, "invalid_json", f"{exc}: {preview(line)}")
            return
        if not isinstance(obj, dict):
            self.dead(row_id, "invalid_json", f"not a JSON object but a {type(obj).__name__}: {preview(line)}")
            return
        self.records.append(obj)
        self.record_ids.append(row_id)

    def dead(self, row_id: str, reason: str, detail: str) -> None:
        self.dead_ids.append(row_id)
        self.reasons.append(reason)
        self.details.append(detail)

    def flush(self) -> pa.Table:
        table, conflicts = records_to_table(self.records)
        for i, why in conflicts.items():
            self.dead(self.record_ids[i], "schema_conflict", why)
        live_ids = [rid for i, rid in enumerate(self.record_ids) if i not in conflicts]
        if self.id_key is None:
            live = put_ids(table, live_ids)
        else:
            live = ids_from_column(table, self.id_key, live_ids, self.node)
        out = combine(live, tombstones(self.dead_ids, self.node, self.reasons, self.details))
        self._reset()
        return out
