"""Triton MoE kernels (vLLM ``fused_moe`` design): gating, block alignment, grouped-GEMM experts.

- ``topk_softmax``: one program per ``BLOCK_T`` router rows; fp32 softmax over the experts,
  then k rounds of (row max, lowest index holding it, knock it out), optional renormalisation.
- ``moe_align_block_size``: three small Triton kernels, deterministic and without atomics:
  per-chunk expert histograms; one program turning them into each chunk's per-expert base, each
  expert's padded start, ``expert_ids`` and ``num_tokens_post_padded``; then every pair finds
  its slot as expert start + chunk base + its rank among same-expert pairs of its chunk. The
  order equals the torch reference's stable sort, so the two are compared exactly.
- ``fused_moe``: two grouped GEMMs over the expert-sorted, block-padded rows, each block of
  ``BLOCK_M`` rows using one expert's weights. The first computes the gate and up tiles of
  ``w13`` together (two fp32 accumulators) and applies SiLU·mul in its epilogue, writing the
  ``[T*k, I]`` intermediate in the input dtype; the second multiplies by ``w2``, scales by the
  routing weight in fp32 and writes fp32 per-(token, slot) rows ``[T*k, H]``, which are summed
  over k by torch (deterministic; no atomics). Blocks past ``num_tokens_post_padded`` exit at
  once, so the grid is sized from shapes alone and nothing syncs with the host.

Only Triton APIs common to 3.6 and 3.9 are used. To run on CPU tensors (the tests),
``TRITON_INTERPRET=1`` must be in the environment before ``triton`` is first imported: Triton
decides interpret vs compile when a function (its own ``tl.max`` included) is decorated.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch import Tensor

from raypress.kernels.moe_reference import moe_align_max_sizes

ALIGN_CHUNK = 128  # pairs per program in the alignment kernels ([CHUNK, CHUNK] rank matrix)


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


# ----------------------------------------------------------------------------- gating
@triton.jit
def _topk_softmax_kernel(
    logits_ptr, weights_ptr, ids_ptr, num_tokens, num_experts, stride_lt, stride_le,
    K: tl.constexpr, RENORMALIZE: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_E: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    rows = tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)
    cols = tl.arange(0, BLOCK_E)
    row_ok = rows < num_tokens
    col_ok = cols < num_experts
    x = tl.load(logits_ptr + rows[:, None] * stride_lt + cols[None, :] * stride_le,
                mask=row_ok[:, None] & col_ok[None, :], other=0.0).to(tl.float32)
    x = tl.where(col_ok[None, :], x, float("-inf"))
    p = tl.exp(x - tl.max(x, axis=1)[:, None])
    p = p / tl.sum(p, axis=1)[:, None]
    p = tl.where(col_ok[None, :], p, -2.0)  # padding columns are never picked
    kcols = tl.arange(0, BLOCK_K)
    top_w = tl.zeros([BLOCK_T, BLOCK_K], dtype=tl.float32)
    top_i = tl.zeros([BLOCK_T, BLOCK_K], dtype=tl.int32)
    for j in range(K):
        best = tl.max(p, axis=1)
        idx = tl.min(tl.where(p == best[:, None], cols[None, :], BLOCK_E), axis=1)
        top_w = tl.where(kcols[None, :] == j, best[:, None], top_w)
        top_i = tl.where(kcols[None, :] == j, idx[:, None], top_i)
        p = tl.where(cols[None, :] == idx[:, None], -1.0, p)
    if RENORMALIZE:
        top_w = top_w / tl.sum(top_w, axis=1)[:, None]
    out = rows[:, None] * K + kcols[None, :]
    keep = row_ok[:, None] & (kcols[None, :] < K)
    tl.store(weights_ptr + out, top_w, mask=keep)
    tl.store(ids_ptr + out, top_i, mask=keep)


# ----------------------------------------------------------------------------- alignment
@triton.jit
def _align_count_kernel(ids_ptr, chunk_counts_ptr, num_pairs, BLOCK: tl.constexpr, BLOCK_E: tl.constexpr):
    chunk = tl.program_id(0)
    offs = chunk * BLOCK + tl.arange(0, BLOCK)
    ids = tl.load(ids_ptr + offs, mask=offs < num_pairs, other=-1).to(tl.int32)
    experts = tl.arange(0, BLOCK_E)
    hits = (ids[:, None] == experts[None, :]).to(tl.int32)
    tl.store(chunk_counts_ptr + chunk * BLOCK_E + experts, tl.sum(hits, axis=0))


@triton.jit
def _align_offsets_kernel(
    chunk_counts_ptr, chunk_base_ptr, expert_start_ptr, expert_ids_ptr, total_ptr,
    num_chunks, block_size, max_blocks, BLOCK_E: tl.constexpr, BLOCK_B: tl.constexpr,
):
    experts = tl.arange(0, BLOCK_E)
    running = tl.zeros([BLOCK_E], dtype=tl.int32)
    for chunk in range(0, num_chunks):
        tl.store(chunk_base_ptr + chunk * BLOCK_E + experts, running)
        running += tl.load(chunk_counts_ptr + chunk * BLOCK_E + experts)
    padded = (running + block_size - 1) // block_size * block_size
    earlier = experts[None, :] < experts[:, None]  # [e, j]: expert j comes before expert e
    start = tl.sum(tl.where(earlier, padded[None, :], 0), axis=1)
    tl.store(expert_start_ptr + experts, start)
    total = tl.sum(padded, axis=0)
    tl.store(total_ptr, total)
    end_block = (start + padded) // block_size
    used_blocks = total // block_size
    for b0 in range(0, max_blocks, BLOCK_B):
        blocks = b0 + tl.arange(0, BLOCK_B)
        owner = tl.sum((end_block[None, :] <= blocks[:, None]).to(tl.int32), axis=1)
        owner = tl.where(blocks < used_blocks, owner, -1)
        tl.store(expert_ids_ptr + blocks, owner, mask=blocks < max_blocks)


@triton.jit
def _align_scatter_kernel(
    ids_ptr, chunk_base_ptr, expert_start_ptr, sorted_ptr, num_pairs,
    BLOCK: tl.constexpr, BLOCK_E: tl.constexpr,
):
    chunk = tl.program_id(0)
    local = tl.arange(0, BLOCK)
    offs = chunk * BLOCK + local
    ok = offs < num_pairs
    ids = tl.load(ids_ptr + offs, mask=ok, other=-1).to(tl.int32)
    same_before = (ids[:, None] == ids[None, :]) & (local[None, :] < local[:, None])
    rank = tl.sum(same_before.to(tl.int32), axis=1)
    safe = tl.where(ok, ids, 0)
    base = tl.load(expert_start_ptr + safe, mask=ok, other=0)
    base += tl.load(chunk_base_ptr + chunk * BLOCK_E + safe, mask=ok, other=0)
    tl.store(sorted_ptr + base + rank, offs.to(tl.int32), mask=ok)


# ----------------------------------------------------------------------------- grouped GEMMs
@triton.jit
def _moe_gate_up_kernel(
    x_ptr, w_ptr, out_ptr, sorted_ptr, expert_ids_ptr, npp_ptr,
    num_pairs, hidden_size, inter_size,
    stride_xm, stride_xk, stride_we, stride_wn, stride_wk, stride_om, stride_on,
    TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    IEEE: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BLOCK_M >= tl.load(npp_ptr):
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_ptr + offs_m).to(tl.int64)
    valid = pair < num_pairs
    token = pair // TOP_K
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_ok = offs_n < inter_size
    x_ptrs = x_ptr + token[:, None] * stride_xm + offs_k[None, :] * stride_xk
    g_ptrs = w_ptr + expert * stride_we + offs_n[None, :] * stride_wn + offs_k[:, None] * stride_wk
    u_ptrs = g_ptrs + inter_size * stride_wn
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, hidden_size, BLOCK_K):
        k_ok = offs_k < hidden_size - k0
        x = tl.load(x_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        g = tl.load(g_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        u = tl.load(u_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if IEEE:
            acc_g = tl.dot(x, g, acc_g, input_precision="ieee")
            acc_u = tl.dot(x, u, acc_u, input_precision="ieee")
        else:
            acc_g = tl.dot(x, g, acc_g)
            acc_u = tl.dot(x, u, acc_u)
        x_ptrs += BLOCK_K * stride_xk
        g_ptrs += BLOCK_K * stride_wk
        u_ptrs += BLOCK_K * stride_wk
    act = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    out_ptrs = out_ptr + pair[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, act.to(out_ptr.dtype.element_ty), mask=valid[:, None] & n_ok[None, :])


@triton.jit
def _moe_down_kernel(
    a_ptr, w_ptr, out_ptr, sorted_ptr, expert_ids_ptr, npp_ptr, route_w_ptr,
    num_pairs, hidden_size, inter_size,
    stride_am, stride_ak, stride_we, stride_wn, stride_wk, stride_om, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    if pid_m * BLOCK_M >= tl.load(npp_ptr):
        return
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    pair = tl.load(sorted_ptr + offs_m).to(tl.int64)
    valid = pair < num_pairs
    expert = tl.load(expert_ids_ptr + pid_m).to(tl.int64)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    n_ok = offs_n < hidden_size
    a_ptrs = a_ptr + pair[:, None] * stride_am + offs_k[None, :] * stride_ak
    w_ptrs = w_ptr + expert * stride_we + offs_n[None, :] * stride_wn + offs_k[:, None] * stride_wk
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, inter_size, BLOCK_K):
        k_ok = offs_k < inter_size - k0
        a = tl.load(a_ptrs, mask=valid[:, None] & k_ok[None, :], other=0.0)
        w = tl.load(w_ptrs, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if IEEE:
            acc = tl.dot(a, w, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K * stride_ak
        w_ptrs += BLOCK_K * stride_wk
    route = tl.load(route_w_ptr + pair, mask=valid, other=0.0).to(tl.float32)
    acc = acc * route[:, None]
    out_ptrs = out_ptr + pair[:, None] * stride_om + offs_n[None, :] * stride_on
    tl.store(out_ptrs, acc, mask=valid[:, None] & n_ok[None, :])


# ----------------------------------------------------------------------------- launchers
def topk_softmax(router_logits: Tensor, k: int, renormalize: bool) -> tuple[Tensor, Tensor]:
    """Fused softmax + top-k gating: ``(weights float32 [T, k], ids int32 [T, k])``."""
    num_tokens, num_experts = router_logits.shape
    if not 0 < k <= num_experts:
        raise ValueError(f"top-k {k} must be in 1..{num_experts}")
    weights = torch.empty(num_tokens, k, dtype=torch.float32, device=router_logits.device)
    ids = torch.empty(num_tokens, k, dtype=torch.int32, device=router_logits.device)
    if num_tokens == 0:
        return weights, ids
    block_e = max(2, _next_pow2(num_experts))
    block_t = max(1, min(16, 4096 // block_e))
    grid = (triton.cdiv(num_tokens, block_t),)
    _topk_softmax_kernel[grid](
        router_logits, weights, ids, num_tokens, num_experts,
        router_logits.stride(0), router_logits.stride(1),
        K=k, RENORMALIZE=renormalize, BLOCK_T=block_t, BLOCK_E=block_e, BLOCK_K=max(2, _next_pow2(k)),
    )
    return weights, ids


def moe_align_block_size(topk_ids: Tensor, block_size: int, num_experts: int) -> tuple[Tensor, Tensor, Tensor]:
    """vLLM's expert-sorted, block-padded layout (contract: ``moe_align_block_size_reference``)."""
    device = topk_ids.device
    flat = topk_ids.reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    num_pairs = flat.numel()
    max_padded, max_blocks = moe_align_max_sizes(num_pairs, block_size, num_experts)
    sorted_ids = torch.full((max_padded,), num_pairs, dtype=torch.int32, device=device)
    expert_ids = torch.empty(max_blocks, dtype=torch.int32, device=device)
    total = torch.empty(1, dtype=torch.int32, device=device)
    block_e = max(2, _next_pow2(num_experts))
    num_chunks = max(1, triton.cdiv(num_pairs, ALIGN_CHUNK))
    chunk_counts = torch.empty(num_chunks, block_e, dtype=torch.int32, device=device)
    chunk_base = torch.empty_like(chunk_counts)
    expert_start = torch.empty(block_e, dtype=torch.int32, device=device)
    _align_count_kernel[(num_chunks,)](flat, chunk_counts, num_pairs, BLOCK=ALIGN_CHUNK, BLOCK_E=block_e)
    _align_offsets_kernel[(1,)](
        chunk_counts, chunk_base, expert_start, expert_ids, total, num_chunks, block_size, max_blocks,
        BLOCK_E=block_e, BLOCK_B=64,
    )
    _align_scatter_kernel[(num_chunks,)](flat, chunk_base, expert_start, sorted_ids, num_pairs, BLOCK=ALIGN_CHUNK, BLOCK_E=block_e)
    return sorted_ids, expert_ids, total


@dataclass(frozen=True)
class MoEKernelConfig:
    """Tile sizes of the two grouped GEMMs; ``block_m`` is also the alignment block size."""

    block_m: int = 64
    block_n_up: int = 64
    block_n_down: int = 64
    block_k: int = 64
    num_warps: int = 4
    num_stages: int = 3


def default_config(num_tokens: int, num_experts: int, top_k: int) -> MoEKernelConfig:
    """vLLM-like defaults: 16-row blocks while experts see few rows (decode), 64-row blocks after."""
    if num_tokens * top_k <= 16 * num_experts:
        return MoEKernelConfig(block_m=16, block_n_up=64, block_n_down=32, block_k=64, num_warps=4, num_stages=4)
    return MoEKernelConfig()


def fused_moe(
    hidden: Tensor, w13: Tensor, w2: Tensor, topk_weights: Tensor, topk_ids: Tensor,
    config: MoEKernelConfig | None = None,
) -> Tensor:
    """Routed SwiGLU experts with two grouped GEMMs (see the module docstring); ``[T, H]``."""
    num_tokens, hidden_size = hidden.shape
    num_experts, two_inter, _ = w13.shape
    inter = two_inter // 2
    top_k = topk_ids.shape[1]
    if w13.shape[2] != hidden_size or w2.shape != (num_experts, hidden_size, inter):
        raise ValueError(f"shapes do not match: hidden {tuple(hidden.shape)}, w13 {tuple(w13.shape)}, w2 {tuple(w2.shape)}")
    if not (hidden.dtype == w13.dtype == w2.dtype):
        raise ValueError(f"hidden, w13 and w2 must share a dtype, got {hidden.dtype}, {w13.dtype}, {w2.dtype}")
    if num_tokens == 0:
        return torch.zeros_like(hidden)
    cfg = config or default_config(num_tokens, num_experts, top_k)
    sorted_ids, expert_ids, npp = moe_align_block_size(topk_ids, cfg.block_m, num_experts)
    num_pairs = num_tokens * top_k
    max_blocks = expert_ids.numel()
    ieee = hidden.dtype == torch.float32
    launch = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}

    act = torch.empty(num_pairs, inter, dtype=hidden.dtype, device=hidden.device)
    _moe_gate_up_kernel[(max_blocks, triton.cdiv(inter, cfg.block_n_up))](
        hidden, w13, act, sorted_ids, expert_ids, npp, num_pairs, hidden_size, inter,
        hidden.stride(0), hidden.stride(1), w13.stride(0), w13.stride(1), w13.stride(2), act.stride(0), act.stride(1),
        TOP_K=top_k, BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n_up, BLOCK_K=cfg.block_k, IEEE=ieee, **launch,
    )
    per_pair = torch.empty(num_pairs, hidden_size, dtype=torch.float32, device=hidden.device)
    route = topk_weights.reshape(-1).to(torch.float32).contiguous()
    _moe_down_kernel[(max_blocks, triton.cdiv(hidden_size, cfg.block_n_down))](
        act, w2, per_pair, sorted_ids, expert_ids, npp, route, num_pairs, hidden_size, inter,
        act.stride(0), act.stride(1), w2.stride(0), w2.stride(1), w2.stride(2), per_pair.stride(0), per_pair.stride(1),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n_down, BLOCK_K=cfg.block_k, IEEE=ieee, **launch,
    )
    return per_pair.view(num_tokens, top_k, hidden_size).sum(dim=1).to(hidden.dtype)
