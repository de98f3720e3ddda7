"""The MoE transformer's shape, shared by the model, its kernels' callers, serving and MoE-CAP.

Field names follow Hugging Face's Mixtral config where one exists, so a ``config.json`` of a
Mixtral or Qwen2-MoE checkpoint maps onto it with few renames (see ``moe_checkpoint.from_hf_dict``), and the
MoE-CAP arithmetic (bytes and FLOPs per forward pass) can be computed from the config alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True)
class MoEConfig:
    vocab_size: int = 32000
    hidden_size: int = 4096
    intermediate_size: int = 14336  # each routed expert's FFN width
    num_hidden_layers: int = 32
    num_attention_heads: int = 32
    num_key_value_heads: int = 8
    head_dim: int | None = None  # None: hidden_size // num_attention_heads
    num_local_experts: int = 8
    num_experts_per_tok: int = 2  # top-k
    norm_topk_prob: bool = True  # Mixtral: renormalise the top-k softmax weights to sum to 1
    shared_expert_intermediate_size: int = 0  # 0: no shared expert (Mixtral); Qwen2-MoE: > 0
    shared_expert_gate: bool = False  # Qwen2-MoE scales the shared expert by sigmoid(gate(x))
    rope_theta: float = 1_000_000.0
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 32768
    tie_word_embeddings: bool = False
    router_aux_loss_coef: float = 0.02
    architecture: str = "mixtral"  # "mixtral" | "qwen2_moe": the checkpoint layout to save/load
    attention_bias: bool = False  # biases on q/k/v projections (Qwen2-MoE: True)
    sliding_window: int | None = None  # None: full causal attention; n: each query sees its last n keys
    initializer_range: float = 0.02  # std of the normal init for a model trained from scratch
    bos_token_id: int | None = None
    eos_token_id: int | None = None

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> "MoEConfig":
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise ValueError(f"unknown MoEConfig fields {sorted(unknown)}")
        return cls(**values)
