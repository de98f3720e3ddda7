"""A Bloom filter on a numpy bit array: k bit positions by double hashing, sized as BFF sizes it.

Why not a library: the dedup ops need the filter's *bit positions* themselves (BFF's paragraph
logic checks a whole batch of n-grams at once, and ``bff_dedup`` spreads the bit array over Ray
actors by position range), which no Python Bloom filter package exposes.

Hashing: an item becomes a pair ``(h1, h2)`` of 64-bit values (the two halves of one xxh3_128
digest for bytes/str keys, or two splitmix64 finalisations of an already-computed 64-bit hash),
and its k positions are ``(h1 + i * h2) mod m`` for i = 0..k-1 (Kirsch & Mitzenmacher 2006:
double hashing loses nothing asymptotically against k independent hashes).

Sizing follows BFF (allenai/bff as vendored by DCLM, ``dedup/bff/src/main.rs``:
``compute_bloom_size`` / ``optimal_number_of_hashers`` / ``prob_of_false_positive``): the
smallest m for which ``(1 - (1 - 1/m)^(k n))^k <= p`` with ``k = ceil(m / n * ln 2)``.  For p =
0.01 that is k = 7 and about 9.59 bits per expected item (the closed form ``-n ln p / (ln 2)^2``
gives 9.585), i.e. about 1.2 GB of bits per billion items.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Protocol

import numpy as np
import xxhash

_U64 = np.uint64
_MASK64 = (1 << 64) - 1


class BitFilter(Protocol):
    """What BFF's batch logic needs from a filter: positions of hashes, read and set bits.

    ``BloomFilter`` implements it in-process; ``bff_dedup`` implements it over Ray actors."""

    num_bits: int
    num_hashes: int

    def positions(self, pairs: np.ndarray) -> np.ndarray: ...

    def test_bits(self, positions: np.ndarray) -> np.ndarray: ...

    def set_bits(self, positions: np.ndarray) -> None: ...


# -- sizing (BFF's formulas) ------------------------------------------------------------------


def false_positive_rate(num_bits: int, expected_items: int, num_hashes: int) -> float:
    """BFF's ``prob_of_false_positive``: ``(1 - (1 - 1/m)^(k n))^k``, computed stably."""
    if expected_items <= 0:
        return 0.0
    m, n, k = float(num_bits), float(expected_items), float(num_hashes)
    zero_fraction = math.exp(k * n * math.log1p(-1.0 / m)) if m > 1 else 0.0
    return (1.0 - zero_fraction) ** k


def optimal_num_hashes(num_bits: int, expected_items: int) -> int:
    """BFF's ``optimal_number_of_hashers``: ``ceil(m / n * ln 2)`` (at least 1)."""
    return max(1, math.ceil(num_bits / max(1, expected_items) * math.log(2)))


def optimal_num_bits(expected_items: int, fp_rate: float) -> int:
    """Smallest m (a whole number of bytes, in bits) reaching ``fp_rate`` with BFF's optimal k.

    A binary search as in BFF's ``compute_bloom_size``, started from the closed form."""
    if not 0.0 < fp_rate < 1.0:
        raise ValueError(f"false-positive rate must be in (0, 1), got {fp_rate}")
    n = max(1, int(expected_items))

    def ok(nbytes: int) -> bool:
        m = nbytes * 8
        return false_positive_rate(m, n, optimal_num_hashes(m, n)) <= fp_rate

    closed = -n * math.log(fp_rate) / math.log(2) ** 2
    lo, hi = 1, max(2, math.ceil(closed / 8 * 2))
    while not ok(hi):
        hi *= 2
    while lo < hi:  # smallest nbytes with ok(nbytes); ok is monotone but for ceil(k) steps
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo * 8


# -- hashing ----------------------------------------------------------------------------------


def hash_pairs(keys: Iterable[bytes | str], seed: int = 0) -> np.ndarray:
    """``(n, 2)`` uint64: the low and high halves of each key's xxh3_128 digest."""
    digest = xxhash.xxh3_128_intdigest
    digests = [digest(k.encode() if isinstance(k, str) else k, seed) for k in keys]
    out = np.empty((len(digests), 2), dtype=_U64)
    if digests:
        out[:, 0] = [d & _MASK64 for d in digests]
        out[:, 1] = [d >> 64 for d in digests]
    return out


def splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, vectorised (uint64 arithmetic wraps mod 2^64)."""
    with np.errstate(over="ignore"):
        z = x.astype(_U64, copy=True)
        z += _U64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> _U64(27))) * _U64(0x94D049BB133111EB)
        return z ^ (z >> _U64(31))


def pairs_from_u64(keys: np.ndarray) -> np.ndarray:
    """``(n, 2)`` uint64 double-hashing pairs from 64-bit hashes (two independent finalisations)."""
    keys = np.asarray(keys, dtype=_U64)
    out = np.empty((len(keys), 2), dtype=_U64)
    out[:, 0] = splitmix64(keys)
    out[:, 1] = splitmix64(keys ^ _U64(0xD6E8FEB86659FD93))
    return out


def bloom_positions(pairs: np.ndarray, num_bits: int, num_hashes: int) -> np.ndarray:
    """``(n, k)`` uint64 bit positions ``(h1 + i * h2) mod m``."""
    pairs = np.asarray(pairs, dtype=_U64).reshape(-1, 2)
    steps = np.arange(num_hashes, dtype=_U64)
    with np.errstate(over="ignore"):
        raw = pairs[:, :1] + steps[None, :] * pairs[:, 1:2]
    return raw % _U64(num_bits)


# -- the filter -------------------------------------------------------------------------------


class BloomFilter:
    """m bits in a packed ``uint8`` array (bit p is ``bits[p >> 3] >> (p & 7) & 1``), k hashes."""

    def __init__(self, num_bits: int, num_hashes: int, bits: np.ndarray | None = None, seed: int = 0):
        if num_bits < 8 or num_bits % 8:
            raise ValueError(f"num_bits must be a positive multiple of 8, got {num_bits}")
        if num_hashes < 1:
            raise ValueError(f"num_hashes must be >= 1, got {num_hashes}")
        self.num_bits = int(num_bits)
        self.num_hashes = int(num_hashes)
        self.seed = int(seed)
        nbytes = self.num_bits // 8
        if bits is None:
            bits = np.zeros(nbytes, dtype=np.uint8)
        elif bits.dtype != np.uint8 or bits.shape != (nbytes,):
            raise ValueError(f"bits must be uint8 of shape ({nbytes},), got {bits.dtype} {bits.shape}")
        self.bits = bits

    @classmethod
    def for_capacity(cls, expected_items: int, fp_rate: float = 0.01, seed: int = 0) -> "BloomFilter":
        """A filter sized by BFF's formulas for ``expected_items`` at ``fp_rate``."""
        m = optimal_num_bits(expected_items, fp_rate)
        return cls(m, optimal_num_hashes(m, max(1, expected_items)), seed=seed)

    # bit level (the BitFilter protocol)
    def positions(self, pairs: np.ndarray) -> np.ndarray:
        return bloom_positions(pairs, self.num_bits, self.num_hashes)

    def test_bits(self, positions: np.ndarray) -> np.ndarray:
        """Bool array shaped like ``positions``: whether each bit is set."""
        return test_packed(self.bits, positions)

    def set_bits(self, positions: np.ndarray) -> None:
        set_packed(self.bits, positions)

    # item level
    def add_pairs(self, pairs: np.ndarray) -> None:
        self.set_bits(self.positions(pairs))

    def contains_pairs(self, pairs: np.ndarray) -> np.ndarray:
        """Per pair: True when all its k bits are set (maybe seen), False when surely unseen."""
        return self.test_bits(self.positions(pairs)).all(axis=1)

    def add(self, key: bytes | str) -> None:
        self.add_pairs(hash_pairs([key], self.seed))

    def add_many(self, keys: Iterable[bytes | str]) -> None:
        self.add_pairs(hash_pairs(keys, self.seed))

    def contains_many(self, keys: Iterable[bytes | str]) -> np.ndarray:
        return self.contains_pairs(hash_pairs(keys, self.seed))

    def __contains__(self, key: bytes | str) -> bool:
        return bool(self.contains_many([key])[0])

    # whole filter
    def fill_ratio(self) -> float:
        """Fraction of bits set (BFF's "sparsity"); the fp rate is about ``fill_ratio ** k``."""
        return popcount(self.bits) / self.num_bits

    def _check_compatible(self, other: "BloomFilter") -> None:
        if (self.num_bits, self.num_hashes, self.seed) != (other.num_bits, other.num_hashes, other.seed):
            raise ValueError(
                "only filters of the same size, number of hashes and seed can be merged: "
                f"({self.num_bits}, {self.num_hashes}, {self.seed}) vs "
                f"({other.num_bits}, {other.num_hashes}, {other.seed})"
            )

    def union(self, other: "BloomFilter") -> "BloomFilter":
        """Bitwise OR: the filter that has seen what either has seen."""
        self._check_compatible(other)
        return BloomFilter(self.num_bits, self.num_hashes, np.bitwise_or(self.bits, other.bits), self.seed)

    def update(self, other: "BloomFilter") -> None:
        """In-place union."""
        self._check_compatible(other)
        np.bitwise_or(self.bits, other.bits, out=self.bits)

    __or__ = union

    def save(self, path: str | Path) -> None:
        """One ``.npz`` file: the bits plus (num_bits, num_hashes, seed)."""
        with open(path, "wb") as f:  # a file object: np.savez would append ".npz" to a bare name
            np.savez(f, bits=self.bits, meta=np.array([self.num_bits, self.num_hashes, self.seed], np.int64))

    @classmethod
    def load(cls, path: str | Path) -> "BloomFilter":
        with np.load(path, allow_pickle=False) as data:
            num_bits, num_hashes, seed = (int(v) for v in data["meta"])
            return cls(num_bits, num_hashes, data["bits"].copy(), seed)


def test_packed(bits: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Whether each bit position is set in a packed little-endian-bit ``uint8`` array."""
    positions = np.asarray(positions, dtype=_U64)
    bytes_ = bits[positions >> _U64(3)]
    return ((bytes_ >> (positions & _U64(7)).astype(np.uint8)) & np.uint8(1)).astype(bool)


def set_packed(bits: np.ndarray, positions: np.ndarray) -> None:
    """Set bit positions in a packed array (repeated positions are fine)."""
    positions = np.asarray(positions, dtype=_U64).ravel()
    if positions.size:
        np.bitwise_or.at(bits, positions >> _U64(3), np.left_shift(1, positions & _U64(7)).astype(np.uint8))


_BYTE_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def popcount(bits: np.ndarray) -> int:
    """Set bits in a ``uint8`` array (``np.bitwise_count`` on numpy >= 2, a table before)."""
    if hasattr(np, "bitwise_count"):
        return int(np.bitwise_count(bits).sum(dtype=np.int64))
    step = 1 << 24
    return sum(int(_BYTE_POPCOUNT[bits[i : i + step]].sum(dtype=np.int64)) for i in range(0, len(bits), step))
