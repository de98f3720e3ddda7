"""Rows a node dropped are stored under that node (``rejects/<node>/``, ``quarantine/<node>/``), not
under the segment's sink; without Ray: the sink split, the store's folders, the error budget's quote
and the service's reader."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raypress.dag.error_budget import first_error
from raypress.dag.sink import PART, SegmentSink, node_folder, number_parts, parts_in_order
from raypress.dag.store import RunStore
from raypress.schema import DETAIL_COL, ID_COL, KIND_COL, NODE_COL, REASON_COL
from raypress.serving.pipelines.run_files import RejectQuery, reject_parts, rejects_page

# (id, node, kind, reason, detail); node None: a live row
ROWS = [
    ("a", None, None, None, None),
    ("b", "short", "filtered", "num_words < min", json.dumps({"num_words": 1})),
    ("c", "special", "filtered", "special_char_ratio > max", json.dumps({"special_char_ratio": 0.9})),
    ("d", "short", "filtered", "num_words < min", json.dumps({"num_words": 2})),
    ("e", "clean", "error", "ValueError", "boom"),
    ("f", "dedup", "duplicate", "a", None),
    ("g", None, None, None, None),
]


def _batch(rows: list[tuple]) -> pa.Table:
    ids, nodes, kinds, reasons, details = (list(c) for c in zip(*rows))
    return pa.table({ID_COL: ids, "text": [f"text of {i}" for i in ids], NODE_COL: pa.array(nodes, pa.string()),
                     KIND_COL: pa.array(kinds, pa.string()), REASON_COL: pa.array(reasons, pa.string()),
                     DETAIL_COL: pa.array(details, pa.string())})


def _sink(store: RunStore, keep_rejects: bool = False) -> SegmentSink:
    return SegmentSink("out", str(store.node_dir("out")), None, None, str(store.rejects_root),
                       str(store.quarantine_root), keep_rejects)


def _ids(folder: Path) -> list[str]:
    return [r for f in sorted(folder.glob("part-*.parquet")) for r in pq.read_table(f).column(ID_COL).to_pylist()]


def test_each_nodes_dropped_rows_go_to_its_own_folder_under_one_token(tmp_path):
    store = RunStore(tmp_path)
    tallies = _sink(store)(_batch(ROWS)).to_pylist()
    assert _ids(store.node_dir("out")) == ["a", "g"]
    assert _ids(store.rejects_dir("short")) == ["b", "d"]
    assert _ids(store.rejects_dir("special")) == ["c"]
    assert _ids(store.rejects_dir("dedup")) == ["f"]
    assert _ids(store.quarantine_dir("clean")) == ["e"]
    assert not store.rejects_dir("out").exists() and not store.rejects_dir("clean").exists()
    assert not store.quarantine_dir("short").exists()
    token = parts_in_order(tallies)[0]
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("part-*"))
    assert written == [f"nodes/out/part-{token}.parquet", f"quarantine/clean/part-{token}.parquet",
                       f"rejects/dedup/part-{token}.parquet", f"rejects/short/part-{token}.parquet",
                       f"rejects/special/part-{token}.parquet"]
    dup = pq.read_table(next(store.rejects_dir("dedup").glob("*.parquet"))).to_pylist()
    assert dup[0][REASON_COL] == "a" and dup[0][NODE_COL] == "dedup"  # the kept twin; _rp_node stays
    counted = {(t["node"], t["kind"], t["reason"]): t["n"] for t in tallies if t["kind"] != PART and t["node"]}
    assert counted == {("short", "filtered", "num_words < min"): 2, ("special", "filtered", "special_char_ratio > max"): 1,
                       ("clean", "error", "ValueError"): 1, ("dedup", "duplicate", ""): 1}


def test_rejects_are_slim_unless_kept_and_quarantine_keeps_the_row(tmp_path):
    store = RunStore(tmp_path)
    _sink(store)(_batch(ROWS))
    assert "text" not in pq.read_table(next(store.rejects_dir("short").glob("*.parquet"))).column_names
    assert "text" in pq.read_table(next(store.quarantine_dir("clean").glob("*.parquet"))).column_names
    kept = RunStore(tmp_path / "kept")
    _sink(kept, keep_rejects=True)(_batch(ROWS))
    assert "text" in pq.read_table(next(kept.rejects_dir("short").glob("*.parquet"))).column_names


def test_parts_of_every_node_folder_are_numbered_in_arrival_order(tmp_path):
    store = RunStore(tmp_path)
    sink = _sink(store)
    tallies = sink(_batch(ROWS[:3])).to_pylist() + sink(_batch(ROWS[3:])).to_pylist()  # "d" (short) in the 2nd
    dirs = store.dropped_dirs(["short", "special", "clean", "dedup", "out"])
    number_parts(dirs, parts_in_order(tallies))
    first, second = parts_in_order(tallies)
    assert sorted(p.name for p in store.rejects_dir("short").iterdir()) == [
        f"part-00000000-{first}.parquet", f"part-00000001-{second}.parquet"]
    assert _ids(store.rejects_dir("short")) == ["b", "d"]
    assert [p.name for p in store.quarantine_dir("clean").iterdir()] == [f"part-00000001-{second}.parquet"]


def test_clearing_a_segment_clears_its_nodes_folders_and_only_those(tmp_path):
    store = RunStore(tmp_path)
    _sink(store)(_batch(ROWS))
    store.clear_outputs("out", nodes=["short", "special", "out"])
    assert not store.rejects_dir("short").exists() and not store.rejects_dir("special").exists()
    assert _ids(store.rejects_dir("dedup")) == ["f"] and _ids(store.quarantine_dir("clean")) == ["e"]
    store.clear_outputs("clean")  # a step alone (a stage): its own folders
    assert not store.quarantine_dir("clean").exists() and store.rejects_dir("dedup").exists()


@pytest.mark.parametrize("node", ["..", "../x", "a/../../x", "/abs", "", "."])
def test_a_node_id_that_would_leave_the_folder_is_refused(tmp_path, node):
    with pytest.raises(ValueError, match="cannot name a folder"):
        node_folder(tmp_path / "rejects", node)


def test_the_error_budget_quotes_the_first_error_from_the_nodes_folder(tmp_path):
    store = RunStore(tmp_path)
    _sink(store)(_batch(ROWS))
    assert first_error(store.quarantine_root, "clean") == "row 'e': boom"
    assert first_error(store.quarantine_root, "short") == "(see quarantine)"


def test_the_reader_reads_only_the_nodes_folders(tmp_path):
    store = RunStore(tmp_path)
    _sink(store)(_batch(ROWS))
    assert [p.relative_to(tmp_path).parts[:2] for p in reject_parts(tmp_path, "short")] == [("rejects", "short")]
    rows = rejects_page(tmp_path, RejectQuery("short", "num_words < min", None, 10), None, {"min_num": 3})["rows"]
    assert [(r["id"], r["detail"], r["threshold"]["value"]) for r in rows] == [
        ("b", {"num_words": 1}, 3), ("d", {"num_words": 2}, 3)]
    dup = rejects_page(tmp_path, RejectQuery("dedup", None, "duplicate", 10), None, {})["rows"]
    assert [(r["id"], r["reason"]) for r in dup] == [("f", "a")]
    assert rejects_page(tmp_path, RejectQuery("clean", None, None, 10), None, {})["rows"][0]["detail"] == "boom"
    assert rejects_page(tmp_path, RejectQuery("out", None, None, 10), None, {})["rows"] == []


def test_a_run_from_before_keeps_its_rows_findable_under_the_sink(tmp_path):
    """An older run (or a resumed one whose segment was skipped) kept every node's rows under the
    segment's sink: a node without folders of its own is found there by ``_rp_node``."""
    legacy = tmp_path / "rejects" / "out" / "part-00000000-x.parquet"
    legacy.parent.mkdir(parents=True)
    dead = [r for r in ROWS if r[1] not in (None, "clean")]
    pq.write_table(_batch(dead).drop_columns(["text"]), legacy, row_group_size=1)
    (tmp_path / "rejects" / "other").mkdir()
    pq.write_table(_batch([("z", "other", "filtered", "x", None)]), tmp_path / "rejects" / "other" / "part-0.parquet")
    rows = rejects_page(tmp_path, RejectQuery("short", None, None, 1), None, {})
    assert [r["id"] for r in rows["rows"]] == ["b"]
    rest = rejects_page(tmp_path, RejectQuery("short", None, None, 10), rows["next_cursor"], {})
    assert [r["id"] for r in rest["rows"]] == ["d"] and rest["next_cursor"] is None
