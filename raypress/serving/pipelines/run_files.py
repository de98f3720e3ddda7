"""Reading a run directory for the service, a page at a time: events, logs, rejected rows, artifacts.

Why cursors over offsets: a run's ``events.jsonl`` and ``logs/run.jsonl`` only grow, and its
rejected and quarantined parts never change once committed, so a byte offset (or a part and a row
in it) names a place that stays valid; a client pages through millions of rejects, or follows a
growing log, without the server ever loading a file whole.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raypress.dag.row_source import source_of
from raypress.dag.run_log import log_path
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL

MAX_SCAN_BYTES = 4 * 1024 * 1024  # a filtered read stops after this much and answers with a cursor
EVENTS_FILE = "events.jsonl"
LEDGER_FILE = "ledger.json"
REJECT_FOLDERS = ("rejects", "quarantine")
# What an artifact may be: what a run writes for people to read (reports, figures, small outputs)
ARTIFACT_MAX_BYTES = 64 * 1024 * 1024


class BadCursor(ValueError):
    """A cursor this server did not give out (or for another listing)."""


def encode_cursor(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(text: str | None, *keys: str) -> dict[str, Any] | None:
    if not text:
        return None
    try:
        data = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise BadCursor("cursor: not a cursor this server gave out") from None
    if not isinstance(data, dict) or any(k not in data for k in keys):
        raise BadCursor("cursor: not a cursor for this listing")
    return data


def cursor_offset(data: dict[str, Any], key: str) -> int:
    """A cursor's offset or row number: an int a file offset can hold (BadCursor otherwise)."""
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**62:
        raise BadCursor("cursor: not a cursor this server gave out")
    return value


def read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_lines(path: Path, offset: int, max_bytes: int = MAX_SCAN_BYTES) -> tuple[list[tuple[int, dict]], int]:
    """Complete JSON lines of ``path`` from byte ``offset`` ([(line's end offset, object)], the
    offset after the last complete line).  A line still being written is left for the next read."""
    records: list[tuple[int, dict]] = []
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read(max_bytes)
    except OSError:
        return records, offset
    position = offset
    for raw in data.split(b"\n")[:-1]:  # the last piece has no newline yet (or is empty)
        position += len(raw) + 1
        try:
            value = json.loads(raw)
        except ValueError:
            continue  # a torn line from a crash: skipped, the offset moves past it
        if isinstance(value, dict):
            records.append((position, value))
    if not records and len(data) == max_bytes and b"\n" not in data:  # one line longer than a page
        position = offset + len(data)
    return records, position


def events_since(run_dir: Path, offset: int) -> tuple[list[tuple[int, dict]], int]:
    return read_lines(run_dir / EVENTS_FILE, offset)


_EVENTS_SEEN: dict[str, tuple[int, int, list[dict]]] = {}  # path -> (inode, offset read to, events)
_EVENTS_LOCK = threading.Lock()
EVENTS_CACHED_RUNS = 256


def all_events(run_dir: Path) -> list[dict]:
    """Every event of the run so far; the file only grows, so each call reads only what was added
    since the last (a run page polled by many clients reads each byte once)."""
    path = run_dir / EVENTS_FILE
    key = str(path)
    try:
        inode = path.stat().st_ino
    except OSError:
        return []
    with _EVENTS_LOCK:
        seen_inode, offset, known = _EVENTS_SEEN.get(key, (inode, 0, []))
    if seen_inode != inode:  # the file was replaced: read it again
        offset, known = 0, []
    out = list(known)
    while True:
        records, after = events_since(run_dir, offset)
        out.extend(r for _, r in records)
        if after == offset:
            break
        offset = after
    with _EVENTS_LOCK:
        if len(_EVENTS_SEEN) >= EVENTS_CACHED_RUNS and key not in _EVENTS_SEEN:
            _EVENTS_SEEN.pop(next(iter(_EVENTS_SEEN)))
        _EVENTS_SEEN[key] = (inode, offset, out)
    return list(out)


def logs_page(run_dir: Path, cursor: str | None, node: str | None, limit: int) -> dict[str, Any]:
    """Up to ``limit`` log lines after ``cursor`` (of the node, when given), and the next cursor."""
    start = decode_cursor(cursor, "o")
    offset = cursor_offset(start, "o") if start else 0
    lines: list[dict] = []
    path = log_path(run_dir)
    scanned = 0
    while len(lines) < limit and scanned < MAX_SCAN_BYTES:
        records, after = read_lines(path, offset, 1024 * 1024)
        if after == offset:
            break
        scanned += after - offset
        full = False
        for end, record in records:
            offset = end
            if node is None or record.get("node") == node:
                lines.append(record)
                if len(lines) == limit:
                    full = True
                    break
        if not full:
            offset = after
    return {"lines": lines, "next_cursor": encode_cursor({"o": offset})}


@dataclass(frozen=True)
class RejectQuery:
    node: str
    reason: str | None
    kind: str | None  # filtered | duplicate | error (quarantined)
    limit: int


def reject_parts(run_dir: Path, node: str | None = None) -> list[Path]:
    """The committed parts of ``rejects/`` and ``quarantine/``, in a stable order: with ``node``,
    only its own ``rejects/<node>/`` and ``quarantine/<node>/`` (the sink files a row under the node
    that dropped it), unless it has neither: a run from before that kept every node's rows under
    its segment's sink, where the rows are found by their ``_rp_node`` (``rejects_page`` skips the
    row groups whose statistics rule the node out)."""
    if node is not None:
        own = [p for folder in REJECT_FOLDERS for p in _parts_in(run_dir / folder / node)]
        if own or any((run_dir / folder / node).is_dir() for folder in REJECT_FOLDERS):
            return own
    parts: list[Path] = []
    for folder in REJECT_FOLDERS:
        root = run_dir / folder
        if root.is_dir():
            parts.extend(sorted(p for p in root.rglob("*.parquet") if p.is_file() and not p.name.startswith(".")))
    return parts


def _parts_in(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.glob("*.parquet") if p.is_file() and not p.name.startswith("."))


def _may_hold(pf: Any, group: int, node: str) -> bool:
    """Whether row group ``group`` may hold rows of ``node``: False only when its ``_rp_node``
    statistics say it cannot (a part of another node's folder: min = max = that node)."""
    meta = pf.metadata.row_group(group)
    column = next((meta.column(i) for i in range(meta.num_columns)
                   if meta.column(i).path_in_schema == NODE_COL), None)
    stats = column.statistics if column is not None else None
    if stats is None or not stats.has_min_max:
        return True
    low, high, key = (v.encode() if isinstance(v, str) else v for v in (stats.min, stats.max, node))
    return low <= key <= high


def rejects_page(run_dir: Path, query: RejectQuery, cursor: str | None,
                 params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The node's rejected and quarantined rows after ``cursor``, each with its reason, its stat
    value against the threshold (``params``: the node's resolved params) and its source; reads
    only the row groups it pages through, and only while it has not found ``limit`` rows."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    start = decode_cursor(cursor, "p", "r")
    parts = reject_parts(run_dir, query.node)
    names = [p.relative_to(run_dir).as_posix() for p in parts]
    first_part, first_row = 0, 0
    if start:
        if not isinstance(start["p"], str) or start["p"] not in names:
            raise BadCursor("cursor: not a cursor for this run's rejects")
        first_part, first_row = names.index(start["p"]), cursor_offset(start, "r")
    rows: list[dict[str, Any]] = []
    for index in range(first_part, len(parts)):
        pf = pq.ParquetFile(parts[index])
        columns = [c for c in pf.schema_arrow.names if not c.startswith("__")]
        group_start = 0
        for group in range(pf.metadata.num_row_groups):
            group_rows = pf.metadata.row_group(group).num_rows
            skip = first_row - group_start if index == first_part else 0
            if skip >= group_rows or not _may_hold(pf, group, query.node):
                group_start += group_rows
                continue
            table = pf.read_row_group(group, columns=columns)
            mask = pc.equal(table[NODE_COL], query.node)
            if query.reason is not None:
                mask = pc.and_(mask, pc.equal(table[REASON_COL], query.reason))
            if query.kind is not None:
                mask = pc.and_(mask, pc.equal(table[KIND_COL], query.kind))
            hits = pc.indices_nonzero(pc.fill_null(mask, False)).to_pylist()
            for row_index in hits:
                if row_index < max(skip, 0):
                    continue
                rows.append(_reject_row(table.slice(row_index, 1).to_pylist()[0], names[index], params))
                if len(rows) == query.limit:
                    nxt = encode_cursor({"p": names[index], "r": group_start + row_index + 1})
                    return {"rows": rows, "next_cursor": nxt}
            group_start += group_rows
    return {"rows": rows, "next_cursor": None}


def _reject_row(row: dict[str, Any], part: str, params: dict[str, Any] | None) -> dict[str, Any]:
    detail = row.pop(DETAIL_COL, None)
    kind, reason = row.pop(KIND_COL, None), row.pop(REASON_COL, None)
    row.pop(NODE_COL, None)
    values: Any = None
    if detail:
        try:
            values = json.loads(detail)
        except ValueError:
            values = detail  # an error's message, a kept twin's id
    out: dict[str, Any] = {"id": row.get("id"), "kind": kind, "reason": reason, "detail": values,
                           "threshold": threshold_for(reason, params), "source": source_of(row.get("id")),
                           "part": part}
    rest = {k: v for k, v in row.items() if k != "id"}
    if rest:  # settings.keep_rejects: the whole row was kept
        out["row"] = {k: _jsonable(v) for k, v in rest.items()}
    return out


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)


def threshold_for(reason: str | None, params: dict[str, Any] | None) -> dict[str, Any] | None:
    """The param a range filter's reason (``"<stat> < min"``, ``"<stat> > max"``) was judged by:
    the node's one ``min*`` / ``max*`` param, or among several the one sharing a word with the
    stat's name; None when the reason is not of that form or no param matches."""
    if not reason or not params:
        return None
    match = re.match(r"^(?P<stat>\w+) (?P<op>[<>]) (?P<side>min|max)$", reason)
    if not match:
        return None
    side, stat = match["side"], match["stat"]
    candidates = [k for k, v in params.items() if k.startswith(side) and isinstance(v, (int, float))
                  and not isinstance(v, bool)]
    if len(candidates) > 1:
        words = set(stat.split("_"))
        candidates = [k for k in candidates if words & set(k.split("_")[1:])] or candidates[:0]
    if len(candidates) != 1:
        return None
    return {"param": candidates[0], "value": params[candidates[0]], "side": side}


class NotInRun(LookupError):
    """The path is outside the run directory, a link out of it, or not a file."""


def artifact_file(run_dir: Path, relative: str) -> Path:
    """``relative`` inside ``run_dir`` as a regular file; NotInRun for ``..``, absolute paths,
    links that lead out and anything not a plain file."""
    if not relative or relative.startswith(("/", "\\")) or "\x00" in relative:
        raise NotInRun(relative)
    parts = Path(relative).parts
    if any(part in ("..", "") for part in parts) or Path(relative).is_absolute():
        raise NotInRun(relative)
    root = run_dir.resolve()
    try:
        target = (run_dir / relative).resolve()
        if root != target and root not in target.parents:
            raise NotInRun(relative)
        if not target.is_file():
            raise NotInRun(relative)
    except OSError:  # a name too long for the file system, a loop of links: no such file
        raise NotInRun(relative) from None
    return target


def list_artifacts(run_dir: Path, limit: int = 500) -> list[dict[str, Any]]:
    """Files a person reads: reports, figures and what the run wrote beside its data (not its parts)."""
    out: list[dict[str, Any]] = []
    root = run_dir.resolve()
    for folder, dirs, files in os.walk(run_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in ("state",))
        for name in sorted(files):
            if name.startswith(".") or name.endswith((".parquet", ".tmp", ".lock")):
                continue
            path = Path(folder, name)
            try:
                real = path.resolve()
                if root not in real.parents or not real.is_file():
                    continue
                size = real.stat().st_size
            except OSError:
                continue
            out.append({"path": path.relative_to(run_dir).as_posix(), "bytes": size})
            if len(out) >= limit:
                return out
    return out
