"""document_simhash_deduplicator on Ray: the same output as the in-process run for any block or
partition count, the smallest id kept, every row accounted for, tombstones and bad rows handled."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from raypress.operators.base import RunContext
from raypress.operators.dedup.document_simhash_deduplicator import (
    DocumentSimhashDeduplicator,
    SimhashParams,
    near_duplicates,
)
from raypress.operators.dedup.shuffle.sources import LocalBlocks
from raypress.operators.dedup.shuffle.tasks import local_step
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL

pytestmark = pytest.mark.integration


def planted(seed: int) -> list[dict]:
    """Families of a base text and 1-3 copies with a word replaced or inserted (and maybe upper
    case), plus unrelated singles, under scrambled ids."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    texts: list[str] = []
    for _ in range(15):
        base = [rng.choice(vocab) for _ in range(rng.randint(250, 300))]
        texts.append(" ".join(base))
        for _ in range(rng.randint(1, 3)):
            edited = list(base)
            if rng.random() < 0.5:
                edited[rng.randrange(len(edited))] = rng.choice(vocab)
            else:
                edited.insert(rng.randrange(len(edited)), "inserted")
            texts.append(" ".join(edited).upper() if rng.random() < 0.3 else " ".join(edited))
    texts += [" ".join(rng.choice(vocab) for _ in range(250)) for _ in range(25)]
    ids = rng.sample(range(100_000), len(texts))
    rows = [{"id": f"doc-{i:06d}", "text": t, "source": "planted"} for i, t in zip(ids, texts)]
    rng.shuffle(rows)
    return rows


def run(op, rows: list[dict], blocks: int, events: list | None = None) -> dict[str, dict]:
    import ray

    ds = ray.data.from_items(rows, override_num_blocks=blocks)
    ctx = RunContext(run_dir="/tmp", node_id="near", emit=(events if events is not None else []).append)
    out = op.apply(ds, ctx).take_all()
    assert len(out) == len(rows)  # nothing lost, nothing added
    return {r["id"]: r for r in out}


def duplicates(out: dict[str, dict]) -> dict[str, str]:
    return {i: r[REASON_COL] for i, r in out.items() if r[KIND_COL] == "duplicate"}


def test_same_answer_as_in_process_for_any_blocks_and_partitions(ray_session):
    rows = planted(0)
    op = DocumentSimhashDeduplicator(SimhashParams(num_partitions=1))
    marked, _ = near_duplicates(LocalBlocks([pa.Table.from_pylist(rows)]), op.config(), 1, "near", run=local_step, collect=sum)
    expected = {r["id"]: r[REASON_COL] for r in marked[0].to_pylist() if r[KIND_COL] == "duplicate"}
    assert len(expected) >= 15  # 18 of the 29 planted copies are within 4 bits of their base (one edit in
    # ~275 words changes 6 of the shingles)
    events: list[dict] = []
    one = run(op, rows, 1, events)
    many = run(DocumentSimhashDeduplicator(SimhashParams(num_partitions=7)), list(reversed(rows)), 5)
    assert one == many
    assert duplicates(one) == expected
    by_id = {r["id"]: r for r in rows}
    for dup, kept in expected.items():
        assert kept < dup and one[kept][NODE_COL] is None  # the twin named is the smallest id, kept
        assert one[dup][NODE_COL] == "near"
        assert json.loads(one[dup][DETAIL_COL]) == {"simhash_component": kept}
        assert one[dup]["text"] == by_id[dup]["text"] and one[dup]["source"] == "planted"
    stats = events[-1]
    assert stats["event"] == "simhash_dedup" and stats["duplicates"] == len(expected)
    assert stats["documents"] == len(rows) and stats["partitions"] == 1


def test_edge_rows_short_bad_text_and_tombstones(ray_session):
    text = " ".join(f"t{i}" for i in range(40))
    rows = [
        {"id": "s1", "text": "too short"}, {"id": "s2", "text": ""},  # no shingle: SimHash 0, as Data-Juicer
        {"id": "n1", "text": None}, {"id": "i1", "text": 42},  # not a string: quarantined
        {"id": "t1", "text": text, "_rp_node": "f", "_rp_kind": "filtered", "_rp_reason": "r"},
        {"id": "t2", "text": text}, {"id": "t3", "text": text.upper() + " tail"},
    ]
    out = run(DocumentSimhashDeduplicator(SimhashParams(num_partitions=3)), rows, 3)
    assert duplicates(out) == {"s2": "s1", "t3": "t2"}
    assert (out["t1"][NODE_COL], out["t1"][REASON_COL]) == ("f", "r")  # passed through untouched
    assert out["n1"][KIND_COL] == "error" and "'text' of row 'n1' is null" in out["n1"][DETAIL_COL]
    assert out["i1"][KIND_COL] == "error"


def test_missing_text_column_is_a_clear_error(ray_session):
    import ray

    ds = ray.data.from_items([{"id": "a", "content": "x"}])
    with pytest.raises(ValueError, match=r"document_simhash_deduplicator: the input has no column 'text'"):
        DocumentSimhashDeduplicator(SimhashParams()).apply(ds, RunContext(run_dir="/tmp", node_id="near"))
