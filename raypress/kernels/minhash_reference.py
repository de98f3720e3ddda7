"""Plain numpy MinHash signatures: the semantics the fast paths (numba, Triton) are tested against.

Permutation k of a 32-bit shingle hash ``x`` is datasketch's
``h_k(x) = ((a_k * x + b_k) mod 2**64 mod (2**61 - 1)) & 0xFFFFFFFF`` (the ``a_k * x + b_k``
wraps in uint64, exactly as datasketch's numpy code does), and a document's signature holds, per
permutation, the minimum over its shingles.  So with datasketch's permutations and the same 32-bit
shingle hashes the signature is bit-identical to ``datasketch.MinHash.update_batch``'s.  A document
without shingles gets ``0xFFFFFFFF`` everywhere (datasketch's empty value, truncated to 32 bits).
This module loops over documents and uses numpy's ``%``: obviously right, not fast.
"""

from __future__ import annotations

import numpy as np

MERSENNE_PRIME = np.uint64((1 << 61) - 1)
MAX_HASH = np.uint64(0xFFFFFFFF)
EMPTY = np.uint32(0xFFFFFFFF)


def check_inputs(hashes: np.ndarray, offsets: np.ndarray, perm_a: np.ndarray, perm_b: np.ndarray) -> None:
    """Raise ValueError unless the CSR layout and the permutation arrays agree."""
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(hashes):
        raise ValueError("offsets must be 1-D, start at 0 and end at len(hashes)")
    if len(offsets) > 1 and np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must be non-decreasing")
    if perm_a.shape != perm_b.shape or perm_a.ndim != 1:
        raise ValueError("perm_a and perm_b must be 1-D arrays of the same length")


def minhash_signatures_reference(
    hashes: np.ndarray, offsets: np.ndarray, perm_a: np.ndarray, perm_b: np.ndarray
) -> np.ndarray:
    """``(n_docs, num_perm)`` uint32 signatures of the documents ``hashes[offsets[i]:offsets[i+1]]``."""
    hashes = np.asarray(hashes)
    offsets = np.asarray(offsets, dtype=np.int64)
    a = np.asarray(perm_a, dtype=np.uint64)
    b = np.asarray(perm_b, dtype=np.uint64)
    check_inputs(hashes, offsets, a, b)
    n_docs = len(offsets) - 1
    out = np.full((n_docs, len(a)), EMPTY, dtype=np.uint32)
    for d in range(n_docs):
        hv = hashes[offsets[d]:offsets[d + 1]].astype(np.uint64)
        if len(hv) == 0:
            continue
        phv = ((hv[:, None] * a[None, :] + b[None, :]) % MERSENNE_PRIME) & MAX_HASH
        out[d] = phv.min(axis=0).astype(np.uint32)
    return out
