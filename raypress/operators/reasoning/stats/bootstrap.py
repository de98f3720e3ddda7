"""Percentile-bootstrap 95% intervals of a success rate (and of a paired difference), resampling questions.

Why its own module: the search table (``reasoning_report``) and the before/after-SFT evaluation
(``evaluate_reasoning``) report their rates with the same interval.
"""

from __future__ import annotations

import numpy as np


def bootstrap_interval(outcomes: np.ndarray, resamples: int, rng: np.random.Generator) -> tuple[float, float]:
    """Percentile 95% interval of the mean of 0/1 ``outcomes`` (questions resampled with replacement)."""
    if outcomes.size == 0:
        return (float("nan"), float("nan"))
    picks = rng.integers(0, outcomes.size, size=(resamples, outcomes.size))
    means = outcomes[picks].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def paired_bootstrap(a: np.ndarray, b: np.ndarray, resamples: int,
                     rng: np.random.Generator) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired 0/1 outcomes (the same questions) and its percentile 95%
    interval, resampling questions: pairing removes the between-question variance two independent
    intervals would double count."""
    if a.shape != b.shape:
        raise ValueError(f"paired outcomes differ in length: {a.shape} vs {b.shape}")
    if a.size == 0:
        return (float("nan"), float("nan"), float("nan"))
    diff = a.astype(float) - b.astype(float)
    picks = rng.integers(0, diff.size, size=(resamples, diff.size))
    low, high = np.percentile(diff[picks].mean(axis=1), [2.5, 97.5])
    return float(diff.mean()), float(low), float(high)


def verdict(low: float, high: float) -> str:
    """"holds" when the 95% interval of (claimed better - other) is above 0, "fails" when it is below
    0 (the opposite holds), "inconclusive" when it covers 0 (or is undefined)."""
    if np.isnan(low) or np.isnan(high):
        return "inconclusive"
    return "holds" if low > 0 else "fails" if high < 0 else "inconclusive"
