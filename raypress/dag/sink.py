"""The end of a segment: live rows to their destination, tombstones to ``rejects/<node>/`` and
``quarantine/<node>/`` of the node that dropped them, and a small tally per batch, from which the
ledger is computed (counts come from the data)."""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from raypress.dag.destination import STAGING_SUFFIX
from raypress.dag.op_timing import flush_times, report_time
from raypress.dag.ray_compat import SINK_CLASS_NAME
from raypress.dag.source_tallies import source_tallies
from raypress.operators.base import Writer
from raypress.schema import (
    ID_COL,
    KIND_COL,
    NODE_COL,
    REASON_COL,
    TOMBSTONE_COLS,
    TombstoneKind,
    alive_mask,
    strip_tombstone_columns,
)

TALLY_SCHEMA = pa.schema([("node", pa.string()), ("kind", pa.string()), ("reason", pa.string()),
                          ("n", pa.int64())])
LIVE, TOTAL = "_live", "_total"
PART_TOKEN_LEN = 16
PART = "_part"  # a tally row naming the part a sink call wrote (its reason is the part's token)


NBYTES_KEY = b"raypress.nbytes"  # footer metadata: the table's size in memory (text compresses 5-10x on disk)


def write_parquet_atomic(table: pa.Table, path: Path) -> None:
    """Write ``table`` under a temporary name, then rename: a reader never sees half a part.  The
    footer records the table's in-memory size, which the file's own sizes cannot tell (a column
    of repeated values is dictionary-encoded to almost nothing): ``run_artifacts`` decides by it
    whether an output is small enough to keep in the object store."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name + ".tmp")
    with pq.ParquetWriter(tmp, table.schema) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({NBYTES_KEY: str(table.nbytes).encode()})
    tmp.replace(path)


class SegmentSink:
    """Callable for `map_batches(batch_size=None)` at the end of a segment."""

    def __init__(self, sink_id: str, output_dir: str | None, writer: Writer | None, writer_dest: str | None,
                 rejects_root: str, quarantine_root: str, keep_rejects: bool, timer: Any = None,
                 source_key: str | None = None):
        self.sink_id = sink_id
        self.output_dir = Path(output_dir) if output_dir else None
        self.writer = writer
        self.writer_dest = writer_dest
        self.rejects_root = Path(rejects_root)  # RUN_DIR/rejects: a row lands in <root>/<node that dropped it>/
        self.quarantine_root = Path(quarantine_root)
        self.keep_rejects = keep_rejects
        self.timer = timer  # the writer's own time goes to the run's OpTimer
        self.source_key = source_key  # settings.source_key: tallies split by this column too (source_tallies)

    def __call__(self, table: pa.Table) -> pa.Table:
        part = uuid.uuid4().hex[:PART_TOKEN_LEN]
        mask = alive_mask(table)
        live = table if mask is None else table.filter(mask)
        live = strip_tombstone_columns(live)
        self._write_live(live, part)
        tallies: list[tuple[str, str, str, int]] = [("", PART, part, 0), ("", LIVE, "", live.num_rows),
                                                     ("", TOTAL, "", table.num_rows)]
        if mask is not None:
            dead = table.filter(pc.invert(mask))
            tallies.extend(self._write_dead(dead, part))
        if self.source_key:
            tallies.extend(source_tallies(table, mask, self.source_key))
        flush_times()  # the per-op times of this task's batches (see op_timing.report_time)
        node, kind, reason, n = zip(*tallies)
        return pa.table([list(node), list(kind), list(reason), list(n)], schema=TALLY_SCHEMA)

    def _write_live(self, live: pa.Table, part: str) -> None:
        if self.writer is not None:
            if live.num_rows:
                start = time.perf_counter()
                with _named(final_destination(self.writer_dest)):
                    self.writer.write_batch(live, self.writer_dest, part)
                if self.timer is not None:
                    report_time(self.timer, self.sink_id, time.perf_counter() - start, live.num_rows)
        elif self.output_dir is not None:
            with _named(self.output_dir):
                write_parquet_atomic(live, self.output_dir / f"part-{part}.parquet")

    def _write_dead(self, dead: pa.Table, part: str) -> list[tuple[str, str, str, int]]:
        for node in pc.unique(dead.column(NODE_COL)).to_pylist():
            self._write_node_dead(node, dead.filter(pc.equal(dead.column(NODE_COL), node)), part)
        grouped = pa.table({
            "node": dead.column(NODE_COL), "kind": dead.column(KIND_COL),
            # duplicates are counted per node, not per kept twin (their reason is the twin's id)
            "reason": pc.if_else(pc.equal(dead.column(KIND_COL), TombstoneKind.DUPLICATE.value),
                                 pa.scalar("", pa.string()), dead.column(REASON_COL)),
        # use_threads=False: a small table gains nothing from threads, and Acero's threaded
        # group_by inside a Ray worker can fail with "thread index N is out of range [0, N)"
        }).group_by(["node", "kind", "reason"], use_threads=False).aggregate([("node", "count")])
        return [(r["node"], r["kind"], r["reason"] or "", r["node_count"]) for r in grouped.to_pylist()]

    def _write_node_dead(self, node: str, dead: pa.Table, part: str) -> None:
        """``node``'s removed rows to ``rejects/<node>/``, its failed rows to ``quarantine/<node>/``,
        under the call's token: a user looking for a filter's rejects finds them under its name
        (not under the segment's last node), and ``number_parts`` orders each folder alike."""
        errors = dead.filter(pc.equal(dead.column(KIND_COL), TombstoneKind.ERROR.value))
        removed = dead.filter(pc.not_equal(dead.column(KIND_COL), TombstoneKind.ERROR.value))
        if errors.num_rows:
            folder = node_folder(self.quarantine_root, node)
            with _named(folder):
                write_parquet_atomic(errors, folder / f"part-{part}.parquet")
        if removed.num_rows:
            slim = removed if self.keep_rejects else removed.select(
                [c for c in (ID_COL, *TOMBSTONE_COLS) if c in removed.column_names])
            folder = node_folder(self.rejects_root, node)
            with _named(folder):
                write_parquet_atomic(slim, folder / f"part-{part}.parquet")


def node_folder(root: Path, node: str) -> Path:
    """``root/<node>``: where the rows ``node`` dropped are kept.  A node id is a folder name here
    (as under ``nodes/``); one that would land outside ``root`` is refused, never written there."""
    parts = Path(node).parts
    if not parts or Path(node).is_absolute() or ".." in parts or "\x00" in node:
        raise ValueError(f"node id {node!r} cannot name a folder under {root}")
    return root / node


@contextlib.contextmanager
def _named(folder: Path | str | None) -> Iterator[None]:
    """An OSError that names no file (``write`` on a full disk: ``[Errno 28] No space left on
    device``) names ``folder``, where it was writing, so the run can say which disk filled."""
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or folder is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(folder)) from exc


def final_destination(staging: str | None) -> str | None:
    """The user's destination of a writer's staging folder (``.<name>.raypress-staging`` beside it)."""
    if staging is None:
        return None
    path = Path(staging)
    if path.name.startswith(".") and path.name.endswith(STAGING_SUFFIX):
        return str(path.with_name(path.name[1:-len(STAGING_SUFFIX)]))
    return staging


def sum_tallies(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], int]:
    totals: dict[tuple[str, str, str], int] = {}
    for r in rows:
        if r["kind"] == PART:
            continue
        key = (r["node"], r["kind"], r["reason"])
        totals[key] = totals.get(key, 0) + int(r["n"])
    return totals


def parts_in_order(rows: list[dict[str, Any]]) -> list[str]:
    """The parts' tokens in the order their tallies arrived (the rows' order: Ray Data runs with
    ``preserve_order``)."""
    return [r["reason"] for r in rows if r["kind"] == PART]


def number_parts(folders: list[Path], tokens: list[str]) -> int:
    """Rename every ``part-{token}*`` file under ``folders`` to ``part-{position:08d}-{token}*``.

    Why: parts are written by parallel tasks under random tokens, so sorting their names (which is
    how the next segment, the writers' joins and a user's ``cat part-*`` read them) scrambled the
    rows; numbered by the order the rows arrived, a folder of parts reads back in input order, as
    Data-Juicer's export does.  Returns the number of files renamed."""
    position = {t: i for i, t in enumerate(tokens)}
    renamed = 0
    for folder in folders:
        if not folder.exists():
            continue
        for path in sorted(folder.rglob("part-*")):
            token = path.name[len("part-"):len("part-") + PART_TOKEN_LEN]
            if token in position and path.is_file():
                path.rename(path.with_name(f"part-{position[token]:08d}-{path.name[len('part-'):]}"))
                renamed += 1
    return renamed


assert SegmentSink.__name__ == SINK_CLASS_NAME, "ray_compat finds the fused sink task by this name"
