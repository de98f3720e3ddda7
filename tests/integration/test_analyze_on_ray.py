"""The analyzer inside Ray on 100,000 rows of real text: Ray tasks sketch the blocks, the driver
merges what streams back, and the result equals the same analysis computed in one process."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from raypress.dag.analyze.block import analyze_block
from raypress.dag.analyze.collect import analyze_output
from raypress.dag.analyze.finalize import output_report
from tests.analysis_fixtures import plan_for, quickstart_pipeline, short_rows, with_stats

pytestmark = pytest.mark.integration


def test_ray_analysis_equals_one_process_analysis(ray_session, tmp_path):
    vp = quickstart_pipeline()
    table = with_stats(short_rows(100_000), vp)
    out = tmp_path / "output"
    out.mkdir()
    for i in range(4):  # a writer's parts
        pq.write_table(table.slice(i * 25_000, 25_000), out / f"part-{i:08d}.parquet", row_group_size=5_000)
    plan = plan_for(vp, table)
    files = sorted(str(p) for p in out.glob("*.parquet"))
    on_ray = output_report(plan, analyze_output(plan, "parquet", files, table.column_names, on_ray=True), [])
    local = output_report(plan, analyze_block(table, plan), [])
    assert on_ray["rows"] == local["rows"] == 100_000
    assert on_ray["overlap"] == local["overlap"] and on_ray["funnel"] == local["funnel"]
    assert on_ray["filters"] == local["filters"]
    for a, b in zip(on_ray["stats"], local["stats"]):
        assert a["histogram"] == b["histogram"], a["stat"]
        assert a["thresholds"] == b["thresholds"] and a["sensitivity"] == b["sensitivity"]
        assert (a["count"], a["min"], a["max"]) == (b["count"], b["min"], b["max"])
        assert a["mean"] == pytest.approx(b["mean"]) and a["std"] == pytest.approx(b["std"])
        assert [n["kept"] for n in a["nearest"]] == [n["kept"] for n in b["nearest"]] or \
            [[r["distance"] for r in n["kept"]] for n in a["nearest"]] == \
            [[r["distance"] for r in n["kept"]] for n in b["nearest"]]
    assert {s["key"] for s in on_ray["slices"]} == {"file"}
    assert sum(v["rows"] for v in local["slices"][0]["values"]) <= 100_000


def test_duplicate_clusters_grouped_in_ray_equal_grouped_here(ray_session, tmp_path, monkeypatch):
    import pyarrow as pa

    from raypress.dag.analyze import collect
    from raypress.schema import ID_COL, KIND_COL, NODE_COL, REASON_COL

    twins = [f"doc-{i % 97}" for i in range(3_000)]  # 97 clusters of 30-31 duplicates
    nodes = ["dedup" if i % 10 else "other" for i in range(3_000)]
    for part in range(3):
        rows = slice(part * 1_000, (part + 1) * 1_000)
        pq.write_table(pa.table({ID_COL: [f"dup-{i}" for i in range(3_000)][rows], NODE_COL: nodes[rows],
                                 KIND_COL: ["duplicate"] * 1_000, REASON_COL: twins[rows]}),
                       tmp_path / f"part-{part}.parquet")
    files = sorted(str(p) for p in tmp_path.glob("*.parquet"))

    def grouped():
        return {t: n for b in collect._duplicates_per_twin(files, "dedup")
                for t, n in zip(b[REASON_COL].to_pylist(), b["count()"].to_pylist())}

    here = grouped()
    monkeypatch.setattr(collect, "LOCAL_BYTES", 0)
    assert grouped() == here
    expected = {}
    for twin, node in zip(twins, nodes):
        if node == "dedup":
            expected[twin] = expected.get(twin, 0) + 1
    assert here == expected
