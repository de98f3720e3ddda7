"""The analyzer's sketches against exact computations on real text (no Ray): histograms equal
numpy's, quantiles lie within the KLL sketch's stated rank error, the overlap matrix and unique
drops equal a brute-force count, and merging blocks in any grouping gives the same analysis."""

from __future__ import annotations

import numpy as np
import pytest

from raypress.dag.analyze.block import analyze_block
from raypress.dag.analyze.finalize import QUANTILES, output_report
from raypress.dag.analyze.partial import NEAREST_K, Partial
from raypress.dag.analyze.stat_sketch import rank_error
from tests.analysis_fixtures import descriptions, plan_for, quickstart_pipeline, range_drops, short_rows, with_stats


@pytest.fixture(scope="module")
def vp():
    return quickstart_pipeline()


@pytest.fixture(scope="module", params=["descriptions", "short_rows"])
def corpus(request, vp):
    rows = descriptions() if request.param == "descriptions" else short_rows(100_000)
    if len(rows) < 20:
        pytest.skip("too few installed package descriptions")
    return with_stats(rows, vp)


def analyze_in_blocks(table, plan, sizes):
    total = Partial([f.node for f in plan.filters])
    start = 0
    for size in sizes:
        total.merge(analyze_block(table.slice(start, size), plan))
        start += size
    assert start >= table.num_rows
    return total


def blocks_of(n, size):
    return [size] * (n // size + 1)


@pytest.fixture(scope="module")
def report(corpus, vp):
    plan = plan_for(vp, corpus)
    part = analyze_in_blocks(corpus, plan, blocks_of(corpus.num_rows, 997))
    return output_report(plan, part, [])


def stat_values(table, stat):
    return np.asarray(table["stats"].combine_chunks().field(stat).to_pylist(), dtype=float)


def test_histograms_equal_numpy(report, corpus):
    for s in report["stats"]:
        values = stat_values(corpus, s["stat"])
        edges = np.asarray(s["histogram"]["edges"], dtype=float)
        expected, _ = np.histogram(values, bins=edges)
        assert s["histogram"]["counts"] == expected.tolist(), s["stat"]
        assert sum(s["histogram"]["counts"]) == len(values)


def test_quantiles_within_stated_rank_error(report, corpus):
    eps = rank_error()
    for s in report["stats"]:
        values = np.sort(stat_values(corpus, s["stat"]))
        for name, q in QUANTILES.items():
            estimate = s["quantiles"][name]
            below = np.searchsorted(values, estimate, side="left") / len(values)
            at_or_below = np.searchsorted(values, estimate, side="right") / len(values)
            assert below - eps <= q <= at_or_below + eps, (s["stat"], name, estimate, below, at_or_below)


def test_moments_are_exact(report, corpus):
    for s in report["stats"]:
        values = stat_values(corpus, s["stat"])
        assert s["count"] == len(values)
        assert s["mean"] == pytest.approx(values.mean(), rel=1e-9)
        assert s["std"] == pytest.approx(values.std(), rel=1e-9, abs=1e-12)
        assert (s["min"], s["max"]) == (values.min(), values.max())


def test_overlap_and_unique_drops_equal_brute_force(report, corpus, vp):
    drops = range_drops(vp, corpus)
    nodes = report["overlap"]["nodes"]
    matrix = np.column_stack([drops[n] for n in nodes])
    assert report["overlap"]["rows"] == (matrix.T.astype(int) @ matrix.astype(int)).tolist()
    only_one = matrix.sum(axis=1) == 1
    assert [f["unique_drops"] for f in report["filters"]] == [int((matrix[:, i] & only_one).sum())
                                                             for i in range(len(nodes))]
    assert report["dropped_any"] == int(matrix.any(axis=1).sum())
    assert matrix.any(), "the quickstart's filters drop something of real text"


def test_threshold_keep_and_sensitivity_equal_brute_force(report, corpus, vp):
    drops = range_drops(vp, corpus)
    for s in report["stats"]:
        values = stat_values(corpus, s["stat"])
        others = ~np.column_stack([d for n, d in drops.items() if n != s["node"]]).any(axis=1)
        for t in s["thresholds"]:
            kept = values >= t["value"] if t["side"] == "min" else values <= t["value"]
            assert t["kept"] == int(kept.sum()), (s["stat"], t["param"])
        for curve in s["sensitivity"]:
            at = curve["threshold"].index(next(x for x in curve["threshold"] if x >= curve["current"]))
            moved = np.asarray(curve["threshold"])
            for i in (0, at, len(moved) - 1):
                x = moved[i]
                alone = values >= x if curve["side"] == "min" else values < x
                assert curve["keep_pct_alone"][i] == pytest.approx(100 * alone.mean(), abs=1e-3)
                assert curve["keep_pct_pipeline"][i] == pytest.approx(100 * (alone & others).mean(), abs=1e-3)


def test_nearest_rows_are_the_closest(report, corpus):
    ids = np.asarray(corpus["id"].to_pylist(), dtype=object)
    for s in report["stats"]:
        values = stat_values(corpus, s["stat"])
        for near in s["nearest"]:
            t = near["threshold"]
            kept = values >= t if near["side"] == "min" else values <= t
            for side, mask in (("kept", kept), ("dropped", ~kept)):
                want = np.sort(np.abs(values[mask] - t))[:NEAREST_K]
                got = [r["distance"] for r in near[side]]
                assert got == pytest.approx(want.tolist()), (s["stat"], side)
                assert all(r["id"] in set(ids[mask]) for r in near[side])


def test_any_grouping_of_blocks_gives_the_same_report(corpus, vp):
    plan = plan_for(vp, corpus)
    one = output_report(plan, analyze_in_blocks(corpus, plan, [corpus.num_rows]), [])
    many = output_report(plan, analyze_in_blocks(corpus, plan, blocks_of(corpus.num_rows, 313)), [])
    for a, b in zip(one["stats"], many["stats"]):
        assert a["histogram"] == b["histogram"] and a["thresholds"] == b["thresholds"]
        assert a["count"] == b["count"] and a["mean"] == pytest.approx(b["mean"])
        assert a["sensitivity"] == b["sensitivity"]
    assert one["overlap"] == many["overlap"] and one["funnel"] == many["funnel"]
    assert one["slices"] == many["slices"]


def test_merging_merged_partials_gives_the_same_report(corpus, vp):
    """Two levels, as in Ray: each task merges its batches, the driver merges the tasks' results."""
    plan = plan_for(vp, corpus)
    flat = output_report(plan, analyze_in_blocks(corpus, plan, blocks_of(corpus.num_rows, 500)), [])
    half = corpus.num_rows // 2
    driver = Partial([f.node for f in plan.filters])
    for start, size in ((0, half), (half, corpus.num_rows - half)):
        driver.merge(analyze_in_blocks(corpus.slice(start, size), plan, blocks_of(size, 500)))
    two_level = output_report(plan, driver, [])
    for a, b in zip(flat["stats"], two_level["stats"]):
        assert a["histogram"] == b["histogram"] and a["sensitivity"] == b["sensitivity"]
        assert a["count"] == b["count"] and a["mean"] == pytest.approx(b["mean"])
    assert flat["overlap"] == two_level["overlap"] and flat["slices"] == two_level["slices"]


def test_funnel_applies_filters_in_order(report, corpus, vp):
    drops = range_drops(vp, corpus)
    alive = np.ones(corpus.num_rows, bool)
    steps = {s["node"]: s["rows"] for s in report["funnel"]}
    for nid in report["overlap"]["nodes"]:
        alive &= ~drops[nid]
        assert steps[nid] == int(alive.sum())
