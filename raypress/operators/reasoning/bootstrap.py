"""Percentile-bootstrap 95% intervals of a success rate, resampling questions.

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
