"""Triton MinHash signatures: one program per (document, block of permutations).

Each program loads its ``BLOCK_P`` permutation pairs once, walks its document's shingles
``BLOCK_S`` at a time (a ``BLOCK_S x BLOCK_P`` uint64 tile: ``t = a*x + b`` wrapping, the
Mersenne reduction ``r = (t & p) + (t >> 61)``, then ``r + ((r + 1) >> 61)`` truncated to 32 bits,
which is ``(t mod p) & 0xFFFFFFFF``; see ``minhash.minhash_signatures_numpy``) and keeps the
column minima.  The last tile of a document re-reads its last shingle instead of masking: a
repeated shingle cannot change a minimum, and no sentinel has to be typed.  Results are
bit-identical to ``minhash_reference``.  Only APIs common to Triton 3.6 and 3.9.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import triton
import triton.language as tl


@triton.jit
def _minhash_kernel(hashes_ptr, offsets_ptr, a_ptr, b_ptr, out_ptr, num_perm,
                    BLOCK_S: tl.constexpr, BLOCK_P: tl.constexpr):
    doc = tl.program_id(0).to(tl.int64)  # doc * num_perm may pass 2**31
    cols = tl.program_id(1) * BLOCK_P + tl.arange(0, BLOCK_P)
    col_ok = cols < num_perm
    a = tl.load(a_ptr + cols, mask=col_ok, other=0).to(tl.uint64, bitcast=True)
    b = tl.load(b_ptr + cols, mask=col_ok, other=0).to(tl.uint64, bitcast=True)
    start = tl.load(offsets_ptr + doc)
    end = tl.load(offsets_ptr + doc + 1)
    acc = tl.full([BLOCK_P], 0xFFFFFFFF, tl.uint32)
    for s in range(start, end, BLOCK_S):
        rows = tl.minimum(s + tl.arange(0, BLOCK_S), end - 1)
        x = tl.load(hashes_ptr + rows).to(tl.uint32, bitcast=True).to(tl.uint64)
        t = x[:, None] * a[None, :] + b[None, :]
        r = ((t << 3) >> 3) + (t >> 61)  # (t & p) + (t >> 61), p = 2**61 - 1
        r = r + ((r + 1) >> 61)
        acc = tl.minimum(acc, tl.min(r.to(tl.uint32), axis=0))
    tl.store(out_ptr + doc * num_perm + cols, acc.to(tl.int32, bitcast=True), mask=col_ok)


def _as_int32_bits(hashes: torch.Tensor) -> torch.Tensor:
    """32-bit shingle hashes as int32 bit patterns (torch's uint32 supports few ops)."""
    if hashes.dtype == torch.uint32:
        return hashes.contiguous().view(torch.int32)
    if hashes.dtype == torch.int32:
        return hashes.contiguous()
    h = hashes.to(torch.int64)
    return torch.where(h >= 2**31, h - 2**32, h).to(torch.int32).contiguous()


def _as_int64_bits(x: Any, device: torch.device) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return (x.view(torch.int64) if x.dtype == torch.uint64 else x.to(torch.int64)).contiguous().to(device)
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.uint64).view(np.int64)).to(device)


def minhash_signatures_triton(
    hashes: torch.Tensor, offsets: Any, perm_a: Any, perm_b: Any, block_s: int = 16, block_p: int = 128
) -> torch.Tensor:
    """``(n_docs, num_perm)`` torch.uint32 signatures on ``hashes``' device."""
    device = hashes.device
    h = _as_int32_bits(hashes)
    off = _as_int64_bits(offsets, device)
    a = _as_int64_bits(perm_a, device)
    b = _as_int64_bits(perm_b, device)
    n_docs, num_perm = off.numel() - 1, a.numel()
    out = torch.empty((n_docs, num_perm), dtype=torch.int32, device=device)
    if n_docs and num_perm:
        block_p = min(block_p, triton.next_power_of_2(num_perm))
        grid = (n_docs, triton.cdiv(num_perm, block_p))
        _minhash_kernel[grid](h, off, a, b, out, num_perm, BLOCK_S=block_s, BLOCK_P=block_p)
    return out.view(torch.uint32)
