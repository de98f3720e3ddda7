"""What one block contributes to the analysis, and how two contributions merge.

Everything here is a sum, a min/max, a KLL sketch or a bounded top-k, so merging block results in
any order gives the same analysis as one pass over all rows, with memory bounded by the number of
stats, filters and slice values, never by the number of rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from raypress.dag.analyze.stat_sketch import StatSketch

NEAREST_K = 5  # rows shown on each side of each threshold
SLICE_VALUES_KEPT = 500  # distinct values kept per slice key; the rest are summed as "(other)"
OTHER = "(other)"


@dataclass
class SliceTotals:
    """Per value of one slice key: rows, tokens, rows any filter drops, drops per filter."""

    n_filters: int
    values: dict[str, np.ndarray] = field(default_factory=dict)  # value -> [rows, tokens, any, f1..fn]

    def add(self, value: str, row: np.ndarray) -> None:
        mine = self.values.get(value)
        if mine is None:
            self.values[value] = row.astype(np.float64).copy()
        else:
            mine += row

    def merge(self, other: "SliceTotals") -> None:
        for value, row in other.values.items():
            self.add(value, row)
        if len(self.values) > SLICE_VALUES_KEPT:
            ranked = sorted(self.values.items(), key=lambda kv: (-kv[1][0], kv[0]))
            folded = np.sum([row for _, row in ranked[SLICE_VALUES_KEPT - 1:]], axis=0)
            self.values = dict(ranked[:SLICE_VALUES_KEPT - 1])
            self.add(OTHER, folded)


@dataclass
class Nearest:
    """The rows closest to one threshold on the kept side and on the dropped side."""

    kept: list[dict[str, Any]] = field(default_factory=list)
    dropped: list[dict[str, Any]] = field(default_factory=list)

    def merge(self, other: "Nearest") -> None:
        self.kept = _closest(self.kept + other.kept)
        self.dropped = _closest(self.dropped + other.dropped)


def _closest(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``NEAREST_K`` nearest, nearest first (ties by id: the same rows whatever the merge order)."""
    return sorted(rows, key=lambda r: (r["distance"], str(r["id"])))[:NEAREST_K]


@dataclass
class Partial:
    """The analysis of some rows of one output."""

    filters: list[str]  # node ids, execution order
    rows: int = 0
    tokens: float = 0.0
    stats: dict[str, StatSketch] = field(default_factory=dict)
    co_reject: np.ndarray | None = None  # [i, j]: rows both filter i and j drop
    co_reject_tokens: np.ndarray | None = None
    unique: np.ndarray | None = None  # rows only filter i drops
    unique_tokens: np.ndarray | None = None
    dropped_any: int = 0
    dropped_any_tokens: float = 0.0
    first_reject: np.ndarray | None = None  # rows whose first (in order) dropping filter is i; [n]: none
    first_reject_tokens: np.ndarray | None = None
    slices: dict[str, SliceTotals] = field(default_factory=dict)
    nearest: dict[str, Nearest] = field(default_factory=dict)  # "<node>|<stat>|<side>" -> rows
    seen_stats: set[str] = field(default_factory=set)  # numeric stats some row carried

    def __post_init__(self) -> None:
        n = len(self.filters)
        for name, shape, dtype in (("co_reject", (n, n), np.int64), ("co_reject_tokens", (n, n), np.float64),
                                   ("unique", (n,), np.int64), ("unique_tokens", (n,), np.float64),
                                   ("first_reject", (n + 1,), np.int64),
                                   ("first_reject_tokens", (n + 1,), np.float64)):
            if getattr(self, name) is None:
                setattr(self, name, np.zeros(shape, dtype))

    def merge(self, other: "Partial") -> None:
        self.rows += other.rows
        self.tokens += other.tokens
        self.dropped_any += other.dropped_any
        self.dropped_any_tokens += other.dropped_any_tokens
        for name in ("co_reject", "co_reject_tokens", "unique", "unique_tokens", "first_reject",
                     "first_reject_tokens"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        for stat, sketch in other.stats.items():
            if stat in self.stats:
                self.stats[stat].merge(sketch)
            else:
                self.stats[stat] = StatSketch(sketch.n_buckets)
                self.stats[stat].merge(sketch)
        for key, totals in other.slices.items():
            self.slices.setdefault(key, SliceTotals(totals.n_filters)).merge(totals)
        for key, near in other.nearest.items():
            self.nearest.setdefault(key, Nearest()).merge(near)
        self.seen_stats |= other.seen_stats
