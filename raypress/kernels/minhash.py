"""MinHash signatures of many documents at once: the entry point, picking the fastest path.

Input is CSR: the 32-bit shingle hashes of all documents flat, and int64 ``offsets`` (n+1) so
document i is ``hashes[offsets[i]:offsets[i+1]]``.  Output is ``(n_docs, num_perm)`` uint32
with datasketch's permutations (see ``minhash_reference``); a document without shingles is all
``0xFFFFFFFF``.  Paths, all bit-identical:

- CUDA tensors: the Triton kernel (``minhash_triton``).
- CPU: numba loops when numba imports (not a core package), else numpy in row chunks.  Both
  replace ``%`` by the Mersenne reduction ``t mod p = (t & p) + (t >> 61)`` (minus p once if
  that is still >= p), which is exact for any uint64 ``t`` and avoids a 64-bit division per value.

Measured on one core of the 2-core AMD EPYC (no AVX2) against datasketch's ``MinHash`` with the
same formula, permutations and 32-bit shingle hashes: numba 19-27x its signatures/s (~0.25 ns
per shingle x permutation: about one 64-bit multiply), numpy 1.3-3x (numpy's passes over memory
cost, not datasketch's ``%``).  The per-document helpers of the shingles (``unique_per_document``,
``intersection_sizes``) live here for the same reason: numba loops when importable, else numpy.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import numpy as np

from raypress.kernels.minhash_reference import (
    EMPTY,
    MAX_HASH,
    MERSENNE_PRIME,
    check_inputs,
    minhash_signatures_reference,
)

Backend = Literal["auto", "numpy", "numba", "triton", "reference"]
_SHIFT = np.uint64(61)
ROWS_PER_CHUNK = 256  # numpy path: shingle rows per uint64 work buffer (256 x 256 perms: 512 KiB)


def minhash_signatures_on(device: str, hashes: np.ndarray, offsets: np.ndarray, perm_a: np.ndarray,
                          perm_b: np.ndarray) -> np.ndarray:
    """The Triton kernel's uint32 signatures for numpy inputs, the hashes moved to the torch
    ``device`` ("cuda"; a "cpu" device runs it only under TRITON_INTERPRET=1: the tests)."""
    try:
        import torch
    except ImportError:  # torch is optional: only this path needs it
        torch = None
    if torch is None:
        raise RuntimeError("signatures on an accelerator need torch and triton: pip install 'raypress[torch,kernels]'")
    on = torch.from_numpy(np.ascontiguousarray(hashes, dtype=np.uint32).view(np.int32)).to(device)
    sig = minhash_signatures(on.view(torch.uint32), offsets, perm_a, perm_b, backend="triton")
    return sig.view(torch.int32).cpu().numpy().view(np.uint32)


def minhash_signatures(
    hashes: Any, offsets: Any, perm_a: Any, perm_b: Any, backend: Backend = "auto"
) -> Any:
    """``(n_docs, num_perm)`` uint32 MinHash signatures (a torch tensor for torch inputs).

    ``auto`` runs Triton for CUDA tensors, numba when importable, else numpy."""
    if backend == "triton" or (backend == "auto" and getattr(hashes, "is_cuda", False)):
        try:
            from raypress.kernels import minhash_triton
        except ImportError:  # torch/triton are optional
            minhash_triton = None
        if minhash_triton is None:
            raise RuntimeError("the Triton MinHash path needs torch and triton")
        return minhash_triton.minhash_signatures_triton(hashes, offsets, perm_a, perm_b)
    if hasattr(hashes, "detach"):  # a torch tensor on the CPU
        return _as_torch(minhash_signatures(*(_to_numpy(x) for x in (hashes, offsets, perm_a, perm_b)),
                                            backend=backend), hashes)
    hashes = np.ascontiguousarray(hashes)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    a = np.ascontiguousarray(perm_a, dtype=np.uint64)
    b = np.ascontiguousarray(perm_b, dtype=np.uint64)
    check_inputs(hashes, offsets, a, b)
    if backend == "reference":
        return minhash_signatures_reference(hashes, offsets, a, b)
    if backend == "numba" or (backend == "auto" and numba_available()):
        if not numba_available():
            raise RuntimeError("backend='numba' needs the numba package")
        out = np.empty((len(offsets) - 1, len(a)), dtype=np.uint32)
        _numba_kernel()(hashes.astype(np.uint64, copy=False), offsets, a, b, out)
        return out
    if backend not in ("auto", "numpy"):
        raise ValueError(f"unknown MinHash backend {backend!r}")
    return minhash_signatures_numpy(hashes, offsets, a, b)


@functools.cache
def _numba():
    """numba, imported on first use (it is optional, and slow to import)."""
    try:
        import numba
    except ImportError:  # optional: without it the numpy paths run
        numba = None
    return numba


def numba_available() -> bool:
    return _numba() is not None


def minhash_signatures_numpy(
    hashes: np.ndarray, offsets: np.ndarray, perm_a: np.ndarray, perm_b: np.ndarray
) -> np.ndarray:
    """The numpy path: ``ROWS_PER_CHUNK`` shingles x all permutations at a time in two reused
    (cache-sized) buffers, then the column minima of each document run in the chunk.

    After ``r = (t & p) + (t >> 61)`` (so ``r <= p + 7``), ``t mod p`` is ``r`` or ``r - p``; as
    ``p = 2**61 - 1`` and only the low 32 bits are kept, ``r - p`` there equals ``r + 1``, and
    ``r >= p`` exactly when ``(r + 1) >> 61`` is 1: so the low 32 bits of ``r + ((r + 1) >> 61)``."""
    n_docs, num_perm = len(offsets) - 1, len(perm_a)
    out = np.full((n_docs, num_perm), EMPTY, dtype=np.uint32)
    total = int(offsets[-1])
    if total == 0 or num_perm == 0:
        return out
    nonempty = np.flatnonzero(offsets[1:] > offsets[:-1])
    starts = offsets[nonempty]
    rows = min(ROWS_PER_CHUNK, total)
    t_buf = np.empty((rows, num_perm), dtype=np.uint64)
    r_buf = np.empty((rows, num_perm), dtype=np.uint64)
    one = np.uint64(1)
    for lo in range(0, total, rows):
        hi = min(lo + rows, total)
        t, r = t_buf[: hi - lo], r_buf[: hi - lo]
        np.multiply(hashes[lo:hi, None].astype(np.uint64), perm_a, out=t)
        t += perm_b
        np.bitwise_and(t, MERSENNE_PRIME, out=r)
        t >>= _SHIFT
        r += t
        np.add(r, one, out=t)
        t >>= _SHIFT
        r += t
        r &= MAX_HASH
        first, last = np.searchsorted(starts, [lo, hi], side="left")
        local = starts[first:last] - lo  # document starts inside the chunk
        docs = nonempty[first:last]
        if len(local) == 0 or local[0] != 0:  # the chunk opens inside an earlier document
            local = np.concatenate([[0], local])
            docs = np.concatenate([[nonempty[first - 1]], docs])
        if len(local) <= 32:  # contiguous row minima beat reduceat (3x at 6 runs of a 256-row chunk)
            bounds = [*local.tolist(), hi - lo]
            mins = np.stack([r[s:e].min(axis=0) for s, e in zip(bounds[:-1], bounds[1:])])
        else:
            mins = np.minimum.reduceat(r, local, axis=0)
        out[docs] = np.minimum(out[docs], mins)  # uint64 vs uint32 -> uint64, cast back on store
    return out


def unique_per_document(hashes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(hashes, counts)``: each document's uint32 hashes sorted and without repeats, and how
    many each keeps.  numba sorts document by document (cache-sized sorts) when importable;
    numpy sorts ``doc << 32 | hash`` keys of the whole batch: the same result."""
    hashes = np.ascontiguousarray(hashes, dtype=np.uint32)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    n_docs = len(offsets) - 1
    if numba_available():
        out = np.empty_like(hashes)
        counts = np.zeros(n_docs, dtype=np.int64)
        _numba_unique()(hashes, offsets, out, counts)
        return out[: int(counts.sum())], counts
    doc = np.repeat(np.arange(n_docs, dtype=np.uint64), np.diff(offsets))
    key = (doc << np.uint64(32)) | hashes.astype(np.uint64)
    key.sort()
    if len(key) > 1:
        key = key[np.concatenate([[True], key[1:] != key[:-1]])]
    counts = np.bincount((key >> np.uint64(32)).astype(np.int64), minlength=n_docs)
    return (key & MAX_HASH).astype(np.uint32), counts


def intersection_sizes(hashes: np.ndarray, offsets: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """int64 ``|doc left[k] & doc right[k]|`` for documents whose hashes are sorted and unique
    (``unique_per_document``'s layout): a numba merge per pair, else ``np.intersect1d``."""
    left = np.ascontiguousarray(left, dtype=np.int64)
    right = np.ascontiguousarray(right, dtype=np.int64)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    if numba_available():
        out = np.zeros(len(left), dtype=np.int64)
        _numba_intersect()(np.ascontiguousarray(hashes, dtype=np.uint32), offsets, left, right, out)
        return out
    return np.array([len(np.intersect1d(hashes[offsets[i]:offsets[i + 1]], hashes[offsets[j]:offsets[j + 1]],
                                        assume_unique=True)) for i, j in zip(left.tolist(), right.tolist())],
                    dtype=np.int64)


def _to_numpy(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        if str(x.dtype) == "torch.uint32":
            x = x.view(_torch().int32)
            return x.numpy().view(np.uint32)
        return x.numpy()
    return np.asarray(x)


def _torch():
    try:
        import torch  # only reached with torch tensors in hand
    except ImportError:
        torch = None
    return torch


def _as_torch(sig: np.ndarray, like: Any) -> Any:
    torch = _torch()
    return torch.from_numpy(sig.view(np.int32)).view(torch.uint32).to(like.device)


@functools.cache
def _numba_kernel():
    """The numba loop, compiled on first use (cached on disk where the package is writable)."""
    return _jit(_signatures_loop)


@functools.cache
def _numba_unique():
    return _jit(_unique_loop)


@functools.cache
def _numba_intersect():
    return _jit(_intersect_loop)


def _jit(fn):
    numba = _numba()
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # numba refuses cache=True where it finds no cache directory
        return numba.njit(nogil=True)(fn)


def _signatures_loop(hashes, offsets, perm_a, perm_b, out):  # pragma: no cover - compiled by numba
    """Per document: per shingle, update all permutation minima (the inner loop runs over the
    permutations, so ``perm_a``/``perm_b``/the running minima stay in L1)."""
    n_docs, num_perm = out.shape
    p = np.uint64(0x1FFFFFFFFFFFFFFF)
    mask = np.uint64(0xFFFFFFFF)
    shift = np.uint64(61)
    acc = np.empty(num_perm, dtype=np.uint64)
    for d in range(n_docs):
        for k in range(num_perm):
            acc[k] = mask
        for i in range(offsets[d], offsets[d + 1]):
            x = hashes[i]
            for k in range(num_perm):
                t = x * perm_a[k] + perm_b[k]
                r = (t & p) + (t >> shift)
                if r >= p:
                    r -= p
                r &= mask
                if r < acc[k]:
                    acc[k] = r
        for k in range(num_perm):
            out[d, k] = np.uint32(acc[k])


def _unique_loop(hashes, offsets, out, counts):  # pragma: no cover - compiled by numba
    """Sort each document's run (LSD radix, 4 byte passes; insertion sort when short), then copy
    it without repeats, packed, into ``out``."""
    longest = 0
    for d in range(len(offsets) - 1):
        longest = max(longest, offsets[d + 1] - offsets[d])
    run = np.empty(longest, dtype=np.uint32)
    tmp = np.empty(longest, dtype=np.uint32)
    buckets = np.empty(256, dtype=np.int64)
    w = 0
    for d in range(len(offsets) - 1):
        lo, hi = offsets[d], offsets[d + 1]
        n = hi - lo
        if n == 0:
            continue
        if n <= 24:  # insertion sort: radix's 4 x 256 buckets cost more here
            for i in range(n):
                v = hashes[lo + i]
                j = i
                while j > 0 and run[j - 1] > v:
                    run[j] = run[j - 1]
                    j -= 1
                run[j] = v
        else:
            run[:n] = hashes[lo:hi]
            for shift in (0, 8, 16, 24):  # stable counting sorts, run -> tmp -> run by byte
                src = run if shift % 16 == 0 else tmp
                dst = tmp if shift % 16 == 0 else run
                buckets[:] = 0
                for i in range(n):
                    buckets[(src[i] >> shift) & 255] += 1
                total = 0
                for k in range(256):
                    c = buckets[k]
                    buckets[k] = total
                    total += c
                for i in range(n):
                    v = src[i]
                    k = (v >> shift) & 255
                    dst[buckets[k]] = v
                    buckets[k] += 1
        start = w
        out[w] = run[0]
        w += 1
        for i in range(1, n):
            if run[i] != run[i - 1]:
                out[w] = run[i]
                w += 1
        counts[d] = w - start


def _intersect_loop(hashes, offsets, left, right, out):  # pragma: no cover - compiled by numba
    """Merge the two sorted runs of each pair, counting equal values."""
    for k in range(len(left)):
        i, i_end = offsets[left[k]], offsets[left[k] + 1]
        j, j_end = offsets[right[k]], offsets[right[k] + 1]
        n = 0
        while i < i_end and j < j_end:
            x, y = hashes[i], hashes[j]
            if x == y:
                n += 1
                i += 1
                j += 1
            elif x < y:
                i += 1
            else:
                j += 1
        out[k] = n
