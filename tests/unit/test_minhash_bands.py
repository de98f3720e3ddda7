"""LSH parameters: datasketch's band/row choice and permutations, and the band keys."""

from __future__ import annotations

import numpy as np
import pytest

from raypress.operators.dedup.minhash.bands import band_keys, optimal_param, permutations

M64 = (1 << 64) - 1

# (threshold, num_perm) -> (bands, rows), computed with datasketch 2.0.0's
# datasketch.lsh._optimal_param(threshold, num_perm, 0.5, 0.5) (scipy's quad).
PINNED = {
    (0.7, 256): (25, 10),  # Data-Juicer's defaults
    (0.5, 128): (25, 5),
    (0.9, 64): (3, 21),
    (0.8, 512): (28, 18),
    (0.3, 100): (33, 3),
    (0.85, 256): (13, 19),
    (0.6, 32): (6, 5),
}


@pytest.mark.parametrize("threshold,num_perm", list(PINNED))
def test_optimal_param_matches_datasketch(threshold, num_perm):
    assert optimal_param(threshold, num_perm) == PINNED[threshold, num_perm]


def test_optimal_param_weights_and_live_datasketch():
    lsh = pytest.importorskip("datasketch.lsh")
    for threshold, num_perm, fp, fn in [(0.7, 256, 0.5, 0.5), (0.75, 96, 0.2, 0.8), (0.4, 50, 0.9, 0.1)]:
        assert optimal_param(threshold, num_perm, fp, fn) == lsh._optimal_param(threshold, num_perm, fp, fn)


def test_optimal_param_weights_move_the_choice():
    b_fn, r_fn = optimal_param(0.7, 256, 0.1, 0.9)  # false negatives cost more: more, shorter bands
    b_fp, r_fp = optimal_param(0.7, 256, 0.9, 0.1)
    assert b_fn * r_fn <= 256 and b_fp * r_fp <= 256
    assert r_fn < r_fp


def test_optimal_param_rejects_nonsense():
    with pytest.raises(ValueError):
        optimal_param(1.0, 256)
    with pytest.raises(ValueError):
        optimal_param(0.7, 0)


def test_permutations_are_datasketchs():
    a, b = permutations(300, seed=42)
    assert a.dtype == b.dtype == np.uint64 and a.shape == b.shape == (300,)
    assert a.min() >= 1 and a.max() < (1 << 61) - 1 and b.max() < (1 << 61) - 1
    gen = np.random.RandomState(42)  # datasketch's (and Data-Juicer's) draw
    pairs = [(gen.randint(1, (1 << 61) - 1, dtype=np.uint64), gen.randint(0, (1 << 61) - 1, dtype=np.uint64))
             for _ in range(300)]
    assert a.tolist() == [int(p[0]) for p in pairs] and b.tolist() == [int(p[1]) for p in pairs]
    assert not np.array_equal(permutations(300, seed=1)[0], a)


def plain_band_key(values: list[int], band: int) -> int:
    def fmix(h: int) -> int:
        h ^= h >> 33
        h = (h * 0xFF51AFD7ED558CCD) & M64
        h ^= h >> 33
        h = (h * 0xC4CEB9FE1A85EC53) & M64
        return h ^ (h >> 33)

    h = ((band + 1) * 0x9E3779B97F4A7C15) & M64
    for v in values:
        h = fmix(h ^ v)
    return h


def test_band_keys_match_the_plain_formula():
    rng = np.random.default_rng(0)
    sig = rng.integers(0, 1 << 32, size=(5, 23), dtype=np.uint64).astype(np.uint32)
    keys = band_keys(sig, 4, 5)  # uses the first 20 columns
    assert keys.dtype == np.uint64 and keys.shape == (5, 4)
    for i in range(5):
        for j in range(4):
            assert int(keys[i, j]) == plain_band_key(sig[i, j * 5:(j + 1) * 5].tolist(), j)


def test_band_keys_collide_exactly_on_equal_bands():
    rng = np.random.default_rng(1)
    sig = rng.integers(0, 1 << 32, size=(3, 12), dtype=np.uint64).astype(np.uint32)
    sig[1] = sig[0]
    sig[1, 7] ^= 1  # doc 1 differs from doc 0 in band 1 only (rows 4..7 of b=3, r=4)
    sig[2, :4] = sig[2, 4:8]  # doc 2: bands 0 and 1 hold the same values
    keys = band_keys(sig, 3, 4)
    assert keys[0, 0] == keys[1, 0] and keys[0, 2] == keys[1, 2] and keys[0, 1] != keys[1, 1]
    assert keys[2, 0] != keys[2, 1]  # the band index is mixed in
    assert len(np.unique(keys)) == 9 - 2
    assert np.array_equal(band_keys(sig[2:], 3, 4), keys[2:])  # per row, independent of the batch


def test_band_keys_reject_bad_shapes():
    sig = np.zeros((2, 10), dtype=np.uint32)
    with pytest.raises(ValueError, match="do not fit"):
        band_keys(sig, 3, 4)
    with pytest.raises(ValueError):
        band_keys(sig[0], 1, 1)
    assert band_keys(np.zeros((0, 10), dtype=np.uint32), 2, 5).shape == (0, 2)
