"""The MoE language-model trainer: a text Dataset -> an MoE LM (HF format + tokenizer), trained with Ray Train.

Shared because it is the ``train_moe_lm`` op (``operators/moe/train_moe_lm.py``) and also what the
reasoning stages train their policies with; it registers no op itself.  A node running it is a node
of the same DAG as the curation that feeds it:

1. tokenizer: loaded (``tokenizer`` param, or the ``init_from`` checkpoint's), else a byte-level
   BPE trained on the first ``tokenizer_max_chars`` characters of the input text;
2. packing: Ray Data tasks tokenize the documents, join them with EOS and cut the stream into
   blocks of ``context_length`` tokens (GPT-2 style packing: no padding, a document may span
   two blocks; each batch of ``pack_docs`` documents drops its last partial block);
3. training: ``TorchTrainer`` with ``num_workers`` workers (DDP over gloo on CPU, NCCL on GPU),
   AdamW, linear warmup then cosine decay, gradient clipping, stopping at ``max_steps`` or
   ``max_minutes``, whichever comes first. The workers agree on the clock every step (one
   all-reduce of a float), so they stop at the same step and use the same learning rate;
4. output: ``<run_dir>/models/<node id>/`` with ``config.json`` + ``model.safetensors`` (Mixtral
   or Qwen2-MoE layout, see ``moe_checkpoint``), ``tokenizer.json`` + ``tokenizer_config.json``,
   ``generation_config.json`` and ``raypress_model.json`` (kind ``moe_lm``, config, summary).

Progress: every ``log_every`` steps the workers all-reduce their loss and token counts and rank 0
puts them on a Ray queue that the driver drains into the run's events (``train_progress``) while
``fit`` runs, so a long run is observable while it trains. ``ray.train.report`` is called once, at
the end, with the summary and the checkpoint: it is a barrier that cost ~0.3 s per call on 2 CPU
workers here, a third of a step's time when called every 10 steps.

``generate_text`` (plain greedy / sampled loop, no KV cache) shows what a model trained here writes.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections import deque
from contextlib import nullcontext
from pathlib import Path
from typing import Any, ClassVar, Iterator

import numpy as np
import pyarrow as pa
import torch
from pydantic import Field

from raypress.artifacts import Artifact, ModelArtifact
from raypress.models.bpe_tokenizer import BPETokenizer, has_tokenizer, load_tokenizer, train_bpe_tokenizer
from raypress.models.moe import MoEForCausalLM
from raypress.models.moe_checkpoint import from_hf_dict, load_moe, save_moe
from raypress.models.moe_config import MoEConfig
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.shared.train_storage import all_sum, checkpoint_folder, fit_with_progress
from raypress.schema import ArtifactType

KIND = "moe_lm"
GENERATION_CONFIG = "generation_config.json"


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


# ---------------------------------------------------------------------------------------------
# data


def _texts(ds: Any, keys: list[str]) -> Iterator[str | None]:
    for batch in ds.iter_batches(batch_size=256, batch_format="pyarrow"):
        for key in keys:
            yield from batch.column(key).to_pylist()


def pack_batch(table: pa.Table, tokenizer: BPETokenizer, text_key: str, block: int,
               prompt_key: str | None = None) -> dict[str, np.ndarray]:
    """Documents -> ``input_ids (n, block)`` and ``labels``: token streams joined by EOS, cut into full blocks.

    With ``prompt_key`` each document is prompt + text, tokenised apart (as the server will see the
    prompt) and the prompt's tokens get label -100, so only the answer is learned; without it the
    labels are the input ids."""
    texts = table.column(text_key).to_pylist()
    prompts = table.column(prompt_key).to_pylist() if prompt_key else [None] * len(texts)
    keep = [i for i, t in enumerate(texts) if t]
    eos = tokenizer.eos_token_id
    tail = [eos] if eos is not None else []
    encoded_texts = tokenizer.encode_batch([texts[i] for i in keep])
    encoded_prompts = tokenizer.encode_batch([prompts[i] or "" for i in keep]) if prompt_key else [[]] * len(keep)
    stream: list[int] = []
    labels: list[int] = []
    for prompt_ids, text_ids in zip(encoded_prompts, encoded_texts):
        stream.extend(prompt_ids)
        labels.extend([-100] * len(prompt_ids))
        stream.extend(text_ids + tail)
        labels.extend(text_ids + tail)
    n = len(stream) // block
    return {"input_ids": np.asarray(stream[: n * block], dtype=np.int32).reshape(n, block),
            "labels": np.asarray(labels[: n * block], dtype=np.int32).reshape(n, block)}


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


# ---------------------------------------------------------------------------------------------
# training (runs on every Ray Train worker)


def lr_at(step: int, progress: float, config: dict[str, Any]) -> float:
    """Linear warmup over ``warmup_steps``, times a cosine from 1 to ``min_lr_ratio`` over the budget.

    ``progress`` in [0, 1] is how much of the budget (steps or minutes, the nearer) is spent, so a
    time-bound run still decays to the floor."""
    warmup = min(1.0, (step + 1) / config["warmup_steps"]) if config["warmup_steps"] else 1.0
    floor = config["min_lr_ratio"]
    cosine = floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return config["lr"] * warmup * cosine


def _optimizer(net: MoEForCausalLM, config: dict[str, Any]) -> torch.optim.Optimizer:
    """AdamW; weight decay on matrices only (norm gains and biases are left alone)."""
    decay = [p for p in net.parameters() if p.ndim >= 2]
    rest = [p for p in net.parameters() if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": config["weight_decay"]}, {"params": rest, "weight_decay": 0.0}]
    try:  # the fused kernel (CPU and CUDA) takes a few ms where the per-tensor loop takes 10+
        return torch.optim.AdamW(groups, lr=config["lr"], betas=(0.9, 0.95), fused=True)
    except RuntimeError:
        return torch.optim.AdamW(groups, lr=config["lr"], betas=(0.9, 0.95))


def _micro_batches(shard: Any, batch_size: int, seed: int,
                   chunk_batches: int = 32) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """One epoch of this worker's ``(input_ids, labels)`` blocks, ``batch_size`` at a time (a last
    partial batch is dropped).

    Rows come from Ray Data ``chunk_batches`` batches at once, locally shuffled: one fetch per step
    cost 15-30 ms on a loaded 2-CPU machine, a tenth of a step. Every worker's split holds the same
    number of rows (``streaming_split(equal=True)``), so all take the same number of steps."""
    chunk = batch_size * chunk_batches
    for rows in shard.iter_torch_batches(batch_size=chunk, dtypes=torch.long, prefetch_batches=2,
                                         local_shuffle_buffer_size=2 * chunk, local_shuffle_seed=seed):
        ids, labels = rows["input_ids"], rows["labels"]
        for start in range(0, len(ids) - batch_size + 1, batch_size):
            yield ids[start : start + batch_size], labels[start : start + batch_size]


def _train_loop(config: dict[str, Any]) -> dict[str, Any] | None:
    """Train until the step or time budget is spent; rank 0 checkpoints and returns the history."""
    import ray.train
    import ray.train.torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(config["seed"])
    if config["init_from"]:
        model, _ = load_moe(config["init_from"], dtype=torch.float32)
    else:
        model = MoEForCausalLM(MoEConfig.from_dict(config["model"]))
    model.train()
    model = ray.train.torch.prepare_model(model)
    net: MoEForCausalLM = model.module if isinstance(model, DistributedDataParallel) else model
    device = ray.train.torch.get_device()
    distributed = dist.is_available() and dist.is_initialized()
    rank = ray.train.get_context().get_world_rank()
    optimizer = _optimizer(net, config)
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if device.type == "cuda" else nullcontext()
    shard = ray.train.get_dataset_shard("train")
    budget_s = config["max_minutes"] * 60 if config["max_minutes"] else math.inf
    queue = config.get("progress_queue")

    history: list[dict[str, Any]] = []
    window = [0.0, 0.0, 0.0, 0.0]  # lm loss sum, aux loss sum, steps, tokens (this worker)
    step, epoch, total_tokens = 0, 0, 0
    recent: deque[float] = deque(maxlen=config["log_every"])  # this worker's last losses: the final loss
    start = last_log = time.perf_counter()

    def log() -> None:
        nonlocal window, last_log
        lm, aux, steps, tokens = all_sum(window, device)
        now = time.perf_counter()
        metrics = {"step": step, "epoch": epoch, "loss": lm / steps, "aux_loss": aux / steps,
                   "lr": optimizer.param_groups[0]["lr"], "tokens_per_s": tokens / max(now - last_log, 1e-9),
                   "elapsed_s": now - start}
        history.append(metrics)
        if rank == 0 and queue is not None:
            queue.put(metrics)
        window, last_log = [0.0, 0.0, 0.0, 0.0], now

    done = False
    while not done:
        epoch += 1
        steps_before = step
        shuffle_seed = (config["seed"] * 100_003 + epoch * 101 + rank) % 2**32
        for ids, labels in _micro_batches(shard, config["batch_size"], shuffle_seed):
            clock = torch.tensor([time.perf_counter() - start], dtype=torch.float64, device=device)
            if distributed:  # one clock for all workers: same stop step, same learning rate
                dist.all_reduce(clock, op=dist.ReduceOp.MAX)
            progress = max(step / config["max_steps"], float(clock) / budget_s)
            if progress >= 1.0 and step > 0:  # the time budget is spent (every worker sees it now)
                done = True
                break
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, progress, config)
            ids, labels = ids.to(device), labels.to(device)
            with autocast:
                loss = model(ids, labels=labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config["grad_clip"])
            optimizer.step()
            step += 1
            total_tokens += ids.numel()
            recent.append(float(net.last_lm_loss))
            window = [window[0] + recent[-1], window[1] + float(net.last_aux_loss),
                      window[2] + 1, window[3] + ids.numel()]
            if step == 1 or step % config["log_every"] == 0:
                log()
            if step >= config["max_steps"]:  # stop here rather than open another epoch's iterator
                done = True
                break
        if step == steps_before and not done:
            raise ValueError("an epoch gave no full batch: the input has fewer blocks than "
                             "num_workers * batch_size (more text, or a smaller batch_size/context_length)")
    if window[2]:
        log()
    seconds = time.perf_counter() - start
    tokens, recent_sum, recent_n = all_sum([float(total_tokens), sum(recent), float(len(recent))], device)
    summary = {"steps": step, "epochs": epoch, "initial_loss": history[0]["loss"],
               "final_loss": recent_sum / recent_n,  # mean of the last log_every steps: less noisy than one
               "final_aux_loss": history[-1]["aux_loss"], "tokens": int(tokens), "seconds": seconds,
               "tokens_per_s": tokens / seconds, "device": device.type}
    if rank == 0:
        with checkpoint_folder(config["local_mode"]) as tmp:
            save_moe(net, tmp)
            ray.train.report(summary, checkpoint=ray.train.Checkpoint.from_directory(tmp))
        return {"history": history, "summary": summary}
    ray.train.report(summary)
    return None


# ---------------------------------------------------------------------------------------------
# the stage


class MoELMTrainer(Stage[TrainMoELMParams]):
    """Train a mixture-of-experts language model (and its BPE tokenizer) on a text Dataset with Ray Train -> Model.

    Shared by the ``train_moe_lm`` op and the reasoning stages that train policies on it.
    The model is saved in the Hugging Face Mixtral layout (Qwen2-MoE with a shared expert)."""

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
        tokenizer = train_bpe_tokenizer(_texts(texts, keys), p.vocab_size, max_chars=p.tokenizer_max_chars,
                                        split_digits=p.split_digits)
        ctx.event("tokenizer_trained", vocab_size=tokenizer.vocab_size, seconds=time.perf_counter() - start)
        return tokenizer, None

    def _config(self, tokenizer: BPETokenizer) -> MoEConfig:
        p = self.params
        if not p.init_from:
            return _model_config(p, tokenizer)
        config = from_hf_dict(_read_json(Path(p.init_from) / "config.json"))
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

        fitted = fit_with_progress(_train_loop, {
            "model": config.to_dict(), "init_from": p.init_from, "seed": seed,
            "batch_size": p.batch_size, "lr": p.lr, "min_lr_ratio": p.min_lr_ratio,
            "warmup_steps": p.warmup_steps, "weight_decay": p.weight_decay, "grad_clip": p.grad_clip,
            "max_steps": p.max_steps, "max_minutes": p.max_minutes, "log_every": p.log_every,
        }, ctx, p.num_workers, use_gpu, datasets={"train": blocks})
        model_dir, fit_seconds = fitted.model_dir, fitted.seconds
        history, summary = fitted.result.return_value["history"], fitted.result.return_value["summary"]

        tokenizer.save(model_dir)
        _write_generation_config(model_dir, tokenizer)
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


def _read_json(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _write_generation_config(model_dir: Path, tokenizer: BPETokenizer) -> None:
    """``generation_config.json``: transformers' ``generate`` (and our server) stop on every stop id."""
    values = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.stop_token_ids,
              "pad_token_id": tokenizer.pad_token_id}
    (model_dir / GENERATION_CONFIG).write_text(json.dumps(values, indent=2))


# ---------------------------------------------------------------------------------------------
# generation


@torch.no_grad()
def generate(
    model: MoEForCausalLM,
    tokenizer: BPETokenizer,
    prompt: str,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int = 0,
) -> str:
    """The continuation of ``prompt`` (greedy when ``temperature <= 0``), stopping at a stop token.

    Each step re-runs the whole window (at most ``max_position_embeddings`` tokens): slow, but the
    simplest correct loop; the serving engine has the KV cache."""
    model.eval()
    ids = tokenizer.encode(prompt) or [tokenizer.bos_token_id or 0]
    stops = set(tokenizer.stop_token_ids)
    window = model.config.max_position_embeddings
    device = next(model.parameters()).device
    rng = torch.Generator(device="cpu").manual_seed(seed)
    out: list[int] = []
    for _ in range(max_new_tokens):
        context = torch.tensor([(ids + out)[-window:]], device=device)
        logits = model(context)[0, -1].float().cpu()
        if temperature <= 0:
            token = int(logits.argmax())
        else:
            logits = logits / temperature
            if top_k is not None:
                kth = torch.topk(logits, min(top_k, logits.numel())).values[-1]
                logits = logits.masked_fill(logits < kth, -math.inf)
            token = int(torch.multinomial(torch.softmax(logits, -1), 1, generator=rng))
        if token in stops:
            break
        out.append(token)
    return tokenizer.decode(out)


def generate_text(
    model_dir: str | Path,
    prompt: str,
    max_new_tokens: int = 64,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int = 0,
) -> str:
    """Load a Model dir (weights + tokenizer) and continue ``prompt``; see ``generate``."""
    model, _ = load_moe(model_dir, dtype=torch.float32)
    return generate(model, load_tokenizer(model_dir), prompt, max_new_tokens, temperature, top_k, seed)
