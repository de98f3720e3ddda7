"""MoE-CAP arithmetic: bytes and FLOPs of one MoE forward pass, S-MBU / S-MFU, and serving cost.

Why sparsity-aware: a dense-model MBU charges every expert's weights to every pass, which makes
an MoE look bandwidth-starved when it is not.  MoE-CAP (Jiang et al., "MoE-CAP: Benchmarking
Cost, Accuracy and Performance of Sparse Mixture-of-Experts Systems", arXiv:2412.07067 v6 /
arXiv:2505.11415) charges only the experts a pass actually touches: S-MBU = bytes read /
latency / (devices × peak bandwidth) and S-MFU = FLOPs / latency / (devices × peak FLOP/s),
reported separately for prefill and decode.  The reference code (github.com/Auto-CAP/MoE-CAP,
``moe_cap/utils/basic_utils.py``: ``_calculate_attention_size``, ``_calculate_expert_config``,
``_calculate_default_prefill/_decoding``; ``qwen_utils.py`` for shared experts;
``cost_utils.py`` for cost) counts per layer the attention weights (q, k, v, o with GQA),
``activated experts × 3·H·I`` and the shared expert, plus the KV cache read.

What we do the same: those terms, with the number of **distinct experts activated by the whole
batch** in each layer (one count per layer, not an average over layers).
What we do differently, and why:
- Bytes also count the router, RMSNorm weights, the embedding rows gathered, the LM head and
  final norm (read in full whenever any logits are computed), and the **KV written** by the pass
  (new tokens' K and V) — it is HBM traffic too.  ``ForwardCost`` keeps every term apart, so a
  caller who wants "bytes read" only can drop ``kv_write_bytes``.
- FLOPs per token are 2·(attention + router + top-k·expert + shared parameters) per layer (the
  reference's generic path multiplies one expert, not top-k), plus 2·H·V for each token whose
  logits are computed; RMSNorm, softmax, SiLU and RoPE element-wise work is left out (it is
  O(H) per token against O(H²)).
- Attention-score FLOPs are exact per sequence: a query at absolute position p attends to p + 1
  keys (causal), QKᵀ and AV each cost 2·n_heads·head_dim per (query, key) pair and layer.  A
  sequence with ``context`` cached tokens and ``n`` new ones has n·context + n(n+1)/2 pairs, so a
  batch's cost is the sum over its sequences, never (Σ lengths)².
- The denominator is the **dense** peak (see ``hardware.py``); the reference divides by half a
  sparse-tensor-core peak, the same number for bf16 on Hopper.

Attention biases: Qwen2-MoE has q/k/v biases, Mixtral none; ``config.attention_bias`` says which.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Sequence

import numpy as np

from raypress.operators.moe.cap.hardware import Hardware, dtype_key
from raypress.models.moe_config import MoEConfig

DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
SECONDS_PER_YEAR = 365 * 24 * 3600  # amortisation uses 365-day years


def bytes_per_element(dtype: object) -> int:
    """Bytes per element of ``dtype`` (any spelling ``hardware.dtype_key`` knows)."""
    return DTYPE_BYTES[dtype_key(dtype)]


@dataclass(frozen=True)
class SeqPass:
    """One sequence's share of a forward pass: ``new_tokens`` processed on top of ``context`` cached."""

    new_tokens: int
    context: int = 0


def prefill_batch(prompt_lengths: Iterable[int]) -> list[SeqPass]:
    """Prompts processed from scratch (no cached context)."""
    return [SeqPass(new_tokens=int(n), context=0) for n in prompt_lengths]


def decode_batch(context_lengths: Iterable[int]) -> list[SeqPass]:
    """One new token per sequence on top of ``context`` tokens already in its KV cache."""
    return [SeqPass(new_tokens=1, context=int(c)) for c in context_lengths]


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts by role; per-layer numbers are for one decoder layer."""

    layers: int
    attention: int  # q, k, v, o projections (+ q/k/v biases for Qwen2-MoE)
    router: int  # H × E gate
    expert: int  # one routed SwiGLU expert: gate, up, down = 3·H·I
    num_experts: int
    top_k: int
    shared: int  # shared expert 3·H·I_s (+ its H × 1 sigmoid gate); 0 without one
    norms: int  # input and post-attention RMSNorm weights, 2·H
    embedding: int  # V × H
    lm_head: int  # V × H (the embedding matrix itself when tied)
    final_norm: int  # H
    tied: bool

    @property
    def dense_per_layer(self) -> int:
        """Weights every token of a layer touches: everything but the routed experts."""
        return self.attention + self.router + self.shared + self.norms

    @property
    def total(self) -> int:
        """Parameters stored (a tied LM head counted once); equals ``sum(p.numel())`` of the model."""
        per_layer = self.dense_per_layer + self.num_experts * self.expert
        head = 0 if self.tied else self.lm_head
        return self.layers * per_layer + self.embedding + head + self.final_norm


def param_counts(config: MoEConfig) -> ParamCounts:
    """Count parameters by role from the config alone (no model needed)."""
    h, d = config.hidden_size, config.dim_per_head
    q_dim, kv_dim = config.num_attention_heads * d, config.num_key_value_heads * d
    attention = h * q_dim + 2 * h * kv_dim + q_dim * h
    if config.attention_bias:
        attention += q_dim + 2 * kv_dim
    shared = 0
    if config.shared_expert_intermediate_size > 0:
        shared = 3 * h * config.shared_expert_intermediate_size + (h if config.shared_expert_gate else 0)
    return ParamCounts(
        layers=config.num_hidden_layers,
        attention=attention,
        router=h * config.num_local_experts,
        expert=3 * h * config.intermediate_size,
        num_experts=config.num_local_experts,
        top_k=config.num_experts_per_tok,
        shared=shared,
        norms=2 * h,
        embedding=config.vocab_size * h,
        lm_head=config.vocab_size * h,
        final_norm=h,
        tied=config.tie_word_embeddings,
    )


def kv_bytes_per_token(config: MoEConfig, kv_dtype_bytes: int) -> int:
    """K and V of one token across all layers."""
    return config.num_hidden_layers * 2 * config.num_key_value_heads * config.dim_per_head * kv_dtype_bytes


def attention_pairs(seq: SeqPass) -> int:
    """Causal (query, key) pairs of one sequence's pass: Σ_{i=1..n} (context + i)."""
    n = seq.new_tokens
    return n * seq.context + n * (n + 1) // 2


def distinct_experts(counts_per_layer: Iterable[Sequence[int]]) -> list[int]:
    """From per-layer, per-expert token counts (lists, arrays or tensors) to distinct experts per layer."""
    return [int((np.asarray(row) > 0).sum()) for row in counts_per_layer]


@dataclass(frozen=True)
class ForwardCost:
    """Every byte and FLOP term of one forward pass, kept apart so callers can see what dominates."""

    weight_bytes: int  # dense-per-layer weights + distinct experts + LM head and final norm
    expert_bytes: int  # the distinct routed experts' share of weight_bytes
    embedding_bytes: int  # embedding rows gathered, one per new token
    kv_read_bytes: int  # cached K, V of every sequence's context
    kv_write_bytes: int  # K, V of the new tokens
    linear_flops: int  # 2·params per token through the layers, plus the LM head rows
    attention_flops: int  # QKᵀ and AV, per sequence, causal
    tokens: int  # new tokens in the pass

    @property
    def bytes(self) -> int:
        """Memory traffic charged to S-MBU (KV written included; subtract ``kv_write_bytes`` to exclude)."""
        return self.weight_bytes + self.embedding_bytes + self.kv_read_bytes + self.kv_write_bytes

    @property
    def flops(self) -> int:
        return self.linear_flops + self.attention_flops


def _check(config: MoEConfig, batch: Sequence[SeqPass], distinct: Sequence[int]) -> int:
    if not batch:
        raise ValueError("a forward pass needs at least one sequence")
    for seq in batch:
        if seq.new_tokens < 1 or seq.context < 0:
            raise ValueError(f"bad sequence {seq}: new_tokens >= 1 and context >= 0 required")
    tokens = sum(seq.new_tokens for seq in batch)
    if len(distinct) != config.num_hidden_layers:
        raise ValueError(f"{len(distinct)} distinct-expert counts for {config.num_hidden_layers} layers")
    e, k = config.num_local_experts, config.num_experts_per_tok
    low, high = min(k, e), min(e, tokens * k)
    for layer, d in enumerate(distinct):
        if not low <= d <= high:
            raise ValueError(f"layer {layer}: {d} distinct experts impossible for {tokens} tokens, top-{k} of {e}")
    return tokens


def cost_breakdown(
    config: MoEConfig,
    batch: Sequence[SeqPass],
    distinct_experts_per_layer: Sequence[int],
    dtype_bytes: int,
    kv_dtype_bytes: int,
    logits: Literal["last", "all"] = "last",
) -> ForwardCost:
    """Bytes and FLOPs of one forward pass over ``batch``.

    ``distinct_experts_per_layer[l]`` is how many different experts layer l ran for the whole batch
    (see ``distinct_experts``).  ``logits="last"``: one LM-head row per sequence (what a sampler
    needs, also in prefill); ``"all"``: one per new token (training-style scoring).
    """
    tokens = _check(config, batch, distinct_experts_per_layer)
    p = param_counts(config)
    logit_rows = len(batch) if logits == "last" else tokens
    head = p.lm_head + p.final_norm
    expert_params = p.expert * sum(distinct_experts_per_layer)
    weight_params = p.layers * p.dense_per_layer + expert_params + head
    kv_token = kv_bytes_per_token(config, kv_dtype_bytes)
    per_token = p.layers * (p.attention + p.router + p.shared + p.top_k * p.expert)  # matmul weights only
    per_pair = 2 * 2 * config.num_attention_heads * config.dim_per_head * p.layers
    return ForwardCost(
        weight_bytes=weight_params * dtype_bytes,
        expert_bytes=expert_params * dtype_bytes,
        embedding_bytes=tokens * config.hidden_size * dtype_bytes,
        kv_read_bytes=sum(seq.context for seq in batch) * kv_token,
        kv_write_bytes=tokens * kv_token,
        linear_flops=2 * per_token * tokens + 2 * p.lm_head * logit_rows,
        attention_flops=per_pair * sum(attention_pairs(seq) for seq in batch),
        tokens=tokens,
    )


def forward_cost(
    config: MoEConfig,
    batch: Sequence[SeqPass],
    distinct_experts_per_layer: Sequence[int],
    dtype_bytes: int,
    kv_dtype_bytes: int,
    logits: Literal["last", "all"] = "last",
) -> tuple[int, int]:
    """``(bytes, flops)`` of one forward pass; see ``cost_breakdown`` for the terms."""
    cost = cost_breakdown(config, batch, distinct_experts_per_layer, dtype_bytes, kv_dtype_bytes, logits)
    return cost.bytes, cost.flops


def utilisation(
    bytes_: float,
    flops: float,
    latency_s: float,
    hardware: Hardware,
    n_devices: int = 1,
    dtype: object = "bf16",
) -> dict[str, float]:
    """S-MBU and S-MFU of one pass that took ``latency_s`` on ``n_devices`` of ``hardware``.

    ``dtype`` picks the dense peak FLOP/s (the compute dtype of the weights).  Not clipped at 1:
    a value above 1 means the byte/FLOP model or the peak is wrong, and should be seen.
    """
    if latency_s <= 0 or n_devices < 1:
        raise ValueError(f"latency_s must be > 0 and n_devices >= 1, got {latency_s}, {n_devices}")
    return {
        "s_mbu": bytes_ / latency_s / (n_devices * hardware.peak_bandwidth),
        "s_mfu": flops / latency_s / (n_devices * hardware.flops(dtype)),
    }


def cost_per_million_tokens(
    tokens_per_s: float,
    hardware: Hardware,
    n_devices: int = 1,
    amortisation_years: float = 3.0,
    utilisation: float = 1.0,
    usd_per_kwh: float = 0.15,
) -> float:
    """USD per million generated tokens: (capital amortised per busy second + energy per second) / tokens/s.

    Capital: ``n_devices × capital_usd`` spread over ``amortisation_years`` of 365 days, of which a
    fraction ``utilisation`` is spent serving (idle time still costs capital).  Energy:
    ``n_devices × power_w`` drawn while serving at ``usd_per_kwh`` (0.15 USD/kWh, MoE-CAP's
    ``ENERGY_COST``); idle power, host, cooling and networking are not included.
    """
    if tokens_per_s <= 0 or not 0 < utilisation <= 1:
        raise ValueError(f"tokens_per_s must be > 0 and 0 < utilisation <= 1, got {tokens_per_s}, {utilisation}")
    capital_per_s = n_devices * hardware.capital_usd / (amortisation_years * SECONDS_PER_YEAR * utilisation)
    energy_per_s = n_devices * hardware.power_w / 1000 * usd_per_kwh / 3600
    return (capital_per_s + energy_per_s) / tokens_per_s * 1e6
