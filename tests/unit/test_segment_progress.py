"""A running segment's per-node counts (``dag.segment_progress``): the ledger's arithmetic on the
tallies that have arrived, emitted now and then, in the order the blocks came."""

from __future__ import annotations

import pyarrow as pa

from raypress.dag.segment_progress import SegmentProgress, collect_tallies
from raypress.dag.sink import LIVE, PART, TALLY_SCHEMA, TOTAL
from raypress.operators.base import OpKind

CHAIN = [("docs", "read_jsonl", OpKind.READER), ("long", "words_num_filter", OpKind.FILTER),
         ("out", "write_jsonl", OpKind.WRITER)]


def block(part: str, total: int, dropped: int) -> list[dict]:
    rows = [{"node": "", "kind": PART, "reason": part, "n": 0},
            {"node": "", "kind": LIVE, "reason": "", "n": total - dropped},
            {"node": "", "kind": TOTAL, "reason": "", "n": total}]
    if dropped:
        rows.append({"node": "long", "kind": "filtered", "reason": "num_words < min", "n": dropped})
    return rows


class Clock:
    def __init__(self) -> None:
        self.now = 50.0

    def __call__(self) -> float:
        return self.now


def test_counts_so_far_go_out_per_node_at_most_once_a_second():
    clock, events = Clock(), []
    progress = SegmentProgress(CHAIN, None, events.append, clock=clock)
    clock.now += 0.5
    progress.add(block("a", 100, 10))
    assert events == []  # the first round waits a second
    clock.now += 1.0
    progress.add(block("b", 100, 20))
    assert [(e["node"], e["rows_in"], e["rows_out"], e["dropped"]) for e in events] == [
        ("docs", 200, 200, 0), ("long", 200, 170, 30), ("out", 170, 170, 0)]
    assert all(e["event"] == "node_progress" and e["elapsed"] == 1.5 and "eta_s" not in e for e in events)
    clock.now += 0.2
    progress.add(block("c", 100, 0))
    assert len(events) == 3  # too soon for another round


def test_a_long_segment_reports_less_often_and_an_input_of_known_size_gives_an_eta():
    clock, events = Clock(), []
    progress = SegmentProgress(CHAIN, 1000, events.append, clock=clock)
    clock.now += 100  # 100 s in: a round per 5 s at most
    progress.add(block("a", 250, 0))
    head = events[0]
    assert head["expected_in"] == 1000 and head["eta_s"] == 300.0  # a quarter done in 100 s
    assert all(e["eta_s"] == 300.0 for e in events) and "expected_in" not in events[1]
    clock.now += 4
    progress.add(block("b", 250, 0))
    assert len(events) == 3
    clock.now += 1
    progress.add(block("c", 250, 0))
    assert len(events) == 6


class FakeDataset:
    def __init__(self, blocks: list[list[dict]]) -> None:
        self.blocks = blocks
        self.asked: dict = {}

    def iter_batches(self, **kwargs):
        self.asked = kwargs
        for rows in self.blocks:
            yield pa.Table.from_pylist(rows, schema=TALLY_SCHEMA)


def test_tallies_are_collected_block_by_block_in_arrival_order():
    clock, events = Clock(), []
    ds = FakeDataset([block("a", 3, 1), block("b", 2, 0)])
    tallies = collect_tallies(ds, SegmentProgress(CHAIN, None, events.append, clock=clock))
    assert ds.asked == {"batch_size": None, "batch_format": "pyarrow"}
    assert [r["reason"] for r in tallies if r["kind"] == PART] == ["a", "b"]
    assert tallies == block("a", 3, 1) + block("b", 2, 0)
