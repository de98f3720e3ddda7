"""Live per-node counts of a running segment, from its sink's tallies as they arrive.

Why: the sink's per-block tallies reached the driver only when the segment ended (``take_all``),
so a long segment showed nothing until its end.  They are now read block by block: with
``preserve_order`` Ray Data yields each block once it and those before it are done, in input order
(``ray_compat`` assumption 6; ``take_all`` is ``iter_rows`` over the same iterator, so this costs
nothing more), and after a block the counts so far go out as ``node_progress`` events, computed with
the ledger's own arithmetic (``ledger.segment_entries``) and rate-limited: one round per
``PROGRESS_MIN_S`` at most, fewer as the segment ages (``events.jsonl`` stays small on long runs).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from raypress.dag.ledger import segment_entries
from raypress.dag.sink import sum_tallies
from raypress.operators.base import OpKind

PROGRESS_MIN_S = 1.0  # the first round and the shortest gap between two
PROGRESS_MAX_S = 5.0  # the longest gap while blocks keep arriving
PROGRESS_AGE_SHARE = 0.05  # between the two: 5% of the segment's age (every 5 s after 100 s)


def collect_tallies(ds: Any, progress: "SegmentProgress") -> list[dict[str, Any]]:
    """Every tally row of a segment's sink output, in block order, counting each block as it comes."""
    tallies: list[dict[str, Any]] = []
    for batch in ds.iter_batches(batch_size=None, batch_format="pyarrow"):
        rows = batch.to_pylist()
        tallies.extend(rows)
        progress.add(rows)
    return tallies


class SegmentProgress:
    """Sums a segment's tallies as they arrive and emits each node's counts now and then."""

    def __init__(self, chain: list[tuple[str, str, OpKind]], expected_in: int | None,
                 emit: Callable[[dict], None], clock: Callable[[], float] = time.monotonic) -> None:
        self.chain = chain
        self.expected_in = expected_in  # rows entering the head, when counted upstream
        self.emit = emit
        self.clock = clock
        self.start = self.last = clock()
        self.totals: dict[tuple[str, str, str], int] = {}

    def add(self, rows: list[dict[str, Any]]) -> None:
        for key, n in sum_tallies(rows).items():
            self.totals[key] = self.totals.get(key, 0) + n
        now = self.clock()
        age = now - self.start
        if now - self.last >= min(PROGRESS_MAX_S, max(PROGRESS_MIN_S, age * PROGRESS_AGE_SHARE)):
            self.last = now
            for event in self.events(age):
                self.emit(event)

    def events(self, elapsed: float) -> list[dict[str, Any]]:
        """One ``node_progress`` event per node of the chain: rows in and out so far, the rows it
        removed (filtered, duplicates, quarantined), and the seconds left when the head's input
        is known (every node of a fused chain works through the same blocks)."""
        entries, _ = segment_entries(self.chain, self.totals, None, {})
        head = self.chain[0][0]
        done = entries[head]["rows_in"]
        eta = None
        if self.expected_in and done:
            eta = max(0.0, elapsed * (self.expected_in - done) / done)
        out = []
        for nid, e in entries.items():
            event = {"event": "node_progress", "node": nid, "rows_in": e["rows_in"], "rows_out": e["rows_out"],
                     "dropped": e["rows_in"] - e["rows_out"], "elapsed": round(elapsed, 3)}
            if nid == head and self.expected_in is not None:
                event["expected_in"] = self.expected_in
            if eta is not None:
                event["eta_s"] = round(eta, 1)
            out.append(event)
        return out
