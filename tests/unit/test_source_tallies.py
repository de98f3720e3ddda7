"""Per-source accounting (settings.source_key): tallies at the sink, by_source in the ledger,
cross-source duplicates attributed to the source that kept the twin, and tag_source_mapper."""

from __future__ import annotations

import pyarrow as pa
import pytest

from raypress.dag.ledger import Ledger, check_edges, segment_entries
from raypress.dag.sink import LIVE, TOTAL, sum_tallies
from raypress.dag.source_tallies import UNKNOWN, by_source_entries, source_tallies, twin_source
from raypress.operators.base import OpKind
from raypress.operators.general.tag_source_mapper import TagSourceMapper, TagSourceParams
from raypress.schema import KIND_COL, NODE_COL, REASON_COL, TombstoneKind, alive_mask, ensure_tombstone_columns


def _batch() -> pa.Table:
    """Six rows of two sources after a filter and a cross-source dedup ran on them."""
    table = ensure_tombstone_columns(pa.table({
        "id": ["web/1", "web/2", "web/3", "sec/1", "sec/2", "sec/3"],
        "corpus": ["web", "web", "web", "sec", "sec", "sec"],
    }))
    node = [None, "short", "dedup", None, "dedup", "dedup"]
    kind = [None, "filtered", "duplicate", None, "duplicate", "duplicate"]
    reason = [None, "words_num", "sec/1", None, "web/1", "sec/1"]
    return table.set_column(table.schema.get_field_index(NODE_COL), NODE_COL, pa.array(node, pa.string())) \
        .set_column(table.schema.get_field_index(KIND_COL), KIND_COL, pa.array(kind, pa.string())) \
        .set_column(table.schema.get_field_index(REASON_COL), REASON_COL, pa.array(reason, pa.string()))


def _totals(table: pa.Table) -> dict:
    mask = alive_mask(table)
    rows = [{"node": n, "kind": k, "reason": r, "n": c} for n, k, r, c in source_tallies(table, mask, "corpus")]
    rows += [{"node": "", "kind": TOTAL, "reason": "", "n": table.num_rows},
             {"node": "", "kind": LIVE, "reason": "", "n": 2},
             {"node": "short", "kind": TombstoneKind.FILTERED.value, "reason": "words_num", "n": 1},
             {"node": "dedup", "kind": TombstoneKind.DUPLICATE.value, "reason": "", "n": 3}]
    return sum_tallies(rows)


def test_a_cross_source_duplicate_is_counted_against_the_source_that_lost_it() -> None:
    entries, problems = by_source_entries(["short", "dedup"], _totals(_batch()))
    assert problems == []
    assert entries["short"]["web"] == {"rows_in": 3, "rows_out": 2, "dropped": {"words_num": 1}, "duplicates": 0,
                                       "lost_to": {}, "quarantined": 0}
    # web/3 lost to sec/1 (cross-source); sec/2 lost to web/1 (cross) and sec/3 to sec/1 (within)
    assert entries["dedup"]["web"]["lost_to"] == {"sec": 1}
    assert entries["dedup"]["sec"]["lost_to"] == {"sec": 1, "web": 1}
    assert entries["dedup"]["web"]["rows_out"] == 1 and entries["dedup"]["sec"]["rows_out"] == 1


def test_segment_entries_carry_by_source_and_a_miscount_is_a_problem() -> None:
    chain = [("short", "words_num_filter", OpKind.FILTER), ("dedup", "document_deduplicator", OpKind.DEDUPLICATOR)]
    totals = _totals(_batch())
    entries, problems = segment_entries(chain, totals, 6, {})
    assert problems == []
    assert sum(s["rows_out"] for s in entries["dedup"]["by_source"].values()) == entries["dedup"]["rows_out"] == 2
    totals[("", "_src", "web\x1f_live\x1f")] += 1  # the sink saw a web row the walk cannot account for
    _, problems = segment_entries(chain, totals, 6, {})
    assert any("source 'web'" in p for p in problems)


def test_edges_between_nodes_add_up_per_source() -> None:
    def node(rows_in: int, rows_out: int, split: dict) -> dict:
        return {"op": "x", "kind": "mapper", "rows_in": rows_in, "rows_out": rows_out, "dropped": {},
                "duplicates": 0, "quarantined": 0, "by_source": split}

    def counts(n_in: int, n_out: int) -> dict:
        return {"rows_in": n_in, "rows_out": n_out}

    ledger = Ledger(nodes={"a": node(2, 2, {"web": counts(2, 2)}), "b": node(3, 3, {"sec": counts(3, 3)}),
                           "u": node(5, 5, {"web": counts(2, 2), "sec": counts(3, 3)})})
    check_edges(ledger, {"u": ["a", "b"]}, {"u": OpKind.MAPPER})
    assert ledger.problems == []
    ledger.nodes["u"]["by_source"] = {"web": counts(3, 3), "sec": counts(2, 2)}
    check_edges(ledger, {"u": ["a", "b"]}, {"u": OpKind.MAPPER})
    assert any("source 'web' rows_in 3 but its inputs gave 2" in p for p in ledger.problems)


def test_rows_without_a_source_and_ids_without_one_are_named_so() -> None:
    table = ensure_tombstone_columns(pa.table({"id": ["a", "b"], "corpus": [None, "web"]}))
    rows = source_tallies(table, alive_mask(table), "corpus")
    assert ("", "_src", f"{UNKNOWN}\x1f_total\x1f", 1) in rows
    assert twin_source("web/http://x/y") == "web" and twin_source("plain-id") == ""


def test_tag_source_names_the_source_prefixes_ids_and_keeps_only_shared_columns() -> None:
    op = TagSourceMapper(TagSourceParams(source="web", columns=["text", "url"], text_list_key="texts"))
    out = op.process_batch(pa.table({"id": ["1", "2"], "texts": [["a", None, "b"], None], "url": ["u1", "u2"],
                                     "stats": [{"x": 1.0}, {"x": 2.0}]}))
    assert out.column_names == ["id", "text", "url", "corpus"]
    assert out.to_pylist() == [{"id": "web/1", "text": "a\n\nb", "url": "u1", "corpus": "web"},
                               {"id": "web/2", "text": None, "url": "u2", "corpus": "web"}]
    with pytest.raises(ValueError, match="must not contain '/'"):
        TagSourceParams(source="a/b")


def test_tagging_a_branch_at_its_reader_then_narrowing_it_prefixes_ids_once() -> None:
    first = TagSourceMapper(TagSourceParams(source="sec", columns=None))
    raw = pa.table({"id": ["a", "b"], "text": ["x", "y"], "form": ["10-K", "8-K"]})
    tagged = first.process_batch(raw)
    assert tagged.column_names == ["id", "text", "form", "corpus"]
    narrowed = TagSourceMapper(TagSourceParams(source="sec")).process_batch(tagged)
    assert narrowed.to_pylist() == [{"id": "sec/a", "text": "x", "corpus": "sec"},
                                    {"id": "sec/b", "text": "y", "corpus": "sec"}]


def test_a_node_whose_segment_dropped_the_source_column_is_not_a_per_source_problem() -> None:
    def node(split: dict) -> dict:
        return {"op": "x", "kind": "mapper", "rows_in": 3, "rows_out": 3, "dropped": {}, "duplicates": 0,
                "quarantined": 0, "by_source": split}

    counts = {"rows_in": 3, "rows_out": 3}
    ledger = Ledger(nodes={"a": node({"web": counts}), "lambda": node({UNKNOWN: counts})})
    check_edges(ledger, {"lambda": ["a"]}, {"lambda": OpKind.MAPPER})
    assert ledger.problems == []
