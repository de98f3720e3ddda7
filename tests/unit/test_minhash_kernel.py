"""The Triton MinHash kernel in interpret mode (and on CUDA when there is one) against the reference.

Triton decides interpret vs compile when it is first imported, so this module sets
``TRITON_INTERPRET=1`` before anything imports triton; if triton was already imported in compiled
mode, the in-process tests skip and ``test_triton_minhash_in_fresh_interpreter`` reruns them in a
subprocess (the pattern of ``test_moe_kernels.py``).
"""

from __future__ import annotations

import os
import subprocess
import sys

if "triton" not in sys.modules:
    os.environ["TRITON_INTERPRET"] = "1"

import numpy as np
import pytest

from raypress.kernels.minhash import minhash_signatures
from raypress.kernels.minhash_reference import minhash_signatures_reference
from raypress.operators.dedup.minhash.bands import permutations

torch = pytest.importorskip("torch")
INTERPRET_READY = os.environ.get("TRITON_INTERPRET") == "1"
P61 = (1 << 61) - 1


@pytest.fixture
def tri():
    """The Triton module, in interpret mode."""
    pytest.importorskip("triton")
    if not INTERPRET_READY:
        pytest.skip("triton was imported in compiled mode; see test_triton_minhash_in_fresh_interpreter")
    from raypress.kernels import minhash_triton

    return minhash_triton


def random_docs(n_docs: int, max_len: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, max_len + 1, size=n_docs)
    counts[[0, n_docs // 2, n_docs - 1]] = 0
    offsets = np.zeros(n_docs + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    hashes = rng.integers(0, 1 << 32, size=int(offsets[-1]), dtype=np.uint64).astype(np.uint32)
    hashes[:3] = [0, 0xFFFFFFFF, 0x80000000]
    return hashes, offsets


def as_numpy(sig) -> np.ndarray:
    assert sig.dtype == torch.uint32
    return sig.cpu().view(torch.int32).numpy().view(np.uint32)


@pytest.mark.parametrize("num_perm,block_s,block_p", [(40, 8, 16), (64, 16, 64), (5, 4, 128)])
def test_triton_kernel_matches_reference(tri, num_perm, block_s, block_p):
    hashes, offsets = random_docs(11, 30, seed=num_perm)
    a, b = permutations(num_perm, seed=3)
    expected = minhash_signatures_reference(hashes, offsets, a, b)
    for h in (torch.from_numpy(hashes.view(np.int32)).view(torch.uint32),  # every hash dtype the wrapper takes
              torch.from_numpy(hashes.view(np.int32)), torch.from_numpy(hashes.astype(np.int64))):
        got = tri.minhash_signatures_triton(h, torch.from_numpy(offsets), a, b, block_s=block_s, block_p=block_p)
        assert np.array_equal(as_numpy(got), expected)


def test_triton_kernel_mersenne_corners(tri):
    a = np.array([1, 1, 1, 2, P61 - 1, (1 << 64) - 1], dtype=np.uint64)
    b = np.array([P61 - 1, P61 - 2, 0, P61 - 2, P61 - 1, 0], dtype=np.uint64)
    hashes = np.array([1, 0xFFFFFFFF, 2, 0, 1 << 31], dtype=np.uint32)
    offsets = np.array([0, 1, 3, 5], dtype=np.int64)
    got = tri.minhash_signatures_triton(torch.from_numpy(hashes.astype(np.int64)), offsets,
                                        torch.from_numpy(a.view(np.int64)), torch.from_numpy(b.view(np.int64)),
                                        block_s=2, block_p=4)
    assert np.array_equal(as_numpy(got), minhash_signatures_reference(hashes, offsets, a, b))


def test_triton_backend_through_the_entry_point(tri):
    hashes, offsets = random_docs(6, 12, seed=9)
    a, b = permutations(32, seed=1)
    got = minhash_signatures(torch.from_numpy(hashes.astype(np.int64)), torch.from_numpy(offsets), a, b,
                             backend="triton")
    assert np.array_equal(as_numpy(got), minhash_signatures(hashes, offsets, a, b, backend="numpy"))
    empty = tri.minhash_signatures_triton(torch.zeros(0, dtype=torch.int64), np.zeros(3, np.int64), a, b)
    assert as_numpy(empty).shape == (2, 32) and (as_numpy(empty) == 0xFFFFFFFF).all()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_pick_triton_and_match():
    if INTERPRET_READY:
        pytest.skip("interpret mode is on in this process")
    hashes, offsets = random_docs(300, 400, seed=1)
    a, b = permutations(256, seed=1)
    got = minhash_signatures(torch.from_numpy(hashes.astype(np.int64)).cuda(), torch.from_numpy(offsets).cuda(), a, b)
    assert got.is_cuda
    assert np.array_equal(as_numpy(got), minhash_signatures_reference(hashes, offsets, a, b))


def test_triton_minhash_in_fresh_interpreter():
    """Only when triton was imported before this module could turn interpret mode on."""
    pytest.importorskip("triton")
    if INTERPRET_READY:
        pytest.skip("interpret mode is on in this process; the Triton tests above ran here")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-o", "addopts=", "-p", "no:cacheprovider",
         "-k", "triton and not fresh_interpreter"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]


def test_band_signatures_on_an_accelerator_are_the_cpu_ones(tri):
    """`accelerator: cuda` (ray_bts_minhash_deduplicator) moves the hashes to the device, runs the
    kernel and brings uint32 signatures back: here on the CPU device in interpret mode."""
    from raypress.kernels.minhash import minhash_signatures_on
    from raypress.operators.dedup.minhash.lsh import signatures_on

    hashes, offsets = random_docs(9, 25, seed=4)
    a, b = permutations(32, seed=1)
    cpu = signatures_on("cpu", hashes, offsets, a, b)
    got = minhash_signatures_on("cpu", hashes, offsets, a, b)
    assert got.dtype == np.uint32 and np.array_equal(got, cpu)
    assert np.array_equal(cpu, minhash_signatures_reference(hashes, offsets, a, b))
