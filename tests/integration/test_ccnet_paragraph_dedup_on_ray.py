"""ccnet_paragraph_dedup on Ray: the same result as the in-process steps for any blocks, row order
and partitions, tombstones passed through, counts in the event."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from raypress.operators.base import RunContext
from raypress.operators.dedup.ccnet_paragraph_dedup import CcnetParagraphDedup, CcnetParagraphDedupParams
from raypress.operators.dedup.ccnet.paragraphs import NO_TEXT_LEFT, REMOVED_COL, dedup_tables
from raypress.operators.shared.documents import Document, documents_to_table
from raypress.schema import KIND_COL, NODE_COL, REASON_COL, TombstoneKind, with_tombstones

pytestmark = pytest.mark.integration

BOILERPLATE = ["Share this page", "Cookie settings", "© 2024 Example Inc. All rights reserved.", "Read more »"]


def _corpus() -> pa.Table:
    rng = random.Random(11)
    docs = []
    for i in range(80):
        d = Document(f"doc{i:03d}", f"https://example.org/{i}", "html")
        for j in range(rng.randint(1, 3)):
            lines = [rng.choice(BOILERPLATE) if rng.random() < 0.35 else f"sentence {rng.randint(0, 60)} on {i % 9}"
                     for _ in range(rng.randint(1, 5))]
            d.add_text("\n".join(lines))
            if rng.random() < 0.4:
                d.add_image(f"https://example.org/{i}-{j}.png", bytes([i, j]), {"sha256": f"{i:02x}{j:02x}" * 16})
        docs.append(d)
    only_boiler = Document("doc900", None, "html")
    only_boiler.add_text("Share this page\nCookie settings")
    docs.append(only_boiler)
    dead = Document("doc000-dead", None, "html")  # smallest id: would win if tombstones counted
    dead.add_text("sentence 1 on 0\nShare this page")
    dead_t = with_tombstones(documents_to_table([dead]), "upstream", TombstoneKind.FILTERED, ["words < min"], ["{}"])
    return pa.concat_tables([dead_t, documents_to_table(docs)], promote_options="default")


def _run(table: pa.Table, blocks: int, seed: int, events: list, **params) -> dict[str, dict]:
    import ray

    rows = list(range(table.num_rows))
    random.Random(seed).shuffle(rows)
    shuffled = table.take(pa.array(rows))
    step = -(-shuffled.num_rows // blocks)
    ds = ray.data.from_arrow([shuffled.slice(i, step) for i in range(0, shuffled.num_rows, step)])
    ctx = RunContext(run_dir="/tmp", node_id="ccnet", emit=events.append)
    out = CcnetParagraphDedup(CcnetParagraphDedupParams(**params)).apply(ds, ctx)
    return {r["id"]: r for r in out.take_all()}


@pytest.mark.parametrize("keep", ["none", "first"])
def test_same_result_on_ray_for_any_blocks_and_partitions(ray_session, keep):
    table = _corpus()
    expected_tables, expected_counts = dedup_tables([table], keep=keep, node="ccnet")
    expected = {r["id"]: r for r in expected_tables[0].to_pylist()}
    for blocks, seed, parts in ((1, 0, 1), (5, 1, 3), (9, 2, None)):
        events: list = []
        got = _run(table, blocks, seed, events, keep=keep, num_partitions=parts)
        assert got == expected, (blocks, parts)
        (event,) = [e for e in events if e["event"] == "ccnet_paragraph_dedup"]
        assert {k: event[k] for k in expected_counts} == expected_counts
        assert event["blocks"] == blocks and event["node"] == "ccnet"

    dead = expected["doc000-dead"]
    assert dead[NODE_COL] == "upstream" and dead[REMOVED_COL] is None
    assert dead["texts"] == ["sentence 1 on 0\nShare this page"]
    gone = expected["doc900"]
    assert gone[KIND_COL] == TombstoneKind.DUPLICATE.value and gone[REASON_COL] == NO_TEXT_LEFT
    assert expected_counts["removed_paragraphs"] > 0 and expected_counts["removed_bytes"] > 0
    live_text = [t for r in expected.values() if r[NODE_COL] is None for t in (r["texts"] or []) if t]
    if keep == "none":  # boilerplate is gone from every page
        assert not any(b in t.split("\n") for t in live_text for b in BOILERPLATE)
    else:  # each boilerplate line survives once
        for b in BOILERPLATE:
            assert sum(t.split("\n").count(b) for t in live_text) == 1


def test_plain_text_column_and_an_empty_input(ray_session):
    import ray

    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]  # not digits: those all normalise to 0
    table = pa.table({"id": [f"r{i}" for i in range(6)], "text": [f"Same header\nbody {w}" for w in words]})
    ds = ray.data.from_arrow([table.slice(0, 3), table.slice(3)])
    events: list = []
    out = CcnetParagraphDedup(CcnetParagraphDedupParams(text_key="text", keep="first")).apply(
        ds, RunContext(run_dir="/tmp", node_id="ccnet", emit=events.append))
    rows = {r["id"]: r["text"] for r in out.take_all()}
    assert rows["r0"] == "Same header\nbody alpha"
    assert all(rows[f"r{i}"] == f"body {words[i]}" for i in range(1, 6))
    assert events[0]["removed_paragraphs"] == 5 and events[0]["partitions"] == 2

    empty = ray.data.from_arrow(table.slice(0, 0))
    out = CcnetParagraphDedup(CcnetParagraphDedupParams(text_key="text")).apply(
        empty, RunContext(run_dir="/tmp", node_id="ccnet"))
    assert out.count() == 0
