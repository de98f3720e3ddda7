"""A tiny random MoE Model directory (weights + byte-level BPE tokenizer + manifest) for serving tests.

Why one helper: the server, the CLI, the serve and benchmark stages and the throughput bench all
need "a Model directory like train_moe_lm writes", and building one by training takes minutes.
"""

from __future__ import annotations

from pathlib import Path

import torch

from raypress.models.moe_config import MoEConfig


def random_expert_weights(num_experts: int, hidden: int, inter: int, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """``(w13, w2)`` in the ``(E, N, K)`` layout, scaled like a trained layer's (fp32)."""
    gen = torch.Generator().manual_seed(seed)
    w13 = torch.randn(num_experts, 2 * inter, hidden, generator=gen) / hidden**0.5
    w2 = torch.randn(num_experts, hidden, inter, generator=gen) / inter**0.5
    return w13, w2


def moe_definition(hidden, w13, w2, topk_weights, topk_ids) -> torch.Tensor:
    """The routed SwiGLU MoE by its definition, one (token, slot) at a time in fp64: checks the
    references and the CPU kernels alike."""
    inter = w2.shape[2]
    out = torch.zeros(hidden.shape, dtype=torch.float64)
    for t in range(hidden.shape[0]):
        for slot in range(topk_ids.shape[1]):
            e = int(topk_ids[t, slot])
            gate = w13[e, :inter].double() @ hidden[t].double()
            up = w13[e, inter:].double() @ hidden[t].double()
            out[t] += float(topk_weights[t, slot]) * (w2[e].double() @ (torch.nn.functional.silu(gate) * up))
    return out

TINY_TEXTS = [
    "The quick brown fox jumps over the lazy dog. ",
    "Continuous batching admits new requests between decode steps. ",
    "Mixture-of-experts layers route each token to two of four experts. ",
    "question: 2 + 2 = answer: 4. question: 3 + 4 = answer: 7. ",
] * 25


def tiny_config(vocab_size: int, eos_token_id: int | None, **overrides: object) -> MoEConfig:
    """Two layers, four experts, top-2, GQA: small enough for CPU tests, shaped like Mixtral."""
    values: dict[str, object] = dict(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_local_experts=4,
        num_experts_per_tok=2,
        rope_theta=10000.0,
        initializer_range=0.1,  # sharper logits than 0.02: greedy choices are not near-ties
        max_position_embeddings=256,
        eos_token_id=eos_token_id,
    )
    values.update(overrides)
    return MoEConfig(**values)  # type: ignore[arg-type]


def save_tiny_model_dir(path: str | Path, seed: int = 1, vocab_size: int = 320, **overrides: object) -> Path:
    """Write a random-weight model + a tokenizer trained on ``TINY_TEXTS`` + ``raypress_model.json``."""
    from raypress.artifacts import ModelArtifact
    from raypress.models.bpe_tokenizer import train_bpe_tokenizer
    from raypress.models.moe import MoEForCausalLM
    from raypress.models.moe_checkpoint import save_moe

    path = Path(path)
    tokenizer = train_bpe_tokenizer(TINY_TEXTS, vocab_size=vocab_size)
    config = tiny_config(tokenizer.vocab_size, tokenizer.eos_token_id, **overrides)
    torch.manual_seed(seed)
    save_moe(MoEForCausalLM(config).eval(), path)
    tokenizer.save(path)
    ModelArtifact(str(path), config={"kind": "moe_lm", "architecture": config.architecture,
                                     "model": config.to_dict()}).save_manifest()
    return path
