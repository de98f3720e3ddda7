"""Fixed, data-independent bucket edges for every stat: what makes a histogram mergeable exactly.

Each block counts its values into the same fine buckets (1% wide in relative terms, from 1e-6 to
1e10 on both sides of zero, plus the pipeline's own thresholds as edges), so partial counts add up
with no loss; the report's ~40 display bins are unions of fine buckets, which is why their counts
equal ``numpy.histogram`` over the same edges.  Bucket ``i`` is ``[edges[i], edges[i+1])``."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

GAMMA = 1.01  # relative width of a fine bucket
SMALLEST, LARGEST = 1e-6, 1e10


def base_edges() -> np.ndarray:
    """-inf, -LARGEST ... -SMALLEST, 0, SMALLEST ... LARGEST, +inf (sorted)."""
    steps = int(np.ceil(np.log(LARGEST / SMALLEST) / np.log(GAMMA)))
    positive = SMALLEST * GAMMA ** np.arange(steps + 1)
    return np.concatenate(([-np.inf], -positive[::-1], [0.0], positive, [np.inf]))


def edges_with(extra: Iterable[float]) -> np.ndarray:
    """The base edges plus ``extra`` (thresholds), sorted and unique."""
    values = [float(x) for x in extra if x is not None and np.isfinite(x)]
    return np.unique(np.concatenate((base_edges(), np.asarray(values, dtype=float))))


def bucket_of(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Index ``i`` with ``edges[i] <= v < edges[i+1]`` for each (finite) value."""
    return np.searchsorted(edges, values, side="right") - 1


def threshold_edge(value: float, side: str) -> float:
    """The edge at which a threshold's keep count is exact: Data-Juicer's interval is closed, so a
    ``min`` keeps ``v >= min`` (edge at ``min``) and a ``max`` keeps ``v <= max`` (edge just above)."""
    return float(value) if side == "min" else float(np.nextafter(value, np.inf))


def display_edges(edges: np.ndarray, counts: np.ndarray, log: bool, bins: int = 40) -> np.ndarray:
    """About ``bins`` display edges, each one a fine edge, covering every non-empty fine bucket: the
    first is the start of the lowest bucket, the last the end of the highest (above the maximum)."""
    filled = np.flatnonzero(counts)
    if not len(filled):
        return np.array([0.0, 1.0])
    lo_i, hi_i = int(filled[0]), int(filled[-1]) + 1
    lo, hi = edges[lo_i], edges[hi_i]
    if not np.isfinite(lo) or not np.isfinite(hi):  # a value beyond +-LARGEST: the outer bucket as is
        inner = edges[lo_i:hi_i + 1]
        return inner if len(inner) <= bins + 1 else np.concatenate(([lo], _snap(edges, inner[1:-1], bins), [hi]))
    if log:  # geometric from the lowest positive bucket; a zero/negative start keeps its own bin
        positive = filled[edges[filled] > 0]
        start = edges[positive[0]] if len(positive) else hi
        targets = np.geomspace(start, hi, bins + 1) if 0 < start < hi else np.linspace(lo, hi, bins + 1)
    else:
        targets = np.linspace(lo, hi, bins + 1)
    picked = _nearest_edges(edges[lo_i:hi_i + 1], targets)
    return np.unique(np.concatenate(([lo], picked, [hi])))


def _nearest_edges(candidates: np.ndarray, targets: np.ndarray) -> np.ndarray:
    pos = np.clip(np.searchsorted(candidates, targets), 1, len(candidates) - 1)
    left, right = candidates[pos - 1], candidates[pos]
    return np.where(np.abs(targets - left) <= np.abs(right - targets), left, right)


def _snap(edges: np.ndarray, inner: np.ndarray, bins: int) -> np.ndarray:
    finite = inner[np.isfinite(inner)]
    if not len(finite):
        return finite
    return _nearest_edges(finite, np.linspace(finite[0], finite[-1], bins - 1))


def regroup(edges: np.ndarray, counts: np.ndarray, display: np.ndarray) -> np.ndarray:
    """Fine bucket counts summed into the display bins (every display edge is a fine edge)."""
    at = np.searchsorted(edges, display)
    cumulative = np.concatenate(([0], np.cumsum(counts)))
    return np.diff(cumulative[at])
