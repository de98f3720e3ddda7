"""Fused MoE for a few rows per expert on CPU (decode steps, short prompts): numba kernels.

With a handful of rows per expert the routed SwiGLU is a streaming problem: each hit expert's
weights must be read once, and everything else is overhead. The GEMM libraries torch calls do
this badly at that shape on the 2-core AMD EPYC this was measured on: MKL's sgemm reached
2-7 GB/s and oneDNN carries ~60-80 us per call, where a plain dot-product loop that reads each
weight row once and applies it to up to four token rows held in L1 streams at 14-40 GB/s (the
machine's two-thread stream bandwidth is ~18 GB/s). So this module does the whole layer in
two parallel passes and no per-expert Python:

1. ``_gate_up``: jobs are blocks of the intermediate dimension; each job, for every hit expert,
   computes ``silu(G x) * (U x)`` for that expert's rows (the gate and up rows share the x
   loads), so the two cores split every expert's weights evenly.
2. ``_down_combine``: jobs are blocks of the hidden dimension; each job adds
   ``w[t, slot] * (W2 act)`` of every (token, slot) into the fp32 output. A job owns its output
   columns, so slots of one token in different experts never race, and each token's slots are
   added in ascending expert order: the same order alone or in any batch.

Above a few dozen rows per expert the GEMM libraries' blocking wins (``MAX_ROWS_PER_EXPERT``);
the caller (``moe.fused_moe_torch``) decides. fp32 only; numba is optional (``available()``).
"""

from __future__ import annotations

import math
import types

import numpy as np
import torch
from torch import Tensor

try:
    import numba
except ImportError:  # optional: without it the torch path runs
    numba = None

BLOCK = 32  # output rows of a weight matrix per parallel job
# Mean rows per expert up to which these kernels beat the sorted oneDNN path, measured through
# fused_moe_torch on the 2-core EPYC (E=8, top-2): at 32 rows 2.7x (H=128) ... 1.06x (H=1024);
# at 64 rows 1.6x (H=128) but 0.75-0.9x from H=256 up.
MAX_ROWS_PER_EXPERT = 32
_FASTMATH = {"reassoc", "contract"}  # vectorised reductions; no 'ninf': silu may see exp() overflow


def available() -> bool:
    """True when numba imports (the kernels compile on first use, then load from its cache)."""
    return numba is not None


def _jit(fn, parallel: bool = False, fastmath: bool = False, name: str | None = None):
    """``numba.njit``, cached on disk when the package directory is writable. ``name``: compile a
    copy under that name, so a second build of one function (serial vs parallel) gets its own
    cache entry (numba keys its disk cache by the function's name, not by the build options)."""
    if name is not None:
        fn = types.FunctionType(fn.__code__, fn.__globals__, name, fn.__defaults__, fn.__closure__)
        fn.__qualname__ = name
    options: dict = {"parallel": True} if parallel else {}
    if fastmath:
        options["fastmath"] = _FASTMATH
    try:
        return numba.njit(cache=True, **options)(fn)
    except RuntimeError:  # numba refuses cache=True where it can find no cache directory
        return numba.njit(**options)(fn)


def _group_by_expert(ids: np.ndarray, num_experts: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(pairs, starts, experts)``: pair indices t*k+slot grouped by expert (ascending, stable);
    group g holds ``pairs[starts[g]:starts[g+1]]`` and is expert ``experts[g]``."""
    counts = np.zeros(num_experts, np.int64)
    for e in ids:
        if e < 0 or e >= num_experts:  # the kernels index without bounds checks
            raise IndexError("an expert id is outside [0, num_experts)")
        counts[e] += 1
    groups = 0
    for e in range(num_experts):
        if counts[e] > 0:
            groups += 1
    experts = np.empty(groups, np.int64)
    starts = np.empty(groups + 1, np.int64)
    offset = np.empty(num_experts, np.int64)
    g, total = 0, 0
    for e in range(num_experts):
        if counts[e] > 0:
            experts[g] = e
            starts[g] = total
            offset[e] = total
            total += counts[e]
            g += 1
    starts[groups] = total
    pairs = np.empty(ids.shape[0], np.int64)
    for p in range(ids.shape[0]):
        e = ids[p]
        pairs[offset[e]] = p
        offset[e] += 1
    return pairs, starts, experts


def _gate_up(x: np.ndarray, pairs: np.ndarray, starts: np.ndarray, experts: np.ndarray, top_k: int,
             w13: np.ndarray, act: np.ndarray) -> None:
    """``act[r, n] = silu(G_e[n] . x_t) * (U_e[n] . x_t)`` for grouped row r = pair (t, slot)."""
    inter = w13.shape[1] // 2
    hidden = x.shape[1]
    blocks = (inter + BLOCK - 1) // BLOCK
    one = np.float32(1.0)
    for b in numba.prange(blocks):
        for g in range(experts.shape[0]):
            e = experts[g]
            r0, r1 = starts[g], starts[g + 1]
            for n in range(b * BLOCK, min(inter, (b + 1) * BLOCK)):
                r = r0
                while r + 4 <= r1:  # four rows share each weight load
                    t0, t1 = pairs[r] // top_k, pairs[r + 1] // top_k
                    t2, t3 = pairs[r + 2] // top_k, pairs[r + 3] // top_k
                    g0 = g1 = g2 = g3 = np.float32(0.0)
                    u0 = u1 = u2 = u3 = np.float32(0.0)
                    for k in range(hidden):
                        wg, wu = w13[e, n, k], w13[e, inter + n, k]
                        x0, x1, x2, x3 = x[t0, k], x[t1, k], x[t2, k], x[t3, k]
                        g0 += wg * x0
                        g1 += wg * x1
                        g2 += wg * x2
                        g3 += wg * x3
                        u0 += wu * x0
                        u1 += wu * x1
                        u2 += wu * x2
                        u3 += wu * x3
                    act[r, n] = g0 / (one + math.exp(-g0)) * u0
                    act[r + 1, n] = g1 / (one + math.exp(-g1)) * u1
                    act[r + 2, n] = g2 / (one + math.exp(-g2)) * u2
                    act[r + 3, n] = g3 / (one + math.exp(-g3)) * u3
                    r += 4
                while r < r1:
                    t = pairs[r] // top_k
                    gs = us = np.float32(0.0)
                    for k in range(hidden):
                        xv = x[t, k]
                        gs += w13[e, n, k] * xv
                        us += w13[e, inter + n, k] * xv
                    act[r, n] = gs / (one + math.exp(-gs)) * us
                    r += 1


def _down_combine(act: np.ndarray, pairs: np.ndarray, starts: np.ndarray, experts: np.ndarray, top_k: int,
                  w2: np.ndarray, weights: np.ndarray, out: np.ndarray) -> None:
    """``out[t, h] += w[t, slot] * (W2_e[h] . act[r])`` over the grouped rows; ``out`` starts at 0."""
    hidden, inter = w2.shape[1], w2.shape[2]
    blocks = (hidden + BLOCK - 1) // BLOCK
    for b in numba.prange(blocks):
        for g in range(experts.shape[0]):
            e = experts[g]
            r0, r1 = starts[g], starts[g + 1]
            for h in range(b * BLOCK, min(hidden, (b + 1) * BLOCK)):
                r = r0
                while r + 4 <= r1:
                    s0 = s1 = s2 = s3 = np.float32(0.0)
                    for i in range(inter):
                        w = w2[e, h, i]
                        s0 += w * act[r, i]
                        s1 += w * act[r + 1, i]
                        s2 += w * act[r + 2, i]
                        s3 += w * act[r + 3, i]
                    p0, p1, p2, p3 = pairs[r], pairs[r + 1], pairs[r + 2], pairs[r + 3]
                    out[p0 // top_k, h] += weights[p0] * s0
                    out[p1 // top_k, h] += weights[p1] * s1
                    out[p2 // top_k, h] += weights[p2] * s2
                    out[p3 // top_k, h] += weights[p3] * s3
                    r += 4
                while r < r1:
                    s = np.float32(0.0)
                    for i in range(inter):
                        s += w2[e, h, i] * act[r, i]
                    p = pairs[r]
                    out[p // top_k, h] += weights[p] * s
                    r += 1


def _layer(x: np.ndarray, ids: np.ndarray, weights: np.ndarray, top_k: int, num_experts: int,
           w13: np.ndarray, w2: np.ndarray, parallel: bool) -> np.ndarray:
    """Grouping, both passes and their buffers in one compiled call (one dispatch per layer).

    ``parallel`` False runs the same loops compiled without prange: the parallel build hands its
    work to an OpenMP worker even at one thread, and that worker spin-waits between calls
    (measured: 1.85 cores busy for one thread's work, which starved a serving replica's HTTP path
    on a 2-core machine)."""
    pairs, starts, experts = _group_compiled(ids, num_experts)
    act = np.empty((ids.shape[0], w2.shape[2]), np.float32)
    out = np.zeros((x.shape[0], x.shape[1]), np.float32)
    if parallel:
        _gate_up_parallel(x, pairs, starts, experts, top_k, w13, act)
        _down_combine_parallel(act, pairs, starts, experts, top_k, w2, weights, out)
    else:
        _gate_up_serial(x, pairs, starts, experts, top_k, w13, act)
        _down_combine_serial(act, pairs, starts, experts, top_k, w2, weights, out)
    return out


if numba is not None:  # lazy: each compiles (or loads from numba's cache) on its first call
    _group_compiled = _jit(_group_by_expert)
    _gate_up_parallel = _jit(_gate_up, parallel=True, fastmath=True)
    _down_combine_parallel = _jit(_down_combine, parallel=True, fastmath=True)
    _gate_up_serial = _jit(_gate_up, fastmath=True, name="_gate_up_serial")
    _down_combine_serial = _jit(_down_combine, fastmath=True, name="_down_combine_serial")
    _layer_compiled = _jit(_layer)


def supports(hidden: Tensor, w13: Tensor, w2: Tensor) -> bool:
    """Whether these kernels can run: numba present, fp32 contiguous CPU tensors."""
    return (
        available()
        and hidden.device.type == "cpu"
        and hidden.dtype == w13.dtype == w2.dtype == torch.float32
        and w13.is_contiguous()
        and w2.is_contiguous()
    )


def fused_moe_few_rows(hidden: Tensor, w13: Tensor, w2: Tensor, topk_weights: Tensor, topk_ids: Tensor) -> Tensor:
    """``out[t] = sum_k w[t,k] * W2_e (silu(G_e x_t) * (U_e x_t))`` (inference only; see ``supports``)."""
    torch_threads = torch.get_num_threads()
    threads = max(1, min(torch_threads, numba.config.NUMBA_NUM_THREADS))
    x = hidden.detach().contiguous().numpy()
    ids = topk_ids.detach().reshape(-1).to(torch.int64).numpy()
    weights = topk_weights.detach().reshape(-1).to(torch.float32).contiguous().numpy()
    if threads > 1:
        numba.set_num_threads(threads)
    out = _layer_compiled(x, ids, weights, topk_ids.shape[1], w13.shape[0], w13.detach().numpy(),
                          w2.detach().numpy(), threads > 1)
    if torch.get_num_threads() != torch_threads:
        # numba's OpenMP layer, launched on the first compile or load of a parallel kernel, sets
        # the calling thread's OpenMP thread count to all cores, and torch reads that count: a
        # replica given one CPU went on with two threads after its first MoE layer.
        torch.set_num_threads(torch_threads)
    return torch.from_numpy(out)
