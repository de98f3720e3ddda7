"""``train_moe_lm``: the MoE language-model trainer (``operators/shared/moe_lm_trainer.py``, whose Ray Train loop is
``training/moe_lm.py``) as an op."""

from __future__ import annotations

from raypress.operators.registry import register
from raypress.operators.shared.moe_lm_trainer import MoELMTrainer


@register("train_moe_lm", requires={"torch": "moe", "safetensors": "moe", "tokenizers": "moe"})
class TrainMoELM(MoELMTrainer):
    """Train a mixture-of-experts language model (and its BPE tokenizer) on a text Dataset with Ray Train -> Model.

    The model is saved in the Hugging Face Mixtral layout (Qwen2-MoE with a shared expert)."""
