"""The MoE language-model training loop: packed token blocks -> an MoE LM (HF format), trained with Ray Train.

Shared by the stages that train an MoE LM: the ``train_moe_lm`` op and the reasoning stages that
train their policies (all through ``operators/shared/moe_lm_trainer.py``, the Stage that drives
this module).  The life cycle of one training node:

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
import time
from collections import deque
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import torch

from raypress.models.bpe_tokenizer import BPETokenizer, load_tokenizer
from raypress.models.moe import MoEForCausalLM
from raypress.models.moe_checkpoint import load_moe, save_moe
from raypress.models.moe_config import MoEConfig
from raypress.training.storage import all_sum, checkpoint_folder

KIND = "moe_lm"
GENERATION_CONFIG = "generation_config.json"


# ---------------------------------------------------------------------------------------------
# data


def column_texts(ds: Any, keys: list[str]) -> Iterator[str | None]:
    """The values of ``keys`` in a Dataset, batch by batch (the tokenizer trainer's input)."""
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


def train_loop(config: dict[str, Any]) -> dict[str, Any] | None:
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


def write_generation_config(model_dir: Path, tokenizer: BPETokenizer) -> None:
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
