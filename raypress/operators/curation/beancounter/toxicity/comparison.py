"""The statistics of BeanCounter's toxicity comparison: per-descriptor sampling and Welch's t-test.

Why its own module: the numbers of the report come from here, so they can be read and tested
without the Stage around them."""

from __future__ import annotations

import hashlib
import math
import warnings
from typing import Any

import numpy as np



def descriptor_rng(seed: int, descriptor: str) -> np.random.Generator:
    """A generator of its own per descriptor: same seed and descriptor, same draws."""
    key = int(hashlib.md5(descriptor.encode("utf-8")).hexdigest()[:16], 16)
    return np.random.default_rng([seed % 2 ** 64, key])


def sample_indices(pool_size: int, n: int, seed: int, descriptor: str) -> tuple[list[int], bool]:
    """``n`` indices into a pool (sorted canonically by the caller); with replacement only when the
    pool is smaller than ``n``.  Returns (indices, whether drawn with replacement)."""
    if pool_size == 0 or n == 0:
        return [], False
    replace = pool_size < n
    return descriptor_rng(seed, descriptor).choice(pool_size, size=n, replace=replace).tolist(), replace


def _finite(x: float) -> float | None:
    return float(x) if x is not None and math.isfinite(x) else None


def welch_test(a: list[float], b: list[float]) -> dict[str, float | None]:
    """Welch's t-test (scipy, ``equal_var=False``): t, Welch-Satterthwaite df, two-sided p."""
    if len(a) < 2 or len(b) < 2 or (np.ptp(a) == 0 and np.ptp(b) == 0):  # no spread: no test, not a NaN
        return {"t": None, "df": None, "p": None}
    from scipy import stats

    with warnings.catch_warnings():  # "precision loss ... nearly identical": near-constant scores, still a test
        warnings.simplefilter("ignore", RuntimeWarning)
        res = stats.ttest_ind(a, b, equal_var=False)
    return {"t": _finite(res.statistic), "df": _finite(res.df), "p": _finite(res.pvalue)}


def percent_reduction(mean_filings: float | None, mean_reference: float | None) -> float | None:
    """``mean_filings / mean_reference - 1`` (negative: filings less toxic); None without a reference mean."""
    if mean_filings is None or mean_reference is None or mean_reference == 0:
        return None
    return mean_filings / mean_reference - 1


def compare(filings: list[float], reference: list[float], alpha: float) -> dict[str, Any]:
    """Means, standard errors, reduction and Welch's test of two lists of scores."""
    def mean(x: list[float]) -> float | None:
        return float(np.mean(x)) if x else None

    def se(x: list[float]) -> float | None:
        return float(np.std(x, ddof=1) / math.sqrt(len(x))) if len(x) > 1 else None

    mf, mr = mean(filings), mean(reference)
    test = welch_test(filings, reference)
    return {"n_filings": len(filings), "n_reference": len(reference), "mean_filings": mf, "mean_reference": mr,
            "se_filings": se(filings), "se_reference": se(reference), "reduction": percent_reduction(mf, mr),
            **test, "significant": None if test["p"] is None else test["p"] < alpha}
