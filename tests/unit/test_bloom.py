"""The Bloom filter behind bff_dedup: no false negatives, the fp rate it was sized for, BFF's sizing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from raypress.operators.dedup.bff.bloom import (
    BloomFilter,
    bloom_positions,
    false_positive_rate,
    hash_pairs,
    optimal_num_bits,
    optimal_num_hashes,
    pairs_from_u64,
)

N = 100_000


@pytest.fixture(scope="module")
def filled() -> BloomFilter:
    bloom = BloomFilter.for_capacity(N, 0.01)
    bloom.add_many(f"item-{i}" for i in range(N))
    return bloom


def test_no_false_negatives(filled):
    assert filled.contains_many(f"item-{i}" for i in range(N)).all()
    assert "item-7" in filled


def test_measured_fp_rate_is_near_the_target(filled):
    rate = filled.contains_many(f"other-{i}" for i in range(N)).mean()
    # 100k Bernoulli(0.01) queries: sd 0.0003; allow a wide band, but a broken hash is far off
    assert 0.008 <= rate <= 0.012, rate
    assert filled.fill_ratio() == pytest.approx(0.5, abs=0.03)  # optimal k half-fills the bits
    assert filled.fill_ratio() ** filled.num_hashes == pytest.approx(0.01, rel=0.15)


def test_empty_filter_contains_nothing():
    bloom = BloomFilter.for_capacity(1000)
    assert not bloom.contains_many([b"a", "b", ""]).any()
    assert bloom.fill_ratio() == 0.0


def test_union_equals_inserting_both():
    a, b, both = (BloomFilter.for_capacity(20_000, 0.01) for _ in range(3))
    left = [f"L{i}" for i in range(10_000)]
    right = [f"R{i}" for i in range(10_000)]
    a.add_many(left)
    b.add_many(right)
    both.add_many(left + right)
    merged = a | b
    assert np.array_equal(merged.bits, both.bits)
    assert merged.contains_many(left + right).all()
    a.update(b)
    assert np.array_equal(a.bits, both.bits)


def test_union_refuses_different_geometry():
    with pytest.raises(ValueError, match="same size"):
        BloomFilter(1024, 3).union(BloomFilter(2048, 3))
    with pytest.raises(ValueError, match="same size"):
        BloomFilter(1024, 3).union(BloomFilter(1024, 4))


def test_sizing_follows_bff():
    n, p = 1_000_000_000, 0.01
    m = optimal_num_bits(n, p)
    k = optimal_num_hashes(m, n)
    assert k == 7
    assert false_positive_rate(m, n, k) <= p
    smaller = m - 8
    assert false_positive_rate(smaller, n, optimal_num_hashes(smaller, n)) > p  # smallest such m
    assert m / n == pytest.approx(9.593, abs=0.001)  # BFF's binary search, k = ceil(m / n ln 2)
    closed_form = -n * math.log(p) / math.log(2) ** 2
    assert m / closed_form == pytest.approx(1.0, abs=0.002)
    assert m / 8 / 1e9 == pytest.approx(1.2, abs=0.01)  # GB per billion n-grams


def test_sizing_other_rates_and_bad_input():
    m = optimal_num_bits(10_000, 0.001)
    assert false_positive_rate(m, 10_000, optimal_num_hashes(m, 10_000)) <= 0.001
    assert m % 8 == 0
    assert optimal_num_bits(0, 0.01) >= 8
    for bad in (0.0, 1.0, -0.5):
        with pytest.raises(ValueError, match="false-positive rate"):
            optimal_num_bits(100, bad)
    with pytest.raises(ValueError, match="multiple of 8"):
        BloomFilter(100, 3)
    with pytest.raises(ValueError, match="num_hashes"):
        BloomFilter(64, 0)


def test_save_and_load_round_trip(tmp_path, filled):
    path = tmp_path / "filter.bloom"
    filled.save(path)
    loaded = BloomFilter.load(path)
    assert (loaded.num_bits, loaded.num_hashes, loaded.seed) == (filled.num_bits, filled.num_hashes, 0)
    assert np.array_equal(loaded.bits, filled.bits)
    assert loaded.contains_many(["item-1", "item-99999"]).all()


def test_positions_in_range_and_deterministic():
    keys = np.arange(1000, dtype=np.uint64)
    pairs = pairs_from_u64(keys)
    pos = bloom_positions(pairs, 1003 * 8, 5)
    assert pos.shape == (1000, 5) and pos.max() < 1003 * 8
    assert np.array_equal(pos, bloom_positions(pairs_from_u64(keys), 1003 * 8, 5))
    assert not np.array_equal(pairs[:, 0], pairs[:, 1])
    assert np.array_equal(hash_pairs(["x", b"x"])[0], hash_pairs(["x", b"x"])[1])  # str = its UTF-8
