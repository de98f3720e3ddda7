"""A decoder-only mixture-of-experts transformer in one file (Mixtral semantics, Qwen2-MoE options).

Layer = RMSNorm -> grouped-query attention with RoPE -> residual -> RMSNorm -> MoE block -> residual.
The MoE block routes each token to its top-k experts (softmax over all experts, top-k, optionally
renormalised), runs SwiGLU experts and adds an optional shared expert scaled by a sigmoid gate.
Numerics follow Hugging Face's Mixtral / Qwen2-MoE so their checkpoints give the same logits
(see ``moe_checkpoint.py``).

Expert weights live stacked, the layout the fused kernels read (vLLM ``fused_moe``):
``w13: (E, 2*I, H)`` (gate rows then up rows) and ``w2: (E, H, I)``. Which function runs the
experts is a hook (``MoEBlock.expert_fn``): by default ``raypress.kernels.moe.fused_moe`` (and its
``topk_softmax`` for routing) when that module imports (Triton on CUDA, torch on CPU), else
``sorted_moe`` / ``route`` below. With autograd on (training) the block always uses ``route`` and
``sorted_moe``, which are differentiable; the kernels are not.

Inference: ``model(input_ids (B, T), positions, kv_cache, slots=, input_lengths=) -> logits`` with
right padding; ``model.last_expert_counts`` holds, per layer, how many (token, slot) pairs each
expert received in the last forward (padding excluded), which MoE-CAP turns into distinct experts.
Training: ``model(input_ids, labels=labels) -> loss`` = next-token cross-entropy +
``router_aux_loss_coef`` * load-balancing loss (Switch / HF ``load_balancing_loss_func``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# ``route``: softmax over all experts (fp32), keep the top-k, Mixtral renormalises them; the kernels'
# torch reference is the one definition (differentiable, so training uses it too)
from raypress.kernels.moe_reference import topk_softmax_reference as route
from raypress.models.kv_cache import KVCache
from raypress.models.moe_config import MoEConfig

# (router_logits (T, E), k, renormalize) -> (weights fp32 (T, k), ids (T, k))
RouteFn = Callable[[Tensor, int, bool], tuple[Tensor, Tensor]]
# (hidden (T, H), w13 (E, 2I, H), w2 (E, H, I), topk_weights (T, k), topk_ids (T, k)) -> (T, H)
ExpertFn = Callable[[Tensor, Tensor, Tensor, Tensor, Tensor], Tensor]

IGNORE_INDEX = -100  # label value that does not count in the loss (HF convention)


def sorted_moe(hidden: Tensor, w13: Tensor, w2: Tensor, topk_weights: Tensor, topk_ids: Tensor) -> Tensor:
    """Run the routed SwiGLU experts: sort (token, slot) pairs by expert, one GEMM pair per expert run.

    Same signature as ``raypress.kernels.moe.fused_moe``. Why not HF's per-expert loop: that builds
    a one-hot mask and calls ``torch.where`` per expert; here one argsort groups the pairs, so each
    expert reads one contiguous slice, and one ``index_add_`` scatters the weighted results back.
    Differentiable (used for training).
    """
    num_tokens, hidden_size = hidden.shape
    if num_tokens == 0:
        return hidden.new_zeros(0, hidden_size)
    top_k = topk_ids.shape[1]
    inter = w2.shape[2]
    flat_ids = topk_ids.reshape(-1)
    order = torch.argsort(flat_ids, stable=True)
    token_of_pair = order // top_k
    counts = torch.bincount(flat_ids, minlength=w13.shape[0]).tolist()
    x = hidden.index_select(0, token_of_pair)
    pieces = []
    start = 0
    for expert, count in enumerate(counts):
        if count == 0:
            continue
        gate_up = x[start : start + count] @ w13[expert].t()
        pieces.append((F.silu(gate_up[:, :inter]) * gate_up[:, inter:]) @ w2[expert].t())
        start += count
    out = torch.cat(pieces).float() * topk_weights.reshape(-1)[order, None].float()  # combine in fp32
    result = torch.zeros(num_tokens, hidden_size, dtype=torch.float32, device=hidden.device)
    return result.index_add_(0, token_of_pair, out).to(hidden.dtype)


@functools.cache
def _inference_kernels() -> tuple[RouteFn, ExpertFn]:
    """``raypress.kernels.moe``'s ``topk_softmax`` and ``fused_moe`` when they import, else ours."""
    try:
        from raypress.kernels.moe import fused_moe, topk_softmax
    except ImportError:
        return route, sorted_moe
    return topk_softmax, fused_moe


def default_expert_fn() -> ExpertFn:
    """The expert function inference uses unless a block's ``expert_fn`` is set."""
    return _inference_kernels()[1]


def load_balancing_loss(router_logits: list[Tensor], num_experts: int, top_k: int) -> Tensor:
    """Switch-Transformer auxiliary loss over all layers' router logits, as HF Mixtral computes it.

    E * sum_e (fraction of top-k assignments to e) * (mean router probability of e), with both
    fractions taken over every layer's tokens together. Gradients flow through the probabilities.
    """
    logits = torch.cat(router_logits).float()
    probs = torch.softmax(logits, dim=-1)
    _, selected = torch.topk(probs, top_k, dim=-1)
    assigned = F.one_hot(selected, num_experts).float().sum(dim=1)  # (N, E): top-k hits per token
    tokens_per_expert = assigned.mean(dim=0)
    prob_per_expert = probs.mean(dim=0)
    return num_experts * torch.sum(tokens_per_expert * prob_per_expert)


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        x32 = x.float()
        x32 = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x32.to(x.dtype)


def rope_cos_sin(positions: Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """cos/sin ``(B, T, head_dim)`` for integer positions; HF's layout (frequencies repeated twice)."""
    exponents = torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float) / head_dim
    inv_freq = 1.0 / theta**exponents
    freqs = positions[..., None].float() * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate ``x (B, T, heads, D)`` by position (rotate_half convention: pairs i and i + D/2)."""
    cos, sin = cos[:, :, None, :], sin[:, :, None, :]
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    """Grouped-query attention; q, k and v come from one fused projection."""

    def __init__(self, config: MoEConfig, layer: int) -> None:
        super().__init__()
        self.layer = layer
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.dim_per_head
        qkv_out = (self.num_heads + 2 * self.num_kv_heads) * self.head_dim
        self.qkv_proj = nn.Linear(config.hidden_size, qkv_out, bias=config.attention_bias)
        self.o_proj = nn.Linear(self.num_heads * self.head_dim, config.hidden_size, bias=False)

    def forward(
        self, x: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None, cache: "_CacheStep | None"
    ) -> Tensor:
        return self.o_proj(self.attend(self.qkv_proj(x), cos, sin, mask, cache))

    def forward_packed(self, x: Tensor, plans: "list[_BlockPlan]") -> Tensor:
        """``x (N, H)``: the real tokens of several blocks, one after another. The projections run
        once over all of them; attention runs per block, over its own padded ``(B, T)`` layout."""
        outs = []
        for part, plan in zip(self.qkv_proj(x).split(plan_sizes(plans)), plans):
            batch, length = plan.shape
            if plan.valid_rows is not None:
                part = part.new_zeros(batch * length, part.shape[1]).index_copy_(0, plan.valid_rows, part)
            out = self.attend(part.view(batch, length, -1), plan.cos, plan.sin, plan.mask, plan.cache)
            out = out.reshape(batch * length, -1)
            outs.append(out if plan.valid_rows is None else out.index_select(0, plan.valid_rows))
        return self.o_proj(torch.cat(outs))

    def attend(
        self, qkv: Tensor, cos: Tensor, sin: Tensor, mask: Tensor | None, cache: "_CacheStep | None"
    ) -> Tensor:
        """``qkv (B, T, q + 2 kv)`` -> the heads' outputs ``(B, T, q)`` (before ``o_proj``)."""
        batch, length, _ = qkv.shape
        q_size, kv_size = self.num_heads * self.head_dim, self.num_kv_heads * self.head_dim
        q, k, v = qkv.split([q_size, kv_size, kv_size], dim=-1)
        q = apply_rope(q.view(batch, length, self.num_heads, self.head_dim), cos, sin)
        k = apply_rope(k.view(batch, length, self.num_kv_heads, self.head_dim), cos, sin)
        v = v.view(batch, length, self.num_kv_heads, self.head_dim)
        q = q.transpose(1, 2)  # heads before positions, as SDPA and the cache hold them
        if cache is None:
            k, v = k.transpose(1, 2), v.transpose(1, 2)
        else:
            cache.cache.write(self.layer, cache.slots, cache.positions, k, v, cache.valid)
            if cache.span is None:
                k, v = cache.cache.read(self.layer, cache.slots, cache.kv_len)
            else:  # a view of the slots' range: no copy of the cached keys and values
                k, v = cache.cache.read_span(self.layer, *cache.span, cache.kv_len)
                if cache.rows is not None:  # queries into their slots' places; the other places idle
                    q = q.new_zeros((cache.span[1] - cache.span[0], *q.shape[1:])).index_copy_(0, cache.rows, q)
            k, v = k.to(q.dtype), v.to(q.dtype)
        if length == 1 and mask is not None and q.device.type == "cpu":
            out = decode_attention(q, k, v, mask)
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=mask is None, enable_gqa=self.num_kv_heads != self.num_heads
            )
        if cache is not None and cache.rows is not None:
            out = out.index_select(0, cache.rows)
        return out.transpose(1, 2).reshape(batch, length, q_size)


def decode_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor) -> Tensor:
    """Attention of one query per row over its cached keys: ``q (B, H, 1, D)``, ``k``/``v
    (B, KV, S, D)``, ``mask (B, 1, 1, S)`` (True: visible) -> ``(B, H, 1, D)``, as SDPA computes it.

    Why not SDPA on CPU: its flash kernel tiles for long queries; with one query per row it ran
    ~1.7x slower than two batched matmuls over the query heads that share a KV head (grouped-query
    attention without repeating the keys), at decode batch 32 on the 2-core CI machine.
    """
    batch, heads, _, dim = q.shape
    kv_heads = k.shape[1]
    grouped = q.reshape(batch, kv_heads, heads // kv_heads, dim)
    scores = torch.matmul(grouped, k.transpose(-1, -2)).float() * dim**-0.5
    scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1).to(v.dtype)
    return torch.matmul(probs, v).reshape(batch, heads, 1, dim)


class SwiGLU(nn.Module):
    """A dense SwiGLU MLP (the shared expert), gate and up fused in one projection."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.intermediate_size = intermediate_size
        self.gate_up = nn.Linear(hidden_size, 2 * intermediate_size, bias=False)
        self.down = nn.Linear(intermediate_size, hidden_size, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        gate, up = self.gate_up(x).split(self.intermediate_size, dim=-1)
        return self.down(F.silu(gate) * up)


class MoEBlock(nn.Module):
    """Top-k routed SwiGLU experts plus an optional (gated) shared expert, on flat tokens ``(N, H)``."""

    def __init__(self, config: MoEConfig) -> None:
        super().__init__()
        experts, hidden, inter = config.num_local_experts, config.hidden_size, config.intermediate_size
        self.num_experts = experts
        self.top_k = config.num_experts_per_tok
        self.norm_topk_prob = config.norm_topk_prob
        self.router = nn.Linear(hidden, experts, bias=False)
        self.w13 = nn.Parameter(torch.empty(experts, 2 * inter, hidden))
        self.w2 = nn.Parameter(torch.empty(experts, hidden, inter))
        shared = config.shared_expert_intermediate_size
        self.shared_expert = SwiGLU(hidden, shared) if shared > 0 else None
        gated = shared > 0 and config.shared_expert_gate
        self.shared_expert_gate = nn.Linear(hidden, 1, bias=False) if gated else None
        self.expert_fn: ExpertFn | None = None  # None: default_expert_fn(); set to swap kernels

    def forward(self, x: Tensor, splits: list[int] | None = None) -> tuple[Tensor, Tensor, Tensor]:
        """Returns (output (N, H), router logits (N, E), tokens per expert (E,)); with ``splits``
        (tokens per block of a packed forward) the counts are per block, ``(blocks, E)``."""
        router_logits = self.router(x)
        trainable = self.w13.requires_grad or self.router.weight.requires_grad or x.requires_grad
        if torch.is_grad_enabled() and trainable:
            route_fn, expert_fn = route, sorted_moe  # differentiable torch paths
        else:
            route_fn, kernel = _inference_kernels()
            expert_fn = self.expert_fn or kernel
        weights, ids = route_fn(router_logits, self.top_k, self.norm_topk_prob)
        out = expert_fn(x, self.w13, self.w2, weights, ids)
        if self.shared_expert is not None:
            shared = self.shared_expert(x)
            if self.shared_expert_gate is not None:
                shared = torch.sigmoid(self.shared_expert_gate(x)) * shared
            out = out + shared
        if splits is None:
            counts = torch.bincount(ids.reshape(-1), minlength=self.num_experts)
        else:
            counts = torch.stack([torch.bincount(part.reshape(-1), minlength=self.num_experts)
                                  for part in ids.split(splits)])
        return out, router_logits, counts


class DecoderLayer(nn.Module):
    def __init__(self, config: MoEConfig, layer: int) -> None:
        super().__init__()
        self.input_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.attn = Attention(config, layer)
        self.post_attn_norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.moe = MoEBlock(config)

    def forward(
        self,
        x: Tensor,
        cos: Tensor,
        sin: Tensor,
        mask: Tensor | None,
        cache: "_CacheStep | None",
        valid_rows: Tensor | None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        x = x + self.attn(self.input_norm(x), cos, sin, mask, cache)
        flat = self.post_attn_norm(x).reshape(-1, x.shape[-1])
        if valid_rows is None:
            moe_out, logits, counts = self.moe(flat)
        else:  # padding tokens skip the experts (and do not count as activations)
            picked, logits, counts = self.moe(flat.index_select(0, valid_rows))
            moe_out = torch.zeros_like(flat).index_copy(0, valid_rows, picked)
        return x + moe_out.view_as(x), logits, counts

    def forward_packed(self, x: Tensor, plans: "list[_BlockPlan]") -> tuple[Tensor, Tensor]:
        """``x (N, H)`` real tokens only -> (the same, expert counts per block ``(blocks, E)``)."""
        x = x + self.attn.forward_packed(self.input_norm(x), plans)
        moe_out, _, counts = self.moe(self.post_attn_norm(x), plan_sizes(plans))
        return x + moe_out, counts


@dataclass
class _CacheStep:
    """What one forward pass needs from the KV cache: which slots, at which positions, how far to read."""

    cache: KVCache
    slots: Tensor
    positions: Tensor
    valid: Tensor | None
    kv_len: int
    span: tuple[int, int] | None = None  # read the slots [lo, hi) as a view instead of gathering
    rows: Tensor | None = None  # each batch row's place in the span (None: the rows are the span)


def _slot_span(slots: Tensor, mask: Tensor) -> tuple[tuple[int, int] | None, Tensor | None, Tensor]:
    """``(span, rows, mask)``: attend over a view of the cache's slots ``[lo, hi)`` when the batch's
    slots lie in a range at most twice its size (gathering a decode batch's cached keys and values
    cost about half of its attention time); ``rows`` places each batch row in the span when the
    slots are not exactly the range, and the mask grows to the span (an idle place sees one key,
    so it computes no NaN; its output is dropped). Otherwise ``(None, None, mask)``: gather."""
    ids = slots.tolist()
    lo, hi = min(ids), max(ids) + 1
    if hi - lo > 2 * len(ids):
        return None, None, mask
    if ids == list(range(lo, hi)):
        return (lo, hi), None, mask
    rows = slots - lo
    spanned = mask.new_zeros((hi - lo, *mask.shape[1:]))
    spanned[..., 0] = True
    spanned[rows] = mask
    return (lo, hi), rows, spanned


@dataclass
class PackedBlock:
    """One group of a packed forward (``MoEForCausalLM.forward_packed``): right-padded
    ``input_ids (B, T)`` that extend the KV-cache ``slots (B,)``; ``input_lengths (B,)`` real
    tokens per row (None: all); logits come back at each row's last real token."""

    input_ids: Tensor
    slots: Tensor
    input_lengths: Tensor | None = None


@dataclass
class _BlockPlan:
    """What every layer needs to attend within one block of a packed forward."""

    shape: tuple[int, int]
    num_tokens: int
    valid_rows: Tensor | None  # the real tokens' places in the block's B*T (None: all are real)
    cos: Tensor
    sin: Tensor
    mask: Tensor
    cache: _CacheStep
    new_lengths: Tensor
    last_rows: Tensor  # each row's last real token, as an index into the block's real tokens


def plan_sizes(plans: list[_BlockPlan]) -> list[int]:
    return [plan.num_tokens for plan in plans]


class MoEForCausalLM(nn.Module):
    """The MoE language model: embeddings, decoder layers, final norm, LM head (optionally tied)."""

    def __init__(self, config: MoEConfig) -> None:
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config, i) for i in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        tied = config.tie_word_embeddings
        self.lm_head = None if tied else nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.last_expert_counts: list[Tensor] = []
        self.last_block_expert_counts: list[list[Tensor]] = []
        self.last_aux_loss: Tensor | None = None
        self.last_lm_loss: Tensor | None = None
        if not any(p.is_meta for p in self.parameters()):
            self.reset_parameters()

    def reset_parameters(self) -> None:
        """Random init for training from scratch: N(0, initializer_range), norms 1, biases 0."""
        std = self.config.initializer_range
        for name, param in self.named_parameters():
            if name.endswith("norm.weight"):
                nn.init.ones_(param)
            elif name.endswith(".bias"):
                nn.init.zeros_(param)
            else:
                nn.init.normal_(param, mean=0.0, std=std)

    def set_expert_fn(self, fn: ExpertFn | None) -> None:
        """Choose the routed-expert implementation for inference in every layer (None: default)."""
        for layer in self.layers:
            layer.moe.expert_fn = fn

    def forward(
        self,
        input_ids: Tensor,
        positions: Tensor | None = None,
        kv_cache: KVCache | None = None,
        labels: Tensor | None = None,
        *,
        slots: Tensor | None = None,
        input_lengths: Tensor | None = None,
        attention_mask: Tensor | None = None,
        logits_at: Tensor | None = None,
    ) -> Tensor:
        """Logits ``(B, T, vocab)``, or the training loss (a scalar) when ``labels`` are given.

        input_ids: ``(B, T)``, right-padded; ``input_lengths (B,)`` (or ``attention_mask (B, T)``,
        1 = real token) says which tokens are real; padding gets garbage logits and no compute in
        the experts. positions: ``(B, T)``; default: continue each slot's cached length, or 0..T-1
        without a cache. kv_cache + slots ``(B,)`` (default ``0..B-1``): append this step's keys and
        values to those slots and attend over everything cached; lengths advance by the real tokens.
        labels: ``(B, T)`` aligned with input_ids (shifted inside, -100 ignored), as in HF.
        logits_at: ``(B,)`` one position per row: return only those logits, ``(B, vocab)`` (a
        prefill needs each prompt's last; the LM head over every position would cost T times more).
        """
        batch, length = input_ids.shape
        device = input_ids.device
        valid = self._valid_mask(batch, length, device, input_lengths, attention_mask)
        steps = torch.arange(length, device=device)
        cache_step = None
        if kv_cache is not None:
            slots = torch.arange(batch, device=device) if slots is None else slots.to(device)
            positions, cache_step, mask, new_lengths = self._cache_step(kv_cache, slots, positions, valid, length)
        else:
            if positions is None:
                positions = steps.expand(batch, length)
            mask = self._no_cache_mask(valid, steps)

        hidden = self.embed_tokens(input_ids)
        cos, sin = rope_cos_sin(positions, self.config.dim_per_head, self.config.rope_theta, hidden.dtype)
        valid_rows = None if valid is None else valid.reshape(-1).nonzero().squeeze(1)
        router_logits, counts = [], []
        for layer in self.layers:
            hidden, layer_logits, layer_counts = layer(hidden, cos, sin, mask, cache_step, valid_rows)
            router_logits.append(layer_logits)
            counts.append(layer_counts)
        if kv_cache is not None:
            kv_cache.lengths[slots] = new_lengths
        self.last_expert_counts = counts

        if logits_at is not None and labels is None:
            hidden = hidden[torch.arange(batch, device=device), logits_at.to(device)]
        hidden = self.norm(hidden)
        weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(hidden, weight)
        if labels is None:
            return logits
        return self._loss(logits, labels, router_logits)

    def forward_packed(self, blocks: list[PackedBlock], kv_cache: KVCache) -> list[Tensor]:
        """One forward over several blocks of rows (a decode batch and new prompts): per block,
        the logits ``(B, vocab)`` at each row's last real token. Inference only.

        Why: a prefill forward of its own reads every expert's weights again and pays the whole
        per-forward overhead for a few prompts. Here the norms, projections, experts and LM head
        run once over the real tokens of all blocks (no padding), and only attention runs per block
        (each over its own padded layout, a decode block with one query per row).
        ``last_expert_counts`` sums the blocks; ``last_block_expert_counts[b]`` is block b's, per layer.
        """
        if not blocks:
            raise ValueError("forward_packed needs at least one block")
        device = kv_cache.lengths.device
        plans, hidden = [], []
        for block in blocks:
            batch, length = block.input_ids.shape
            valid = self._valid_mask(batch, length, device, block.input_lengths, None)
            slots = block.slots.to(device)
            positions, cache_step, mask, new_lengths = self._cache_step(kv_cache, slots, None, valid, length)
            embedded = self.embed_tokens(block.input_ids.to(device))
            cos, sin = rope_cos_sin(positions, self.config.dim_per_head, self.config.rope_theta, embedded.dtype)
            flat = embedded.reshape(batch * length, -1)
            if valid is None:
                valid_rows, last_rows = None, torch.arange(batch, device=device) * length + length - 1
            else:
                valid_rows = valid.reshape(-1).nonzero().squeeze(1)
                flat = flat.index_select(0, valid_rows)
                last_rows = valid.sum(dim=1).cumsum(0) - 1
            plans.append(_BlockPlan((batch, length), flat.shape[0], valid_rows, cos, sin, mask, cache_step,
                                    new_lengths, last_rows))
            hidden.append(flat)
        x = torch.cat(hidden)
        counts = []
        for layer in self.layers:
            x, layer_counts = layer.forward_packed(x, plans)
            counts.append(layer_counts)
        for plan in plans:
            kv_cache.lengths[plan.cache.slots] = plan.new_lengths
        self.last_expert_counts = [c.sum(dim=0) for c in counts]
        self.last_block_expert_counts = [[c[b] for c in counts] for b in range(len(plans))]
        offsets = torch.tensor([0, *plan_sizes(plans)[:-1]], device=device).cumsum(0)
        picked = x.index_select(0, torch.cat([plan.last_rows + offset for plan, offset in zip(plans, offsets)]))
        weight = self.embed_tokens.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(self.norm(picked), weight)
        return list(logits.split([plan.shape[0] for plan in plans]))

    def _cache_step(
        self, kv_cache: KVCache, slots: Tensor, positions: Tensor | None, valid: Tensor | None, length: int
    ) -> tuple[Tensor, _CacheStep, Tensor, Tensor]:
        """(positions, the cache step, the attention mask, the slots' lengths after it) for rows
        extending ``slots``: positions default to continuing each slot's cached length."""
        device = slots.device
        start = kv_cache.lengths[slots]
        if positions is None:
            positions = start[:, None] + torch.arange(length, device=device)
        last = positions if valid is None else positions.masked_fill(~valid, -1)
        new_lengths = torch.maximum(start, last.max(dim=1).values + 1)
        kv_len = int(new_lengths.max())
        if kv_len > kv_cache.max_len:
            raise ValueError(f"sequence of {kv_len} tokens exceeds the KV cache's max_len {kv_cache.max_len}")
        mask = self._position_mask(positions, torch.arange(kv_len, device=device))
        span, rows, mask = _slot_span(slots, mask)
        return positions, _CacheStep(kv_cache, slots, positions, valid, kv_len, span, rows), mask, new_lengths

    def _loss(self, logits: Tensor, labels: Tensor, router_logits: list[Tensor]) -> Tensor:
        lm_loss = F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(),
            labels[:, 1:].reshape(-1),
            ignore_index=IGNORE_INDEX,
        )
        config = self.config
        aux_loss = load_balancing_loss(router_logits, config.num_local_experts, config.num_experts_per_tok)
        self.last_lm_loss, self.last_aux_loss = lm_loss.detach(), aux_loss.detach()
        return lm_loss + config.router_aux_loss_coef * aux_loss

    @staticmethod
    def _valid_mask(
        batch: int, length: int, device: torch.device, input_lengths: Tensor | None, attention_mask: Tensor | None
    ) -> Tensor | None:
        if input_lengths is not None:
            valid = torch.arange(length, device=device) < input_lengths.to(device)[:, None]
        elif attention_mask is not None:
            valid = attention_mask.to(device).bool()
        else:
            return None
        return None if bool(valid.all()) else valid

    def _position_mask(self, query_pos: Tensor, key_pos: Tensor) -> Tensor:
        """Boolean ``(B, 1, T, S)``: key j is visible from position p iff j <= p (and within the window)."""
        allowed = key_pos[None, None, :] <= query_pos[:, :, None]
        if self.config.sliding_window is not None:
            allowed &= key_pos[None, None, :] > query_pos[:, :, None] - self.config.sliding_window
        return allowed[:, None]

    def _no_cache_mask(self, valid: Tensor | None, steps: Tensor) -> Tensor | None:
        """Causal over token order, minus padded keys; None lets SDPA use its causal fast path."""
        if valid is None and self.config.sliding_window is None:
            return None
        allowed = self._position_mask(steps[None, :], steps)
        if valid is not None:
            diagonal = torch.eye(len(steps), dtype=torch.bool, device=steps.device)
            allowed = allowed & valid[:, None, None, :] | diagonal  # a padded query sees itself: no NaN
        return allowed

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
