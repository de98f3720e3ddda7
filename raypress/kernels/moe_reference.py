"""Plain torch references for the MoE kernels: the semantics every fast path is tested against.

Each function has the same signature as its public entry point in ``raypress.kernels.moe``.
They favour being obviously right over being fast: the gating works in fp32, the alignment uses
a stable sort, and ``fused_moe_reference`` runs *every* expert on *every* token in fp32 and
combines them with a dense (T, E) routing matrix, so it shares no indexing trick with the paths
it checks (it is also the "dense" baseline of ``bench/moe_layer.py``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def topk_softmax_reference(router_logits: Tensor, k: int, renormalize: bool) -> tuple[Tensor, Tensor]:
    """Softmax over all experts in fp32, keep the k largest; Mixtral renormalises them to sum to 1.

    Returns ``(weights float32 [T, k], ids int64 [T, k])``, largest weight first.
    """
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = torch.topk(probs, k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


def moe_align_max_sizes(num_pairs: int, block_size: int, num_experts: int) -> tuple[int, int]:
    """Static output sizes of the alignment (vLLM's): worst case pads every expert by block_size - 1."""
    max_padded = num_pairs + num_experts * (block_size - 1)
    return max_padded, -(-max_padded // block_size)


def moe_align_block_size_reference(topk_ids: Tensor, block_size: int, num_experts: int) -> tuple[Tensor, Tensor, Tensor]:
    """Sort the flattened (token, slot) pairs by expert and pad each expert's run to ``block_size``.

    vLLM's layout, so a grouped GEMM can give each block of ``block_size`` rows a single expert:

    - ``sorted_token_ids`` int32 ``[T*k + E*(block_size-1)]``: flat pair indices ``t*k + slot``,
      grouped by expert in expert order, pairs of one expert in ascending flat order (stable);
      padding and the unused tail hold the sentinel ``T*k``.
    - ``expert_ids`` int32 ``[cdiv(len(sorted_token_ids), block_size)]``: the expert of each
      block; blocks past ``num_tokens_post_padded`` hold -1.
    - ``num_tokens_post_padded`` int32 ``[1]``: rows actually used (a multiple of block_size;
      experts without tokens take no block).
    """
    device = topk_ids.device
    flat = topk_ids.reshape(-1).long()
    num_pairs = flat.numel()
    max_padded, max_blocks = moe_align_max_sizes(num_pairs, block_size, num_experts)
    counts = torch.bincount(flat, minlength=num_experts)
    padded = (counts + block_size - 1) // block_size * block_size
    ends = torch.cumsum(padded, 0)
    starts = ends - padded
    total = int(ends[-1]) if num_experts else 0

    order = torch.sort(flat, stable=True).indices
    sorted_experts = flat[order]
    first_of_expert = torch.cumsum(counts, 0) - counts
    rank = torch.arange(num_pairs, device=device) - first_of_expert[sorted_experts]
    sorted_token_ids = torch.full((max_padded,), num_pairs, dtype=torch.int32, device=device)
    sorted_token_ids[starts[sorted_experts] + rank] = order.to(torch.int32)

    expert_ids = torch.full((max_blocks,), -1, dtype=torch.int32, device=device)
    used_blocks = total // block_size
    block_starts = torch.arange(used_blocks, device=device) * block_size
    expert_ids[:used_blocks] = torch.searchsorted(ends, block_starts, right=True).to(torch.int32)
    return sorted_token_ids, expert_ids, torch.tensor([total], dtype=torch.int32, device=device)


def routing_matrix(topk_weights: Tensor, topk_ids: Tensor, num_experts: int) -> Tensor:
    """Dense fp32 ``[T, E]`` matrix with each token's routing weight in its chosen experts' columns."""
    dense = torch.zeros(topk_ids.shape[0], num_experts, dtype=torch.float32, device=topk_ids.device)
    return dense.scatter_add_(1, topk_ids.long(), topk_weights.float())


def fused_moe_reference(hidden: Tensor, w13: Tensor, w2: Tensor, topk_weights: Tensor, topk_ids: Tensor) -> Tensor:
    """``out[t] = sum_k w[t,k] * W2_e (silu(G_e x) * (U_e x))`` with ``G_e, U_e`` = rows [:I], [I:] of w13[e].

    Every expert runs on every token in fp32 (E times the routed FLOPs), then a dense routing
    matrix picks and weighs the results; returns the hidden dtype.
    """
    inter = w2.shape[-1]
    x = hidden.float()
    route = routing_matrix(topk_weights, topk_ids, w13.shape[0])
    out = torch.zeros_like(x)
    for e in range(w13.shape[0]):
        gate_up = x @ w13[e].float().t()
        act = F.silu(gate_up[:, :inter]) * gate_up[:, inter:]
        out += (act @ w2[e].float().t()) * route[:, e : e + 1]
    return out.to(hidden.dtype)
