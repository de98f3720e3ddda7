"""A merged ``Partial`` -> the JSON a person (or the report) reads: distributions, thresholds and
what they keep, suggestions, overlaps, the funnel, slices and the rows nearest each threshold."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from raypress.dag.analyze.block import OutputPlan
from raypress.dag.analyze.fine_bins import display_edges, regroup, threshold_edge
from raypress.dag.analyze.partial import Partial
from raypress.dag.analyze.stat_sketch import StatSketch
from raypress.dag.analyze.thresholds import suggestions

QUANTILES = {"p1": 0.01, "p5": 0.05, "p25": 0.25, "p50": 0.5, "p75": 0.75, "p95": 0.95, "p99": 0.99}
CURVE_POINTS = 60
SLICES_SHOWN = 25


def _num(x: float) -> float | None:
    """JSON has no NaN/inf."""
    return None if x is None or not math.isfinite(x) else float(x)


def is_skewed(sketch: StatSketch, q: dict[str, float]) -> bool:
    """Log-x for a long right tail of non-negative values: the 99th percentile over ten times the
    median and the maximum over thirty times (word counts, line lengths, perplexities)."""
    p50 = q["p50"]
    return (sketch.minimum >= 0 and p50 > 0 and q["p99"] / p50 > 10 and sketch.maximum / p50 > 30)


def keep_count(count: np.ndarray, edges: np.ndarray, side: str, value: float) -> int:
    """Rows a threshold keeps, exactly, from fine bucket counts (``value`` is one of the edges)."""
    at = int(np.searchsorted(edges, threshold_edge(value, side)))
    return int(count[at:].sum()) if side == "min" else int(count[:at].sum())


def sensitivity(sketch: StatSketch, edges: np.ndarray, side: str, rows: int, tokens: float, log: bool,
                thresholds: list[float]) -> dict[str, Any]:
    """Keep-% and kept tokens as the threshold moves over the stat's range: this filter alone, and
    with every other filter at its threshold (the pipeline's keep)."""
    count, tok = sketch.dense("all_rows")
    others_count, others_tok = sketch.dense("others_keep")
    filled = np.flatnonzero(count)
    if not len(filled):
        return {}
    current = [threshold_edge(t, side) for t in thresholds]
    points = np.unique(np.concatenate((display_edges(edges, count, log, CURVE_POINTS), current)))
    points = points[np.isfinite(points)]
    at = np.searchsorted(edges, points)

    def kept(values: np.ndarray) -> np.ndarray:
        c = np.concatenate(([0], np.cumsum(values)))
        below = c[at]  # sum over buckets entirely below each point
        return c[-1] - below if side == "min" else below

    denominator_rows = max(rows, 1)
    return {"side": side, "threshold": [float(p) for p in points],
            "keep_pct_alone": [round(100 * x / denominator_rows, 4) for x in kept(count)],
            "kept_tokens_alone": [float(x) for x in kept(tok)],
            "keep_pct_pipeline": [round(100 * x / denominator_rows, 4) for x in kept(others_count)],
            "kept_tokens_pipeline": [float(x) for x in kept(others_tok)],
            "tokens_total": float(tokens)}


def stat_report(stat: str, sketch: StatSketch, plan: OutputPlan, part: Partial) -> dict[str, Any]:
    edges = plan.edges(stat)
    q = dict(zip(QUANTILES, sketch.quantiles(list(QUANTILES.values()))))
    count, _ = sketch.dense("all_rows")
    log = is_skewed(sketch, q)
    shown = display_edges(edges, count, log)
    owner = plan.stat_owner(stat)
    out: dict[str, Any] = {
        "stat": stat, "node": plan.filters[owner].node if owner is not None else None,
        "op": plan.filters[owner].op if owner is not None else None,
        "count": sketch.count, "nulls": sketch.nulls, "mean": _num(sketch.mean), "std": _num(sketch.std),
        "min": _num(sketch.minimum), "max": _num(sketch.maximum),
        "quantiles": {k: _num(v) for k, v in q.items()},
        "histogram": {"scale": "log" if log else "linear", "edges": [_num(e) for e in shown],
                      "counts": [int(c) for c in regroup(edges, count, shown)],
                      # of those, the rows every other filter keeps (the rest are dropped anyway)
                      "counts_others_keep": [int(c) for c in regroup(edges, sketch.dense("others_keep")[0], shown)]
                      if owner is not None else None},
        "thresholds": [], "suggestions": [], "sensitivity": [], "nearest": [],
    }
    for _, t in plan.thresholds_of(stat):
        kept = keep_count(count, edges, t.side, t.value)
        out["thresholds"].append({"node": plan.filters[_].node, "side": t.side, "param": t.param,
                                  "value": t.value, "kept": kept,
                                  "keep_pct": round(100 * kept / max(sketch.count, 1), 4)})
        for s in suggestions(t.side, sketch.mean, sketch.std, q):
            if not sketch.minimum <= s["value"] <= sketch.maximum:  # beyond every value: cuts nothing
                continue
            rank = sketch.rank(s["value"], inclusive=(t.side == "max"))
            keep = rank if t.side == "max" else 1 - rank
            out["suggestions"].append({**s, "side": t.side, "param": t.param, "value": _num(s["value"]),
                                       "keep_pct_est": _num(round(100 * keep, 3))})
        curve = sensitivity(sketch, edges, t.side, part.rows, part.tokens, log, [t.value])
        if curve:
            out["sensitivity"].append({"param": t.param, "current": t.value, **curve})
        near = part.nearest.get(f"{t.stat}|{t.side}|{t.param}")
        if near is not None:
            out["nearest"].append({"param": t.param, "side": t.side, "threshold": t.value,
                                   "kept": [_card(r) for r in near.kept], "dropped": [_card(r) for r in near.dropped]})
    return out


def _card(row: dict[str, Any]) -> dict[str, Any]:
    return {k: (_num(v) if isinstance(v, float) else v) for k, v in row.items()}


def filters_report(plan: OutputPlan, part: Partial) -> dict[str, Any]:
    nodes = [f.node for f in plan.filters]
    rows = max(part.rows, 1)
    per = []
    for i, f in enumerate(plan.filters):
        names = plan.op_stat_names(f)
        missing = [n for n in names if n not in part.seen_stats]
        per.append({"node": f.node, "op": f.op, "drops": int(part.co_reject[i, i]),
                    "drop_pct": round(100 * part.co_reject[i, i] / rows, 4),
                    "tokens_dropped": float(part.co_reject_tokens[i, i]),
                    "unique_drops": int(part.unique[i]), "unique_tokens": float(part.unique_tokens[i]),
                    "stats": list(names), "stats_missing": missing})
    return {"filters": per,
            "overlap": {"nodes": nodes, "rows": part.co_reject.astype(int).tolist(),
                        "tokens": [[float(x) for x in r] for r in part.co_reject_tokens]},
            "dropped_any": part.dropped_any, "dropped_any_tokens": part.dropped_any_tokens}


def funnel(plan: OutputPlan, part: Partial, upstream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows (and tokens) left after each step: the ledger's counts up to the writer's input, then
    the filters applied in pipeline order to the rows that reached it."""
    steps = list(upstream)
    rows, tokens = part.rows, part.tokens
    steps.append({"node": "(analyzed)", "op": "rows reaching " + plan.writer, "rows": rows, "tokens": tokens})
    for i, f in enumerate(plan.filters):
        rows -= int(part.first_reject[i])
        tokens -= float(part.first_reject_tokens[i])
        steps.append({"node": f.node, "op": f.op, "rows": rows, "tokens": tokens})
    return steps


def slices_report(plan: OutputPlan, part: Partial) -> list[dict[str, Any]]:
    out = []
    nodes = [f.node for f in plan.filters]
    for key, totals in part.slices.items():
        ranked = sorted(totals.values.items(), key=lambda kv: (-kv[1][0], kv[0]))
        values = []
        for value, row in ranked[:SLICES_SHOWN]:
            values.append({"value": value, "rows": int(row[0]), "tokens": float(row[1]), "dropped": int(row[2]),
                           "drop_pct": round(100 * row[2] / max(row[0], 1), 3),
                           "by_filter": {n: int(c) for n, c in zip(nodes, row[3:]) if c}})
        distinct = len(totals.values)
        reason = ("every row has the same value" if distinct <= 1 else
                  "about one value per row" if distinct > max(part.rows // 2, 1) else None)
        out.append({"key": key, "distinct": distinct, "values": values, "informative": reason is None,
                    "reason": reason})
    return out


def output_report(plan: OutputPlan, part: Partial, upstream: list[dict[str, Any]]) -> dict[str, Any]:
    stats = [stat_report(stat, part.stats[stat], plan, part) for stat in sorted(part.stats, key=_stat_order(plan))]
    return {"writer": plan.writer, "rows": part.rows, "tokens": part.tokens, **filters_report(plan, part),
            "stats": stats, "funnel": funnel(plan, part, upstream), "slices": slices_report(plan, part)}


def _stat_order(plan: OutputPlan):
    def key(stat: str) -> tuple[int, str]:
        owner = plan.stat_owner(stat)
        return (len(plan.filters) if owner is None else owner, stat)
    return key
