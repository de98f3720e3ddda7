"""Hash functions the dedup techniques share (MinHash bands and shingles, SimHash blocks, the task
shuffle's routing): one 64-bit finaliser, so a change to it is made once."""

from __future__ import annotations

import numpy as np

GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / phi: an odd salt step that spreads small integers
_M1 = np.uint64(0xFF51AFD7ED558CCD)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


def fmix64(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 64-bit finaliser, in place on a uint64 array (which it also returns); the
    multiplications wrap modulo 2**64 on purpose."""
    h ^= h >> _S33
    h *= _M1
    h ^= h >> _S33
    h *= _M2
    h ^= h >> _S33
    return h
