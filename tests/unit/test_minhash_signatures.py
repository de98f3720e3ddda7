"""MinHash signatures on the CPU: numpy reference, numpy fast path and numba path against plain
Python integer loops, the Mersenne corner cases, and bit-identity with datasketch."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from raypress.kernels import minhash
from raypress.kernels.minhash import minhash_signatures
from raypress.kernels.minhash_reference import minhash_signatures_reference
from raypress.operators.dedup.minhash.bands import permutations

P61 = (1 << 61) - 1
CPU_BACKENDS = ["reference", "numpy", pytest.param("numba", marks=pytest.mark.skipif(
    not minhash.numba_available(), reason="numba not installed"))]


def plain_signatures(hashes, offsets, perm_a, perm_b) -> list[list[int]]:
    """Python ints only: ((a*x + b) mod 2**64) mod (2**61 - 1), low 32 bits, min per document."""
    out = []
    for d in range(len(offsets) - 1):
        xs = [int(x) for x in hashes[offsets[d]:offsets[d + 1]]]
        out.append([min((((int(a) * x + int(b)) & ((1 << 64) - 1)) % P61) & 0xFFFFFFFF for x in xs)
                    if xs else 0xFFFFFFFF for a, b in zip(perm_a, perm_b)])
    return out


def random_docs(n_docs: int, max_len: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, max_len + 1, size=n_docs)
    counts[:: max(1, n_docs // 4)] = 0  # empty documents at the start and in between
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    hashes = rng.integers(0, 1 << 32, size=int(offsets[-1]), dtype=np.uint64).astype(np.uint32)
    hashes[:3] = [0, 0xFFFFFFFF, 0x80000000][: len(hashes[:3])]
    return hashes, offsets


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("rows", [1, 3, 7, 256])
def test_paths_match_plain_python(monkeypatch, backend, rows):
    monkeypatch.setattr(minhash, "ROWS_PER_CHUNK", rows)  # numpy: chunks cut documents anywhere
    hashes, offsets = random_docs(23, 9, seed=rows)
    a, b = permutations(37, seed=5)
    got = minhash_signatures(hashes, offsets, a, b, backend=backend)
    assert got.dtype == np.uint32 and got.shape == (23, 37)
    assert got.tolist() == plain_signatures(hashes, offsets, a, b)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_few_long_and_many_short_documents(backend):
    a, b = permutations(64, seed=2)
    for n_docs, max_len in [(3, 700), (400, 3), (1, 1)]:
        hashes, offsets = random_docs(n_docs, max_len, seed=n_docs)
        expected = minhash_signatures_reference(hashes, offsets, a, b)
        assert np.array_equal(minhash_signatures(hashes, offsets, a, b, backend=backend), expected)
    assert minhash_signatures_reference(hashes, offsets, a, b).tolist() == plain_signatures(hashes, offsets, a, b)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_mersenne_reduction_corners(backend):
    """a*x + b landing on p, p+1, ..., 2**64-1 (where (t & p) + (t >> 61) >= p) and wrapping."""
    a = np.array([1, 1, 1, 1, 2, P61 - 1, P61 - 1, 3], dtype=np.uint64)
    b = np.array([P61 - 1, P61 - 2, P61, 0, P61 - 2, P61 - 1, 0, P61 - 1], dtype=np.uint64)
    hashes = np.array([1, 0xFFFFFFFF, 2, 0, 1 << 31], dtype=np.uint32)
    for x in range(len(hashes)):
        offsets = np.array([0, x + 1, len(hashes)], dtype=np.int64)
        got = minhash_signatures(hashes, offsets, a, b, backend=backend)
        assert got.tolist() == plain_signatures(hashes, offsets, a, b)
    one = np.array([0, 1], dtype=np.int64)
    top = np.array([(1 << 64) - 1], dtype=np.uint64)  # t = 2**64 - 1: (t & p) + 7 = p + 7 -> 7
    assert minhash_signatures(np.array([1], np.uint32), one, top, np.array([0], np.uint64), backend=backend).tolist() == [[7]]


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_documents_without_shingles(backend):
    a, b = permutations(8, seed=1)
    got = minhash_signatures(np.zeros(0, np.uint32), np.zeros(4, np.int64), a, b, backend=backend)
    assert got.shape == (3, 8) and (got == 0xFFFFFFFF).all()
    assert minhash_signatures(np.zeros(0, np.uint32), np.zeros(1, np.int64), a, b, backend=backend).shape == (0, 8)


def test_bad_layouts_are_rejected():
    a, b = permutations(4, seed=1)
    with pytest.raises(ValueError, match="offsets"):
        minhash_signatures(np.zeros(3, np.uint32), np.array([0, 2]), a, b)
    with pytest.raises(ValueError, match="non-decreasing"):
        minhash_signatures(np.zeros(3, np.uint32), np.array([0, 2, 1, 3]), a, b)
    with pytest.raises(ValueError, match="same length"):
        minhash_signatures(np.zeros(3, np.uint32), np.array([0, 3]), a, b[:2])
    with pytest.raises(ValueError, match="unknown MinHash backend"):
        minhash_signatures(np.zeros(3, np.uint32), np.array([0, 3]), a, b, backend="gpu")


def test_cpu_torch_tensors_come_back_as_tensors():
    torch = pytest.importorskip("torch")
    hashes, offsets = random_docs(9, 6, seed=3)
    a, b = permutations(16, seed=4)
    got = minhash_signatures(torch.from_numpy(hashes.astype(np.int64)), torch.from_numpy(offsets), a, b)
    assert got.dtype == torch.uint32 and got.device.type == "cpu"
    assert np.array_equal(got.view(torch.int32).numpy().view(np.uint32), minhash_signatures_reference(hashes, offsets, a, b))


def _datasketch_minhash(num_perm, seed, **kw):
    datasketch = pytest.importorskip("datasketch")
    if "scheme" in inspect.signature(datasketch.MinHash.__init__).parameters:
        kw["scheme"] = "legacy"  # datasketch >= 2.0 defaults to another scheme
    return datasketch.MinHash(num_perm=num_perm, seed=seed, hashfunc=lambda x: x, **kw)


@pytest.mark.parametrize("num_perm,seed", [(256, 1), (128, 42), (7, 0)])
def test_bit_identical_to_datasketch(num_perm, seed):
    hashes, offsets = random_docs(6, 300, seed=seed)
    a, b = permutations(num_perm, seed)
    ours = minhash_signatures(hashes, offsets, a, b)
    for d in range(6):
        m = _datasketch_minhash(num_perm, seed)
        assert np.array_equal(m.permutations[0], a) and np.array_equal(m.permutations[1], b)
        m.update_batch(hashes[offsets[d]:offsets[d + 1]].tolist())
        assert np.array_equal(m.hashvalues, ours[d].astype(np.uint64)), d  # empty: datasketch's max hash too
