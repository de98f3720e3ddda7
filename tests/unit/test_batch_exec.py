"""The streaming wrapper without Ray: tombstones pass through, filters mark, errors quarantine."""

from __future__ import annotations

import json

import pyarrow as pa

from raypress.dag.batch_exec import StreamingOpRunner, merge_stats
from raypress.operators.registry import get_op
from raypress.schema import with_tombstones, TombstoneKind


def runner(op: str, node: str, **params) -> StreamingOpRunner:
    cls = get_op(op)
    if cls.takes_code:  # what validation grants with `settings.allow_code: true`
        params["allow_code"] = True
    return StreamingOpRunner(cls, cls.Params(**params), None, node)


def test_filter_marks_rows_with_reason_and_stats_detail():
    t = pa.table({"id": ["a", "b", "c"], "text": ["one two three", "one", "one two"]})
    out = runner("words_num_filter", "w", min_num=2).__call__(t).to_pylist()
    assert [r["_rp_node"] for r in out] == [None, "w", None]
    b = out[1]
    assert b["_rp_kind"] == "filtered" and b["_rp_reason"] == "num_words < min"
    assert json.loads(b["_rp_detail"]) == {"num_words": 1.0}
    assert [r["stats"]["num_words"] for r in out] == [3.0, 1.0, 2.0]


def test_dead_rows_pass_through_untouched_and_are_not_processed():
    live = pa.table({"id": ["a"], "text": ["Mail x@y.com now"]})
    dead = with_tombstones(pa.table({"id": ["z"], "text": ["dead x@y.com"]}), "earlier",
                           TombstoneKind.FILTERED, ["r"], [None])
    t = pa.concat_tables([live.append_column("_rp_node", pa.nulls(1, pa.string()))
                          .append_column("_rp_kind", pa.nulls(1, pa.string()))
                          .append_column("_rp_reason", pa.nulls(1, pa.string()))
                          .append_column("_rp_detail", pa.nulls(1, pa.string())), dead])
    out = {r["id"]: r for r in runner("clean_email_mapper", "m")(t).to_pylist()}
    assert "x@y.com" not in out["a"]["text"]
    assert out["z"]["text"] == "dead x@y.com" and out["z"]["_rp_node"] == "earlier"


def test_raising_rows_are_quarantined_one_by_one_and_others_survive():
    t = pa.table({"id": ["a", "b", "c"], "text": ["ab", "", "abcd"]})
    out = runner("python_lambda_mapper", "inv", lambda_str="lambda s: {**s, 'inv': 1 / len(s['text'])}")(t)
    rows = {r["id"]: r for r in out.to_pylist()}
    assert rows["a"]["inv"] == 0.5 and rows["c"]["inv"] == 0.25
    assert rows["b"]["_rp_node"] == "inv" and rows["b"]["_rp_kind"] == "error"
    assert rows["b"]["_rp_reason"] == "ZeroDivisionError" and "division by zero" in rows["b"]["_rp_detail"]
    assert out.schema.field("_rp_node").type == pa.string()


def test_stats_only_mode_keeps_every_row():
    cls = get_op("words_num_filter")
    r = StreamingOpRunner(cls, cls.Params(min_num=5), None, "w", stats_only=True)
    out = r(pa.table({"id": ["a"], "text": ["short"]})).to_pylist()
    assert out[0]["_rp_node"] is None and out[0]["stats"]["num_words"] == 1.0


def test_merge_stats_adds_fields_and_keeps_existing():
    t = pa.table({"id": ["a", "b"]})
    t = merge_stats(t, {"x": [1, 2]})
    t = merge_stats(t, {"y": [0.5, 0.25]})
    assert t.column("stats").to_pylist() == [{"x": 1.0, "y": 0.5}, {"x": 2.0, "y": 0.25}]
