"""One block of an output's rows -> its ``Partial``: runs inside a Ray task, never in the driver.

The filters' own ``drop_reasons`` judge each row from its stats (the rule the pipeline applies, not
a re-implementation), which gives a row x filter matrix of drops: co-rejections, unique drops and
the funnel are sums over it; every stat's sketch is cut by the other filters' verdicts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raypress.dag.analyze.fine_bins import bucket_of, edges_with, threshold_edge
from raypress.dag.analyze.partial import NEAREST_K, Nearest, Partial, SliceTotals
from raypress.dag.analyze.stat_sketch import StatSketch
from raypress.dag.analyze.thresholds import Threshold
from raypress.dag.row_source import source_of

SNIPPET_CHARS = 240
TOKEN_COLUMNS = ("n_token", "num_tokens", "token_count", "n_tokens")  # a row's own token count
SLICE_COLUMNS = {"host": "url", "form_type": "form_type", "file": "id"}


@dataclass
class FilterSpec:
    node: str
    op: str
    op_cls: type
    params: Any
    stat_names: tuple[str, ...]
    thresholds: list[Threshold]
    range_rule: Any = None  # the node's Data-Juicer range keys (dag.dj_op_keys), None: closed


@dataclass
class OutputPlan:
    """What to compute over one writer's output (built in the driver, shipped to the tasks)."""

    writer: str
    filters: list[FilterSpec]
    text_key: str | None = "text"
    token_column: str | None = None
    slice_keys: list[str] = field(default_factory=list)
    _ops: dict = field(default_factory=dict, repr=False, compare=False)
    _edges: dict = field(default_factory=dict, repr=False, compare=False)

    def op(self, spec: FilterSpec):
        """The filter, built once per worker process (a filter may load a model)."""
        if spec.node not in self._ops:
            op = spec.op_cls(spec.params, None)
            if spec.range_rule is not None:
                op.range_rule = spec.range_rule
            self._ops[spec.node] = op
        return self._ops[spec.node]

    def stat_owner(self, stat: str) -> int | None:
        return next((i for i, f in enumerate(self.filters) if stat in self.op_stat_names(f)), None)

    def op_stat_names(self, spec: FilterSpec) -> tuple[str, ...]:
        return tuple(getattr(self.op(spec), "stat_names", ()) or spec.stat_names)

    def thresholds_of(self, stat: str) -> list[tuple[int, Threshold]]:
        return [(i, t) for i, f in enumerate(self.filters) for t in f.thresholds if t.stat == stat]

    def edges(self, stat: str) -> np.ndarray:
        if stat not in self._edges:
            self._edges[stat] = edges_with(threshold_edge(t.value, t.side) for _, t in self.thresholds_of(stat))
        return self._edges[stat]

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_ops"], state["_edges"] = {}, {}
        return state


def row_tokens(table: pa.Table, plan: OutputPlan) -> np.ndarray:
    """Each row's tokens: its own count column, else whitespace-separated words of its text."""
    if plan.token_column and plan.token_column in table.column_names:
        return pc.fill_null(table[plan.token_column], 0).to_numpy(zero_copy_only=False).astype(np.float64)
    if plan.text_key and plan.text_key in table.column_names:
        words = pc.list_value_length(pc.utf8_split_whitespace(table[plan.text_key]))
        return pc.fill_null(words, 0).to_numpy(zero_copy_only=False).astype(np.float64)
    return np.zeros(table.num_rows)


def numeric_stats(table: pa.Table) -> dict[str, np.ndarray]:
    """The numeric fields of the ``stats`` struct as float arrays (NaN where null)."""
    if "stats" not in table.column_names:
        return {}
    col = table["stats"].combine_chunks()
    if not pa.types.is_struct(col.type):
        return {}
    out = {}
    for i in range(col.type.num_fields):
        f = col.type.field(i)
        if pa.types.is_boolean(f.type) or not (pa.types.is_integer(f.type) or pa.types.is_floating(f.type)):
            continue
        values = col.field(i)
        if col.null_count:  # a row with no stats struct has none of its fields either
            values = pc.if_else(col.is_valid(), values, pa.nulls(len(values), values.type))
        out[f.name] = pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    return out


def drop_matrix(table: pa.Table, plan: OutputPlan) -> np.ndarray:
    """[row, filter]: True where the filter, at its thresholds, drops the row."""
    matrix = np.zeros((table.num_rows, len(plan.filters)), dtype=bool)
    if "stats" not in table.column_names or not table.num_rows:
        return matrix
    col = table["stats"].combine_chunks()
    present = {col.type.field(i).name: i for i in range(col.type.num_fields)}
    for j, spec in enumerate(plan.filters):
        names = plan.op_stat_names(spec)
        if not names or any(n not in present for n in names):
            continue
        stats = {n: col.field(present[n]).to_pylist() for n in names}
        reasons = plan.op(spec).drop_reasons(stats)
        matrix[:, j] = [r is not None for r in reasons]
    return matrix


def analyze_block(table: pa.Table, plan: OutputPlan) -> Partial:
    n_filters = len(plan.filters)
    part = Partial([f.node for f in plan.filters])
    n = table.num_rows
    if not n:
        return part
    tokens = row_tokens(table, plan)
    drops = drop_matrix(table, plan)
    part.rows, part.tokens = n, float(tokens.sum())
    any_drop = drops.any(axis=1)
    part.dropped_any, part.dropped_any_tokens = int(any_drop.sum()), float(tokens[any_drop].sum())
    as_int = drops.astype(np.int64)
    part.co_reject = as_int.T @ as_int
    part.co_reject_tokens = (drops * tokens[:, None]).T @ as_int.astype(np.float64)
    only = drops & (as_int.sum(axis=1) == 1)[:, None]
    part.unique, part.unique_tokens = only.sum(axis=0).astype(np.int64), tokens @ only
    first = np.where(any_drop, np.argmax(drops, axis=1), n_filters)
    part.first_reject = np.bincount(first, minlength=n_filters + 1).astype(np.int64)
    part.first_reject_tokens = np.bincount(first, weights=tokens, minlength=n_filters + 1)
    stats = numeric_stats(table)
    for stat, values in stats.items():
        part.stats[stat], near = _stat_sketch(stat, values, tokens, drops, plan, table)
        part.nearest.update(near)
        part.seen_stats.add(stat)
    for key in plan.slice_keys:
        part.slices[key] = _slice(table, key, tokens, any_drop, drops)
    return part


def _stat_sketch(stat: str, values: np.ndarray, tokens: np.ndarray, drops: np.ndarray, plan: OutputPlan,
                 table: pa.Table) -> tuple[StatSketch, dict[str, Nearest]]:
    valid = np.isfinite(values)
    edges = plan.edges(stat)
    owner = plan.stat_owner(stat)
    others = None
    if owner is not None:
        others = ~np.delete(drops, owner, axis=1).any(axis=1)[valid]
    v = values[valid]
    sketch = StatSketch.of(v, int((~valid).sum()), bucket_of(v, edges), tokens[valid], others, len(edges) - 1)
    near = {}
    rows = np.flatnonzero(valid)
    for _, t in plan.thresholds_of(stat):
        near[f"{t.stat}|{t.side}|{t.param}"] = _nearest(v, rows, t, table, plan)
    return sketch, near


def _nearest(values: np.ndarray, rows: np.ndarray, t: Threshold, table: pa.Table, plan: OutputPlan) -> Nearest:
    kept = values >= t.value if t.side == "min" else values <= t.value
    distance = np.abs(values - t.value)
    out = Nearest()
    for side, mask in (("kept", kept), ("dropped", ~kept)):
        idx = np.flatnonzero(mask)
        if len(idx) > NEAREST_K:
            idx = idx[np.argpartition(distance[idx], NEAREST_K - 1)[:NEAREST_K]]
        idx = idx[np.lexsort((idx, distance[idx]))]  # nearest first, as a merge orders them
        setattr(out, side, [_row_card(table, int(rows[i]), float(values[i]), float(distance[i]), plan)
                            for i in idx])
    return out


def _row_card(table: pa.Table, i: int, value: float, distance: float, plan: OutputPlan) -> dict[str, Any]:
    row_id = table["id"][i].as_py() if "id" in table.column_names else str(i)
    text = None
    if plan.text_key and plan.text_key in table.column_names:
        full = table[plan.text_key][i].as_py()
        text = full[:SNIPPET_CHARS] if isinstance(full, str) else None
    return {"id": row_id, "value": value, "distance": distance, "text": text,
            "source": source_of(row_id if isinstance(row_id, str) else None)}


def slice_values(table: pa.Table, key: str) -> list[str]:
    column = SLICE_COLUMNS[key]
    raw = table[column].to_pylist()
    if key == "host":
        return [(urlsplit(u).hostname or "(none)") if isinstance(u, str) and u else "(none)" for u in raw]
    if key == "file":
        return [((source_of(x) or {}).get("file") or "(none)") if isinstance(x, str) else "(none)" for x in raw]
    return ["(none)" if x is None else str(x) for x in raw]


def _slice(table: pa.Table, key: str, tokens: np.ndarray, any_drop: np.ndarray, drops: np.ndarray) -> SliceTotals:
    values, inverse = np.unique(np.asarray(slice_values(table, key), dtype=object), return_inverse=True)
    columns = np.column_stack([np.ones(len(tokens)), tokens, any_drop.astype(np.float64),
                               drops.astype(np.float64)])
    sums = np.zeros((len(values), columns.shape[1]))
    np.add.at(sums, inverse, columns)
    totals = SliceTotals(drops.shape[1])
    for value, row in zip(values, sums):
        totals.add(str(value), row)
    return totals
