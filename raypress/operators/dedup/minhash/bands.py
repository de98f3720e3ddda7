"""MinHash-LSH parameters: the permutations, the band/row choice, and the band keys.

- ``permutations`` draws datasketch's ``(a, b)`` pairs (``np.random.RandomState(seed)``,
  ``a`` in [1, 2**61-1), ``b`` in [0, 2**61-1), drawn alternately), so
  ``datasketch.MinHash(num_perm, seed=seed)`` holds the same permutations.
- ``optimal_param`` is datasketch's / Data-Juicer's ``optimal_param``: over every ``b`` in
  1..num_perm and ``r`` in 1..num_perm//b, minimise ``fp_weight * integral_0^t P(candidate | s) ds
  + fn_weight * integral_t^1 P(not candidate | s) ds`` with ``P(candidate | s) = 1 - (1 - s**r)**b``
  (first minimum in that loop order wins).  The integrands are polynomials of degree ``b*r <=
  num_perm``, so a Gauss-Legendre rule with more than ``num_perm/2`` nodes integrates them exactly
  (scipy's ``quad``, which the originals call, is not a core package).
- ``band_keys`` hashes each band's ``r`` values, with the band index mixed in, to one uint64:
  two documents share a key only in the same band (collisions of distinct bands: ~2**-64).
"""

from __future__ import annotations

import functools

import numpy as np

from raypress.operators.dedup.hashing import GOLDEN, fmix64

MERSENNE_PRIME = (1 << 61) - 1


def permutations(num_perm: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(perm_a, perm_b)`` uint64 arrays of length ``num_perm``, exactly datasketch's."""
    if num_perm < 1:
        raise ValueError("num_perm must be >= 1")
    gen = np.random.RandomState(seed)
    pairs = np.array(
        [(gen.randint(1, MERSENNE_PRIME, dtype=np.uint64), gen.randint(0, MERSENNE_PRIME, dtype=np.uint64))
         for _ in range(num_perm)],
        dtype=np.uint64,
    )
    return np.ascontiguousarray(pairs[:, 0]), np.ascontiguousarray(pairs[:, 1])


@functools.cache
def optimal_param(
    threshold: float, num_perm: int, false_positive_weight: float = 0.5, false_negative_weight: float = 0.5
) -> tuple[int, int]:
    """``(num_bands, rows_per_band)`` minimising the weighted FP + FN probability integrals."""
    if not 0.0 < threshold < 1.0:
        raise ValueError("threshold must be in (0, 1)")
    if num_perm < 1:
        raise ValueError("num_perm must be >= 1")
    bands, rows = [], []
    for b in range(1, num_perm + 1):  # datasketch's loop order: ties go to the first pair
        r = np.arange(1, num_perm // b + 1)
        bands.append(np.full(len(r), b))
        rows.append(r)
    b = np.concatenate(bands).astype(np.float64)[:, None]
    r = np.concatenate(rows).astype(np.float64)[:, None]
    nodes, weights = np.polynomial.legendre.leggauss(max(32, num_perm // 2 + 8))
    s_fp = 0.5 * threshold * (nodes + 1.0)  # [-1, 1] -> [0, t]
    s_fn = threshold + 0.5 * (1.0 - threshold) * (nodes + 1.0)  # [-1, 1] -> [t, 1]
    fp = 0.5 * threshold * ((1.0 - (1.0 - s_fp[None, :] ** r) ** b) @ weights)
    fn = 0.5 * (1.0 - threshold) * (((1.0 - s_fn[None, :] ** r) ** b) @ weights)
    error = fp * false_positive_weight + fn * false_negative_weight
    best = int(np.argmin(error))
    return int(b[best, 0]), int(r[best, 0])



def band_keys(signatures: np.ndarray, num_bands: int, rows_per_band: int) -> np.ndarray:
    """``(n_docs, num_bands)`` uint64: band j hashes ``signatures[:, j*r:(j+1)*r]`` and ``j``."""
    sig = np.asarray(signatures)
    if sig.ndim != 2:
        raise ValueError("signatures must be (n_docs, num_perm)")
    if num_bands < 1 or rows_per_band < 1 or num_bands * rows_per_band > sig.shape[1]:
        raise ValueError(f"{num_bands} bands x {rows_per_band} rows do not fit {sig.shape[1]} permutations")
    n = sig.shape[0]
    values = sig[:, : num_bands * rows_per_band].astype(np.uint64).reshape(n, num_bands, rows_per_band)
    with np.errstate(over="ignore"):
        h = np.broadcast_to((np.arange(num_bands, dtype=np.uint64) + np.uint64(1)) * GOLDEN, (n, num_bands)).copy()
        for j in range(rows_per_band):
            h ^= values[:, :, j]
            fmix64(h)
    return h
