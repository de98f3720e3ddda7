"""The MoE language-model trainer as a Stage: a text Dataset -> an MoE LM (HF format + tokenizer).

Shared because it is the ``train_moe_lm`` op (``operators/moe/train_moe_lm.py``) and also what the
reasoning stages train their policies with; it registers no op itself.  This module is the op side
(params, tokenizer, packing, the Model artifact); the Ray Train loop it runs is
``raypress.training.moe_lm`` (see there for the life cycle of a training node).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from raypress.artifacts import Artifact, ModelArtifact
from raypress.models.bpe_tokenizer import BPETokenizer, has_tokenizer, load_tokenizer, train_bpe_tokenizer
from raypress.models.moe_checkpoint import from_hf_dict
from raypress.models.moe_config import MoEConfig
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.schema import ArtifactType
from raypress.training.moe_lm import KIND, column_texts, pack_batch, train_loop, write_generation_config
from raypress.training.storage import fit_with_progress


class TrainMoELMParams(Params):
    text_key: str = Field("text", description="column holding the training text")
    prompt_key: str | None = Field(
        None, description="column holding a prompt for each text: the model reads prompt + text but "
        "is trained on the text's tokens only (supervised fine-tuning); None: every token is a target")
    init_from: str | None = Field(
        None, description="Model dir or HF Mixtral/Qwen2-MoE checkpoint dir to continue training "
        "(its config wins over the model-shape params below)")
    tokenizer: str | None = Field(
        None, description="dir with tokenizer.json (or the file); None: init_from's tokenizer, else "
        "train a byte-level BPE on the input text")
    vocab_size: int = Field(2048, ge=300, description="BPE vocabulary size when training a tokenizer")
    tokenizer_max_chars: int = Field(50_000_000, ge=1, description="text characters read to train the tokenizer")
    split_digits: bool = Field(False, description="a trained tokenizer keeps every digit its own token (arithmetic)")
    # model shape (a fresh model only)
    hidden_size: int = Field(128, ge=8)
    intermediate_size: int = Field(256, ge=1, description="each routed expert's FFN width")
    num_hidden_layers: int = Field(2, ge=1)
    num_attention_heads: int = Field(4, ge=1)
    num_key_value_heads: int = Field(2, ge=1)
    num_local_experts: int = Field(8, ge=1)
    num_experts_per_tok: int = Field(2, ge=1, description="top-k")
    shared_expert_intermediate_size: int = Field(
        0, ge=0, description="> 0: a gated shared expert, saved as Qwen2-MoE; 0: Mixtral")
    rope_theta: float = Field(10_000.0, gt=0)
    tie_word_embeddings: bool = False
    router_aux_loss_coef: float = Field(0.02, ge=0, description="weight of the load-balancing loss")
    context_length: int = Field(
        256, ge=8, description="tokens per training block (= max positions of a fresh model)")
    # optimisation
    batch_size: int = Field(8, ge=1, description="blocks per worker per step")
    lr: float = Field(3e-3, gt=0, description="peak AdamW learning rate")
    min_lr_ratio: float = Field(0.1, ge=0, le=1, description="cosine floor, as a fraction of lr")
    warmup_steps: int = Field(20, ge=0)
    weight_decay: float = Field(0.1, ge=0, description="AdamW decay of matrices (not norms, biases)")
    grad_clip: float = Field(1.0, gt=0, description="max global gradient norm")
    max_steps: int = Field(1000, ge=1)
    max_minutes: float | None = Field(5.0, gt=0, description="wall-clock budget of the training loop")
    log_every: int = Field(10, ge=1, description="steps between loss / tokens-per-second reports")
    pack_docs: int = Field(256, ge=1, description="documents per packing task batch")
    num_workers: int = Field(2, ge=0, description="Ray Train workers (one CPU, or one GPU, each). 0: Ray Train's "
                                                  "local mode (the loop runs in the driver; no actors to start)")
    use_gpu: bool | None = Field(None, description="None: when the cluster has a GPU per worker")
    seed: int | None = Field(None, ge=0, description="None: the run's seed")




def _model_config(p: TrainMoELMParams, tokenizer: BPETokenizer) -> MoEConfig:
    shared = p.shared_expert_intermediate_size
    return MoEConfig(
        vocab_size=tokenizer.vocab_size, hidden_size=p.hidden_size, intermediate_size=p.intermediate_size,
        num_hidden_layers=p.num_hidden_layers, num_attention_heads=p.num_attention_heads,
        num_key_value_heads=p.num_key_value_heads, num_local_experts=p.num_local_experts,
        num_experts_per_tok=p.num_experts_per_tok, shared_expert_intermediate_size=shared,
        shared_expert_gate=shared > 0, architecture="qwen2_moe" if shared > 0 else "mixtral",
        rope_theta=p.rope_theta, max_position_embeddings=p.context_length,
        tie_word_embeddings=p.tie_word_embeddings, router_aux_loss_coef=p.router_aux_loss_coef,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
    )



class MoELMTrainer(Stage[TrainMoELMParams]):
    """Train a mixture-of-experts language model (and its BPE tokenizer) on a text Dataset with Ray Train -> Model.

    Shared by the ``train_moe_lm`` op and the reasoning stages that train policies on it.
    The model is saved in the Hugging Face Mixtral layout (Qwen2-MoE with a shared expert)."""

    @classmethod
    def planned_workers(cls, params: Any) -> str:
        return train_workers(params.num_workers, params.use_gpu)

    inputs: ClassVar[dict[str, ArtifactType]] = {"data": ArtifactType.DATASET}
    output: ClassVar[ArtifactType] = ArtifactType.MODEL
    # The driver only coordinates; the Ray Train workers ask for their own CPUs/GPUs.
    resources: ClassVar[Resources] = Resources(num_cpus=0)

    def _tokenizer(self, texts: Any, ctx: RunContext) -> tuple[BPETokenizer, str | None]:
        p = self.params
        source = p.tokenizer or (p.init_from if p.init_from and has_tokenizer(p.init_from) else None)
        if source:
            return load_tokenizer(source), source
        if p.init_from:
            raise ValueError(f"init_from {p.init_from!r} has no tokenizer.json: pass the tokenizer param")
        start = time.perf_counter()
        keys = [p.text_key] + ([p.prompt_key] if p.prompt_key else [])
        tokenizer = train_bpe_tokenizer(column_texts(texts, keys), p.vocab_size, max_chars=p.tokenizer_max_chars,
                                        split_digits=p.split_digits)
        ctx.event("tokenizer_trained", vocab_size=tokenizer.vocab_size, seconds=time.perf_counter() - start)
        return tokenizer, None

    def _config(self, tokenizer: BPETokenizer) -> MoEConfig:
        p = self.params
        if not p.init_from:
            return _model_config(p, tokenizer)
        config = from_hf_dict(json.loads((Path(p.init_from) / "config.json").read_text()))
        if tokenizer.vocab_size > config.vocab_size:
            raise ValueError(f"tokenizer has {tokenizer.vocab_size} tokens, the model only {config.vocab_size}")
        return config

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ModelArtifact:
        os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")  # read when ray.train is first imported
        import ray

        p = self.params
        seed = ctx.seed if p.seed is None else p.seed
        columns = [p.text_key] + ([p.prompt_key] if p.prompt_key else [])
        texts = inputs["data"].ds.select_columns(columns).materialize()  # read upstream once
        tokenizer, tokenizer_source = self._tokenizer(texts, ctx)
        config = self._config(tokenizer)
        block = min(p.context_length, config.max_position_embeddings)
        tokenizer.model_max_length = config.max_position_embeddings
        start = time.perf_counter()
        blocks = texts.map_batches(
            pack_batch, batch_size=p.pack_docs, batch_format="pyarrow",
            fn_kwargs={"tokenizer": tokenizer, "text_key": p.text_key, "block": block, "prompt_key": p.prompt_key},
        ).materialize()
        n_blocks = blocks.count()
        if n_blocks < max(p.num_workers, 1) * p.batch_size:
            raise ValueError(f"{n_blocks} blocks of {block} tokens: need at least num_workers * batch_size = "
                             f"{max(p.num_workers, 1) * p.batch_size} (more text, or a smaller batch_size/context_length)")
        ctx.event("train_data", blocks=n_blocks, tokens=n_blocks * block, context_length=block,
                  seconds=time.perf_counter() - start)
        use_gpu = p.use_gpu if p.use_gpu is not None else ray.cluster_resources().get("GPU", 0) >= max(p.num_workers, 1)

        fitted = fit_with_progress(train_loop, {
            "model": config.to_dict(), "init_from": p.init_from, "seed": seed,
            "batch_size": p.batch_size, "lr": p.lr, "min_lr_ratio": p.min_lr_ratio,
            "warmup_steps": p.warmup_steps, "weight_decay": p.weight_decay, "grad_clip": p.grad_clip,
            "max_steps": p.max_steps, "max_minutes": p.max_minutes, "log_every": p.log_every,
        }, ctx, p.num_workers, use_gpu, datasets={"train": blocks})
        model_dir, fit_seconds = fitted.model_dir, fitted.seconds
        history, summary = fitted.result.return_value["history"], fitted.result.return_value["summary"]

        tokenizer.save(model_dir)
        write_generation_config(model_dir, tokenizer)
        artifact = ModelArtifact(str(model_dir), config={
            "kind": KIND, "architecture": config.architecture, "model": config.to_dict(),
            "context_length": block, "text_key": p.text_key, "prompt_key": p.prompt_key,
            "tokenizer": {"vocab_size": tokenizer.vocab_size, "source": tokenizer_source,
                          "bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id,
                          "pad_token_id": tokenizer.pad_token_id, "stop_token_ids": tokenizer.stop_token_ids},
            "training": {**summary, "fit_seconds": fit_seconds, "init_from": p.init_from, "blocks": n_blocks,
                         "num_workers": p.num_workers, "batch_size": p.batch_size, "lr": p.lr, "seed": seed},
            "history": history,
        })
        artifact.save_manifest()
        return artifact


def train_workers(num_workers: int, use_gpu: bool | None, trainings: int = 1) -> str:
    """`raypress plan`'s words for ``trainings`` Ray Train runs of ``num_workers`` workers each."""
    times = f"{trainings} trainings × " if trainings > 1 else ""
    if num_workers == 0:
        return f"{times}Ray Train local mode (in the driver)"
    gpu = {True: " gpu=1", False: "", None: " (gpu=1 where the cluster has a GPU per worker)"}[use_gpu]
    return f"{times}{num_workers} Ray Train workers × cpu=1{gpu}"
