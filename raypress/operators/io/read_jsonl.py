"""JSON Lines in: one JSON object per line.

Reading survives bad lines: a line that is not a JSON object becomes an error tombstone (reason
``invalid_json``) and the rest of the file is still read; so does a record whose field types
contradict the rest of its file (``schema_conflict``).

A lone surrogate (``"\\ud800"`` escaped in a JSON string: half of a UTF-16 pair whose other half
is missing) is replaced by U+FFFD and the row is kept: no UTF-8 column can hold it, and one
unreadable character should not cost the document (it had been quarantined as a "schema
conflict" without its text).  How many rows were repaired is a ``surrogates_replaced`` event, a
ledger field and a warning.

A large uncompressed file is read as several spans at once (``operators/shared/spans.py``), so
every CPU works however few the files.

Ids: a row keeps its own ``id`` (as a string) so the output joins back to the input; a row
whose ``id`` is missing, null, empty or a repeat of an earlier row's in the same file (the same
span, for a file read in spans) gets ``{path}:{line}`` instead (the first row with an id keeps
it: file order decides, so the rule is deterministic).  Repeats across files and spans are not
detected here (that needs a shuffle of every id);
files from one source rarely share ids, and ``assign_ids: true`` makes every id unique.  How many
ids were assigned is reported as an ``ids_assigned`` event (events.jsonl) when the run ends.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Any, Iterator

import pyarrow as pa
from pydantic import Field, model_validator

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.shared.driver_actors import driver_actor, forget
from raypress.operators.shared.files import Globs, expand_globs, line_spans, map_items, open_maybe_compressed
from raypress.operators.shared.spans import span_lines
from raypress.operators.shared.rows import combine, ids_from_column, preview, put_ids, records_to_table, tombstones
from raypress.operators.registry import register
from raypress.schema import ID_COL

CHUNK_LINES = 10_000  # lines per output table: bounded memory per worker, blocks of sensible size


class ReadJsonlParams(Params):
    paths: Globs = Field(description="glob patterns of files, relative to the current directory")
    id_key: str | None = Field(
        default=None,
        description="field whose value (as a string) is the row id, strictly: rows lacking it become "
        "'missing_id' tombstones. Without it, a row keeps its own 'id' field (as a string) and gets "
        "'{path}:{line}' (1-based line number) where 'id' is missing, null, empty or repeated in its file",
    )
    assign_ids: bool = Field(default=False, description="true: every row gets '{path}:{line}' as its id, "
                             "replacing any 'id' field in the data")

    @model_validator(mode="after")
    def _one_id_rule(self) -> "ReadJsonlParams":
        if self.assign_ids and self.id_key is not None:
            raise ValueError("assign_ids replaces every id, id_key reads them from a field: set one of them")
        return self


# a JSON escape of a UTF-16 surrogate: the only way one reaches a parsed string (raw bytes of one
# are invalid UTF-8, an ``invalid_json`` line); a valid pair decodes to one character
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class ReaderTally:
    """Sums, over a reader's files, the rows whose own id was missing or repeated and the rows whose
    lone surrogates were replaced."""

    def __init__(self) -> None:
        self.missing = self.repeated = self.repaired = 0

    def add(self, missing: int, repeated: int, repaired: int = 0) -> None:
        self.missing += missing
        self.repeated += repeated
        self.repaired += repaired

    def totals(self) -> dict[str, int]:
        return {"assigned": self.missing + self.repeated, "missing": self.missing, "repeated": self.repeated,
                "repaired": self.repaired}


class ReaderTallies:
    """Every reader's :class:`ReaderTally` of a driver, by a key each reader draws (one Ray actor per
    driver process, kept for all its runs: see ``shared.driver_actors``)."""

    def __init__(self) -> None:
        self.tallies: dict[str, ReaderTally] = {}

    def add(self, key: str, missing: int, repeated: int, repaired: int = 0) -> None:
        self.tallies.setdefault(key, ReaderTally()).add(missing, repeated, repaired)

    def totals(self, key: str) -> dict[str, int]:
        return self.tallies.get(key, ReaderTally()).totals()

    def pop(self, key: str) -> dict[str, int]:
        """A reader's totals, forgotten here (the run has read them)."""
        return self.tallies.pop(key, ReaderTally()).totals()


@dataclass(frozen=True)
class TallyRef:
    """What a reader's file tasks report to: its key in the driver's tallies actor.  ``add``
    returns the call's ObjectRef (waited for by the task)."""

    actor: Any
    key: str

    def add(self, missing: int, repeated: int, repaired: int = 0) -> Any:
        return self.actor.add.remote(self.key, missing, repeated, repaired)


TALLIES = "reader_tallies"


@register("read_jsonl")
class ReadJsonl(Reader[ReadJsonlParams]):
    """Read JSON Lines files (.jsonl, also .gz/.bz2/.xz) in parallel; bad lines become error tombstones."""

    def columns_written(self) -> tuple[str, ...] | None:
        return None  # whatever fields the files hold

    def read(self, ctx: RunContext):
        files = expand_globs(self.params.paths)
        keep = self.params.id_key is None and not self.params.assign_ids
        counter = _counter(ctx, keep)  # a new driver's tallies actor starts while the lines are counted
        spans = line_spans(files, ctx)
        counter = _wait_until_started(counter, ctx, keep)
        read = partial(read_jsonl_span, node=ctx.node_id, id_key=self.params.id_key,
                       assign_ids=self.params.assign_ids, counter=counter)
        return map_items(spans, read, ctx)


def _counter(ctx: RunContext, ids_kept: bool) -> TallyRef:
    """This reader's tally in the driver's tallies actor; its totals become events when the run
    ends (``ids_assigned`` where rows keep their own ids)."""
    import ray

    tally = TallyRef(driver_actor(TALLIES, lambda: ray.remote(num_cpus=0)(ReaderTallies).remote()),
                     f"{ctx.node_id}/{uuid.uuid4().hex}")

    def report() -> None:
        try:
            totals = ray.get(tally.actor.pop.remote(tally.key), timeout=30)
        except Exception:  # noqa: BLE001 - Ray already gone (a failed run): nothing to report
            return
        repaired = totals.pop("repaired")
        if ids_kept:
            ctx.event("ids_assigned", **totals)
        if repaired:
            ctx.event("surrogates_replaced", rows=repaired)

    ctx.defer(report)
    return tally


def _wait_until_started(tally: TallyRef, ctx: RunContext, ids_kept: bool) -> TallyRef:
    """The tally, its actor up before the file tasks run: a task that reports waits for its call (see
    ``_read_lines``), and ~0.5-1 s of actor start-up would count as the reader's own time.  Waited
    for after the files' lines are counted, which overlaps most of that start-up on a large input.
    An actor found dead (killed under an earlier run of this process) is made again."""
    import ray

    try:
        ray.get(tally.actor.totals.remote(tally.key))
        return tally
    except ray.exceptions.RayActorError:
        forget(TALLIES)
        return _counter(ctx, ids_kept)


def read_jsonl_span(item: dict[str, Any], node: str, id_key: str | None, assign_ids: bool = False,
                    counter=None) -> Iterator[pa.Table]:
    """One span of ``line_spans`` (a whole file, or the lines starting in a byte range of one)."""
    if item["end"] is None:
        return read_jsonl_file(item["path"], item["abs_path"], node, id_key, assign_ids, counter)
    return _read_lines(item["path"], item["abs_path"], node, id_key, assign_ids, counter,
                       lambda f: span_lines(f, item["start"], item["end"], item["newlines_before"]), plain=True)


def read_jsonl_file(path: str, abs_path: str, node: str, id_key: str | None, assign_ids: bool = False,
                    counter=None) -> Iterator[pa.Table]:
    """Parse one file into tables of at most ``CHUNK_LINES`` rows (live rows and tombstones)."""
    return _read_lines(path, abs_path, node, id_key, assign_ids, counter, lambda f: enumerate(f, start=1))


def _read_lines(path: str, abs_path: str, node: str, id_key: str | None, assign_ids: bool, counter,
                numbered, plain: bool = False) -> Iterator[pa.Table]:
    """Tables of at most ``CHUNK_LINES`` rows from ``numbered(file)``'s (line number, raw line)s.
    Repeated own ids are found within what one call reads (a file, or a span of one)."""
    chunk = _Chunk(node, id_key, keep_ids=id_key is None and not assign_ids)
    line_no = 0
    with (open(abs_path, "rb") if plain else open_maybe_compressed(abs_path)) as f:
        try:
            for line_no, raw in numbered(f):
                if raw.strip():
                    chunk.add(f"{path}:{line_no}", raw)
                if chunk.size >= CHUNK_LINES:
                    yield chunk.flush()
        except (OSError, EOFError) as exc:  # truncated or corrupt compressed file: keep what was read
            chunk.dead(f"{path}:{line_no + 1}", "unreadable_file", f"{type(exc).__name__}: {exc}")
    if counter is not None and (chunk.missing or chunk.repeated or chunk.repaired):
        # Waited for, and before the last yield: an actor call in flight when the task ends may reach
        # the counter after the run has read its totals (calls from different tasks are unordered),
        # and a consumer need not resume a generator after its last row.
        import ray

        ray.get(counter.add(chunk.missing, chunk.repeated, chunk.repaired))
    if chunk.size:
        yield chunk.flush()


def own_id(value: Any) -> str | None:
    """A row's own ``id`` as a string (numbers as written, objects as JSON); None when it has none."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def without_lone_surrogates(value: Any) -> Any:
    """``value`` with each lone surrogate in its strings (keys too) replaced by U+FFFD; ``value``
    itself when it has none."""
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value) if _LONE_SURROGATE.search(value) else value
    if isinstance(value, list):
        items = [without_lone_surrogates(v) for v in value]
        return value if all(a is b for a, b in zip(items, value)) else items
    if isinstance(value, dict):
        pairs = [(without_lone_surrogates(k), without_lone_surrogates(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(pairs, value.items())):
            return value
        return dict(pairs)
    return value


class _Chunk:
    """The lines of one output table: parsed records and tombstones, in file order.

    One per file: with ``keep_ids`` it remembers the file's ids to find repeats across chunks."""

    def __init__(self, node: str, id_key: str | None, keep_ids: bool = False):
        self.node, self.id_key, self.keep_ids = node, id_key, keep_ids
        self.seen: set[str] = set()
        self.missing = self.repeated = self.repaired = 0
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
        if _SURROGATE_ESCAPE.search(line):
            repaired = without_lone_surrogates(obj)
            self.repaired += repaired is not obj
            obj = repaired
        if self.keep_ids:
            row_id = self._own_or(obj, row_id)
            obj[ID_COL] = row_id  # one string type: mixed id types must not make schema conflicts
        self.records.append(obj)
        self.record_ids.append(row_id)

    def _own_or(self, obj: dict[str, Any], line_id: str) -> str:
        own = own_id(obj.get(ID_COL))
        if own is None:
            self.missing += 1
            return line_id
        if own in self.seen:
            self.repeated += 1
            return line_id
        self.seen.add(own)
        return own

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
