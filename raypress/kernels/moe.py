"""Mixture-of-experts kernels: the entry points the model calls, each picking its fastest path.

``topk_softmax`` (router gating), ``moe_align_block_size`` (vLLM's expert-sorted, block-padded
layout for a grouped GEMM) and ``fused_moe`` (the routed SwiGLU experts). On CUDA tensors each
runs its Triton kernel (``moe_triton``); elsewhere the torch paths below, and for fp32 CPU
inference with a few rows per expert ``moe_cpu``'s numba kernels (decode steps, short prompts).
``backend="triton"`` or ``RAYPRESS_MOE_BACKEND=triton`` forces Triton (on CPU tensors that needs
``TRITON_INTERPRET=1`` set before triton is first imported: the tests); ``"torch"`` forces the
torch path; ``"reference"`` the plain references of ``moe_reference``. Whenever autograd needs
gradients the torch path runs (the Triton kernels have no backward).

Weights use the Mixtral/vLLM layout ``(E, N, K)``: ``w13[e]`` is ``[gate; up]`` of shape
``(2I, H)``, ``w2[e]`` is ``(H, I)``. Routing ids may be int32 or int64 everywhere; the torch
gating returns int64, the Triton gating int32.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor

from raypress.kernels import moe_cpu
from raypress.kernels.moe_reference import (
    fused_moe_reference,
    moe_align_block_size_reference,
    topk_softmax_reference,
)

Backend = Literal["auto", "torch", "triton", "reference"]
BACKEND_ENV = "RAYPRESS_MOE_BACKEND"
_BACKENDS = ("auto", "torch", "triton", "reference")


def triton_available() -> bool:
    """True when the ``triton`` package can be imported (it may still lack a GPU)."""
    return importlib.util.find_spec("triton") is not None


def resolve_backend(tensor: Tensor, backend: Backend | None = None, needs_grad: bool = False) -> str:
    """The path to run: an explicit ``backend`` wins, then ``$RAYPRESS_MOE_BACKEND``, then auto.

    Auto means Triton for CUDA tensors when triton is installed and no gradient is needed (the
    Triton kernels have no backward), else the torch path, which autograd differentiates.
    """
    choice = backend or os.environ.get(BACKEND_ENV) or "auto"
    if choice not in _BACKENDS:
        raise ValueError(f"unknown MoE backend {choice!r}; expected one of {_BACKENDS}")
    if choice == "auto":
        return "triton" if tensor.is_cuda and triton_available() and not needs_grad else "torch"
    if choice == "triton" and needs_grad:
        raise ValueError("the Triton MoE kernels have no backward; use backend='torch' (or auto) when training")
    return choice


def _needs_grad(*tensors: Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _triton(tensor: Tensor):
    """The Triton module, imported only when a Triton path is chosen (triton is optional)."""
    if not tensor.is_cuda and os.environ.get("TRITON_INTERPRET", "0").lower() not in ("1", "true", "on", "yes"):
        raise RuntimeError("the Triton MoE kernels need CUDA tensors, or TRITON_INTERPRET=1 set before triton is imported")
    from raypress.kernels import moe_triton

    return moe_triton


def topk_softmax(router_logits: Tensor, k: int, renormalize: bool, backend: Backend | None = None) -> tuple[Tensor, Tensor]:
    """Top-k of the softmax over experts: ``(weights float32 [T, k], ids [T, k])``, largest first."""
    path = resolve_backend(router_logits, backend, _needs_grad(router_logits))
    if path == "triton":
        return _triton(router_logits).topk_softmax(router_logits, k, renormalize)
    if path == "torch" and renormalize:
        # The renormalised top-k of softmax(l) is softmax over the top-k of l (softmax is
        # monotonic and its normaliser cancels): two ops instead of four, ~40% less at decode.
        values, ids = torch.topk(router_logits.float(), k, dim=-1)
        return torch.softmax(values, dim=-1), ids
    return topk_softmax_reference(router_logits, k, renormalize)


def moe_align_block_size(topk_ids: Tensor, block_size: int, num_experts: int, backend: Backend | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """``(sorted_token_ids, expert_ids, num_tokens_post_padded)`` in vLLM's layout.

    See ``moe_reference.moe_align_block_size_reference`` for the exact contract (sentinel
    ``T*k`` for padding, -1 for unused blocks); the torch path is the vectorised reference.
    """
    path = resolve_backend(topk_ids, backend)
    if path == "triton":
        return _triton(topk_ids).moe_align_block_size(topk_ids, block_size, num_experts)
    return moe_align_block_size_reference(topk_ids, block_size, num_experts)


def fused_moe(hidden: Tensor, w13: Tensor, w2: Tensor, topk_weights: Tensor, topk_ids: Tensor, backend: Backend | None = None) -> Tensor:
    """``out[t] = sum_k w[t,k] * W2_e (silu(G_e x_t) * (U_e x_t))``, ``e = topk_ids[t,k]``; ``[T, H]``."""
    path = resolve_backend(hidden, backend, _needs_grad(hidden, w13, w2, topk_weights))
    if path == "triton":
        return _triton(hidden).fused_moe(hidden, w13, w2, topk_weights, topk_ids)
    if path == "reference":
        return fused_moe_reference(hidden, w13, w2, topk_weights, topk_ids)
    return fused_moe_torch(hidden, w13, w2, topk_weights, topk_ids)


def _mm_linear(x: Tensor, weight: Tensor) -> Tensor:
    return torch.mm(x, weight.t())


def _onednn_linear(x: Tensor, weight: Tensor) -> Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, None, "none", [], "")


@functools.lru_cache(maxsize=1)
def onednn_linear_available() -> bool:
    """Whether oneDNN's linear op (the one Inductor lowers CPU linears to) runs and agrees with mm."""
    if not torch.backends.mkldnn.is_available() or not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    try:
        x, w = torch.randn(3, 8), torch.randn(5, 8)
        return bool(torch.allclose(_onednn_linear(x, w), _mm_linear(x, w), atol=1e-5))
    except (RuntimeError, NotImplementedError):
        return False


def _use_onednn(hidden: Tensor, w13: Tensor, w2: Tensor, autograd: bool) -> bool:
    """oneDNN for fp32 CPU inference, where ``torch.mm`` would go to BLAS.

    On the 2-core AMD EPYC this was measured on, MKL's sgemm was 1.5-3x slower than oneDNN for
    the few-row products of routed experts and no faster at 512 rows. bf16/fp16 ``mm`` already
    uses oneDNN on CPU, and the oneDNN op has no autograd, so those keep ``torch.mm``.
    """
    return (
        USE_ONEDNN
        and not autograd
        and hidden.device.type == "cpu"
        and hidden.dtype == w13.dtype == w2.dtype == torch.float32
        and w13.is_contiguous()
        and w2.is_contiguous()
        and onednn_linear_available()
    )


USE_ONEDNN = True  # module switch so bench/moe_layer.py can show what oneDNN adds
FEW_ROWS = 64  # up to this many rows an expert runs as W @ x^T (see _expert_swiglu)


def _expert_swiglu(x: Tensor, w13_e: Tensor, w2_e: Tensor, autograd: bool, onednn: bool, out: Tensor | None = None) -> Tensor:
    """One expert on its ``[n, H]`` rows: ``W2 (silu(G x) * (U x))`` with ONE gate/up GEMM.

    With oneDNN the gate/up product runs transposed (``W13 @ x^T``): the weights become oneDNN's
    streamed operand, 1.3-1.5x faster than ``x @ W13^T`` at 2..FEW_ROWS rows and 1.08-1.17x at
    ~512 rows (H = 256..1024, I = 3.5 H, measured in alternating rounds on the 2-core EPYC).
    Above FEW_ROWS the down product then goes to BLAS with the ``[I, n]`` activations read
    transposed (1.1-1.3x over oneDNN on a contiguous copy); at 2..FEW_ROWS oneDNN keeps it
    (BLAS lost there). One row stays a BLAS GEMV, which beat both. ``out`` (inference only):
    an ``[n, H]`` buffer the result goes into, written by the down GEMM itself on BLAS paths.
    """
    inter = w2_e.shape[1]
    rows = x.shape[0]
    if onednn and rows > 1:
        gate_up_t = _onednn_linear(w13_e, x)  # [2I, n]: gate and up halves are contiguous blocks
        act_t = F.silu(gate_up_t[:inter]).mul_(gate_up_t[inter:])
        if rows > FEW_ROWS:
            return torch.mm(act_t.t(), w2_e.t(), out=out)  # BLAS reads the [I, n] act transposed
        y = _onednn_linear(w2_e, act_t.t().contiguous()).t()  # [n, H] view
        return y if out is None else out.copy_(y)
    gate_up = torch.mm(x, w13_e.t())
    act = F.silu(gate_up[:, :inter])
    act = act * gate_up[:, inter:] if autograd else act.mul_(gate_up[:, inter:])
    return torch.mm(act, w2_e.t()) if out is None else torch.mm(act, w2_e.t(), out=out)


USE_NUMBA = True  # module switch so bench/moe_layer.py can show what the numba kernels add


def _use_few_rows_kernels(hidden: Tensor, w13: Tensor, w2: Tensor, topk_ids: Tensor) -> bool:
    """``moe_cpu``'s streaming kernels for fp32 CPU inference with a few rows per expert."""
    pairs = topk_ids.numel()
    return (
        USE_NUMBA
        and 0 < pairs <= moe_cpu.MAX_ROWS_PER_EXPERT * w13.shape[0]
        and moe_cpu.supports(hidden, w13, w2)
    )


SMALL_PAIRS = 64  # up to this many (token, slot) pairs inference takes _fused_moe_small


def _fused_moe_small(hidden: Tensor, w13: Tensor, w2: Tensor, topk_weights: Tensor, topk_ids: Tensor, onednn: bool) -> Tensor:
    """Inference on few pairs (decode steps, short prompts), where per-op overhead is the cost.

    At a handful of tokens each hit expert's GEMMs read its weights once and every other op is
    dispatch overhead, so this path keeps the op count minimal: the routing goes to Python once
    (``tolist``, at most SMALL_PAIRS ints) and is grouped there (no argsort, bincount or
    per-expert mask), and all index math lands in at most ONE small index tensor. One
    ``index_select`` gathers the rows grouped by expert (none for a single token: every pair
    reads it), each expert writes its rows into one buffer, and one ``index_select`` (none
    when the groups are already in (token, slot) order: always so for one token) plus one
    batched GEMM apply the routing weights and sum each token's k slots in fp32.

    No ``index_add_``: on CPU it is ``scatter_add_``, which opens an OpenMP region even for one
    row and, with two threads on a busy machine, stalls for milliseconds whenever the other
    core is taken (measured 28 ms per call on the 2-core dev box under load).
    """
    num_tokens, top_k = topk_ids.shape
    num_pairs, hidden_size = num_tokens * top_k, hidden.shape[1]
    pairs_of: dict[int, list[int]] = {}  # expert -> its pairs t*k+slot; experts in order of first use
    for pair, expert in enumerate(topk_ids.reshape(-1).tolist()):
        pairs_of.setdefault(expert, []).append(pair)
    order = [pair for pairs in pairs_of.values() for pair in pairs]
    in_order = order == list(range(num_pairs))
    position = [0] * num_pairs  # row of each pair's output in the grouped buffer
    for row, pair in enumerate(order):
        position[pair] = row
    if num_tokens == 1:  # every pair reads the one token: no gather
        x_grouped = None
        index = None if in_order else torch.tensor(position, device=hidden.device)
    else:
        index = torch.tensor([pair // top_k for pair in order] + ([] if in_order else position), device=hidden.device)
        x_grouped = hidden.index_select(0, index[:num_pairs])
    out_grouped = hidden.new_empty(num_pairs, hidden_size)
    start = 0
    for expert, pairs in pairs_of.items():
        stop = start + len(pairs)
        if x_grouped is not None:
            x = x_grouped[start:stop]
        else:  # one token; an expert in two of its slots happens only in hand-made routings
            x = hidden if len(pairs) == 1 else hidden.expand(len(pairs), hidden_size).contiguous()
        _expert_swiglu(x, w13[expert], w2[expert], False, onednn, out=out_grouped[start:stop])
        start = stop
    by_pair = out_grouped if in_order else out_grouped.index_select(0, index[-num_pairs:])
    combined = torch.bmm(
        topk_weights.to(torch.float32).reshape(num_tokens, 1, top_k),
        by_pair.to(torch.float32).reshape(num_tokens, top_k, hidden_size),
    )
    return combined.reshape(num_tokens, hidden_size).to(hidden.dtype)


def fused_moe_torch(hidden: Tensor, w13: Tensor, w2: Tensor, topk_weights: Tensor, topk_ids: Tensor) -> Tensor:
    """The CPU path: pairs sorted by expert, two GEMMs per contiguous expert slice.

    Against Hugging Face's per-expert loop (a ``torch.where`` over a one-hot mask per expert,
    then a gather, GEMMs and several temporaries per expert) this does one stable argsort and
    one ``index_select`` for all (token, slot) pairs, then per expert with tokens: one fused
    gate/up GEMM, SiLU·mul into one buffer, the down GEMM, the routing-weight scale in place and
    an ``index_add_`` of that slice into an fp32 output. Experts without tokens cost nothing.
    Autograd-safe: when gradients are needed the in-place steps become out-of-place ones.
    fp32 inference on CPU with a few rows per expert runs ``moe_cpu``'s numba kernels when numba
    is installed; otherwise at most SMALL_PAIRS (token, slot) pairs take ``_fused_moe_small``.
    """
    num_tokens, top_k = topk_ids.shape
    autograd = _needs_grad(hidden, w13, w2, topk_weights)
    if not autograd and _use_few_rows_kernels(hidden, w13, w2, topk_ids):
        return moe_cpu.fused_moe_few_rows(hidden, w13, w2, topk_weights, topk_ids)  # fp32 in, fp32 out
    onednn = _use_onednn(hidden, w13, w2, autograd)
    if not autograd and hidden.device.type == "cpu" and 0 < topk_ids.numel() <= SMALL_PAIRS:
        return _fused_moe_small(hidden, w13, w2, topk_weights, topk_ids, onednn)
    flat = topk_ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    counts = torch.bincount(flat, minlength=w13.shape[0]).tolist()
    token_of_pair = order // top_k
    x_sorted = hidden.index_select(0, token_of_pair)
    weight_sorted = topk_weights.reshape(-1)[order].to(torch.float32).unsqueeze(1)
    out = torch.zeros(num_tokens, hidden.shape[1], dtype=torch.float32, device=hidden.device)
    start = 0
    for expert, count in enumerate(counts):
        if count == 0:
            continue
        stop = start + count
        y = _expert_swiglu(x_sorted[start:stop], w13[expert], w2[expert], autograd, onednn).to(torch.float32)
        y = y * weight_sorted[start:stop] if autograd else y.mul_(weight_sorted[start:stop])
        out.index_add_(0, token_of_pair[start:stop], y)
        start = stop
    return out.to(hidden.dtype)
