"""Other systems on the same checkpoint, prompts and hardware, so the CAP radar compares systems.

Why: concurrency levels of one server are one system measured several times; MoE-CAP compares
systems.  Beside the benchmarked target (raypress: its kernels and continuous batching) this module
runs, in this process and on the same prompts:

- ``engine``: the raypress engine itself in this process (its kernels, no HTTP, no Serve): what the
  served path costs against the engine it serves;
- ``kernels_off``: the raypress engine with the MoE layers' custom kernels replaced by the plain
  torch path (``models.moe.sorted_moe``): what the kernels are worth;
- ``hf_generate``: Hugging Face ``transformers``' own ``generate`` (static batches of the level's
  concurrency, left-padded, greedy): the reference implementation users compare with.

Each produces a ``LevelRun`` -- per-request results and per-forward step records -- so the report
prices its passes with the same MoE-CAP accounting (S-MBU / S-MFU) as the engine's.  For
``hf_generate`` the records come from forward hooks: one per model forward (the first of a batch
is its prefill, then one decode per token), the experts each layer's router chose (padding
positions included: HF computes them), the padded lengths HF attends over.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from raypress.operators.moe.cap.levels import LevelRun, run_level
from raypress.operators.moe.cap.target import CompletionResult

SYSTEMS = ("engine", "kernels_off", "hf_generate")
NAMES = {"engine": "raypress engine in process", "kernels_off": "raypress, kernels off",
         "hf_generate": "HF transformers generate"}


async def engine_level(model_dir: str | Path, prompts: Sequence[str], concurrency: int, max_tokens: int,
                       temperature: float, timeout_s: float, pairs: Sequence[tuple[str, str]] = (),
                       kernels: bool = True) -> tuple[LevelRun, list[tuple[float, bool]]]:
    """The raypress engine in this process (``kernels`` False: the torch expert path instead of the
    kernels): one level at ``concurrency`` and, for ``pairs``, the log-likelihoods (multiple choice)."""
    from raypress.models.moe import sorted_moe
    from raypress.operators.moe.cap.in_process import InProcessTarget

    target = InProcessTarget(model_dir, max_batch_size=concurrency)
    if not kernels:
        target.engine.model.set_expert_fn(sorted_moe)
    try:
        await target.complete(prompts[0], 2, temperature)  # warm-up
        mark = max((int(s["step"]) for s in target.steps_since(-1)), default=-1)
        run = await run_level(target, prompts, concurrency, max_tokens, temperature, timeout_s, mark)
        return run, (target.loglikelihoods(pairs) if pairs else [])
    finally:
        await target.aclose()


class _Logits:
    """An HF causal LM called as ours is by ``choice_scoring.model_loglikelihoods``: logits only."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, input_ids: Any) -> Any:
        return self.model(input_ids=input_ids).logits

    def parameters(self) -> Any:
        return self.model.parameters()


class _ForwardRecorder:
    """Forward hooks on an HF MoE model: per forward, its wall time and each layer's distinct experts."""

    def __init__(self, model: Any) -> None:
        self.forwards: list[tuple[float, float, list[int], int]] = []  # (start, end, experts per layer, tokens)
        self._layer_experts: list[set[int]] = []
        self._start = 0.0
        self._tokens = 0
        self.handles = [model.register_forward_pre_hook(self._begin, with_kwargs=True),
                        model.register_forward_hook(self._end, with_kwargs=True)]
        for layer in model.model.layers:
            gate = getattr(getattr(layer, "mlp", None), "gate", None) or getattr(
                getattr(layer, "block_sparse_moe", None), "gate", None)
            if gate is None:
                raise ValueError("hf_generate needs a Mixtral/Qwen2-MoE model with a router per layer")
            self.handles.append(gate.register_forward_hook(self._route))

    def _begin(self, _module: Any, args: Any, kwargs: dict[str, Any]) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self._tokens = int(ids.numel()) if ids is not None else 0
        self._layer_experts = []
        self._start = time.perf_counter()

    def _route(self, _module: Any, _inputs: Any, output: Any) -> None:
        indices = output[2] if isinstance(output, tuple) and len(output) >= 3 else output[1]
        self._layer_experts.append({int(e) for e in indices.reshape(-1).tolist()})

    def _end(self, _module: Any, _args: Any, _kwargs: Any, _output: Any) -> None:
        self.forwards.append((self._start, time.perf_counter(), [len(s) for s in self._layer_experts], self._tokens))

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def hf_generate_level(model_dir: str | Path, prompts: Sequence[str], batch: int, max_tokens: int,
                      pairs: Sequence[tuple[str, str]] = (), max_len: int | None = None,
                      ) -> tuple[LevelRun, list[tuple[float, bool]], dict[str, Any]]:
    """HF ``generate`` over ``prompts`` in static batches of ``batch`` (greedy, exactly ``max_tokens``
    new tokens, EOS ignored), timed per forward; the log-likelihoods of ``pairs``; and its info
    (model class, dtype, torch threads)."""
    import torch
    from transformers import AutoModelForCausalLM

    from raypress.models.bpe_tokenizer import load_tokenizer
    from raypress.operators.moe.cap.choice_scoring import model_loglikelihoods

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = load_tokenizer(model_dir)

    def encode(text: str) -> list[int]:
        encoded = tokenizer.encode(text)
        return list(getattr(encoded, "ids", encoded))

    pad = model.config.eos_token_id if model.config.eos_token_id is not None else 0
    recorder = _ForwardRecorder(model)
    results: list[CompletionResult | BaseException] = []
    steps: list[dict[str, Any]] = []
    try:
        _generate(model, [encode(prompts[0])], 2, pad)  # warm-up
        recorder.forwards.clear()
        started = time.perf_counter()
        for at in range(0, len(prompts), batch):
            rows = [encode(p) for p in prompts[at:at + batch]]
            width = max(len(r) for r in rows)
            recorder.forwards.clear()
            begin = time.perf_counter()
            out = _generate(model, rows, max_tokens, pad)
            forwards = list(recorder.forwards)
            times = [end - begin for _, end, _, _ in forwards]
            for i, row in enumerate(rows):
                new = out[i, width:].tolist()
                results.append(CompletionResult(tokenizer.decode(new), len(new), times[0], times[-1], times,
                                                len(row)))
            for k, (start, end, experts, _) in enumerate(forwards):
                steps.append(_step_record(len(steps), start, end, experts, k, len(rows), width))
        wall = time.perf_counter() - started
    finally:
        recorder.close()
    lls = model_loglikelihoods(_Logits(model), encode, pairs, max_len) if pairs else []
    info = {"system": "hf_generate", "class": type(model).__name__, "dtype": "float32",
            "threads": torch.get_num_threads(), "batching": f"static batches of {batch}, left-padded"}
    return LevelRun(batch, results, wall, steps, 0), lls, info


def _generate(model: Any, rows: list[list[int]], new: int, pad: int) -> Any:
    import torch

    width = max(len(r) for r in rows)
    inputs = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    with torch.inference_mode():
        return model.generate(input_ids=inputs, attention_mask=mask, max_new_tokens=new, min_new_tokens=new,
                              do_sample=False, pad_token_id=pad)


def _step_record(step: int, start: float, end: float, experts: list[int], k: int, batch: int,
                 width: int) -> dict[str, Any]:
    """An engine-style step record (``inference.stats.StepRecord`` fields the accounting reads) for
    forward ``k`` of an HF batch: k = 0 prefills ``batch`` rows of ``width`` (padded) tokens, k >= 1
    decodes one token per row over ``width + k - 1`` cached tokens."""
    seconds = end - start
    prefill = k == 0
    return {"step": step, "started": start, "seconds": seconds, "admitted": batch if prefill else 0,
            "prefill_tokens": batch * width if prefill else 0, "prefill_seconds": seconds if prefill else 0.0,
            "batch_size": 0 if prefill else batch, "decode_context_tokens": 0 if prefill else batch * (width + k - 1),
            "decode_seconds": 0.0 if prefill else seconds, "new_tokens": batch, "finished": 0, "queue_depth": 0,
            "running": batch, "prefill_experts": experts if prefill else [],
            "decode_experts": [] if prefill else experts, "prefill_lengths": [width] * batch if prefill else [],
            "decode_contexts": [] if prefill else [width + k - 1] * batch}
