"""The MoE-CAP benchmark's in-process target: an ``Engine`` over a Model directory, measured here.

Why: a Model artifact can be benchmarked without deploying it.  The engine runs in this process,
its step records are kept as they come (no server history to lose them), and requests are timed
from the events of ``Engine.generate`` as ``http_client.HttpTarget`` times them from SSE chunks,
so both targets produce the same ``CompletionResult``.  Needs torch (the ``moe`` extra).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from raypress.operators.moe.cap.target import CompletionResult


class InProcessTarget:
    """An ``Engine`` over a Model directory in this process; every step is kept (no history bound)."""

    def __init__(self, model_dir: str | Path, max_batch_size: int = 8, device: str = "cpu", **engine_kwargs: Any):
        from raypress.inference.engine import Engine

        self.model_dir = Path(model_dir)
        self._records: list[Any] = []
        self.engine = Engine.from_pretrained(
            self.model_dir,
            device=device,
            max_batch_size=max_batch_size,
            max_queue=max(64, max_batch_size),
            on_step=self._records.append,
            **engine_kwargs,
        )
        self.engine.start()

    async def complete(self, prompt: str, max_tokens: int, temperature: float) -> CompletionResult:
        from raypress.inference.sampling import SamplingParams

        params = SamplingParams(max_tokens=max_tokens, temperature=temperature)
        start = time.perf_counter()
        parts: list[str] = []
        times: list[float] = []
        usage = None
        async for event in self.engine.generate(prompt, params):
            now = time.perf_counter() - start
            times.extend([now] * len(event.token_ids))
            parts.append(event.text)
            usage = event.usage or usage
        e2e = time.perf_counter() - start
        count = usage.completion_tokens if usage else len(times)
        return CompletionResult("".join(parts), count, times[0] if times else None, e2e, times,
                                usage.prompt_tokens if usage else None)

    def steps_since(self, step: int) -> list[dict[str, Any]]:
        return [asdict(r) for r in list(self._records) if r.step > step]

    def engine_info(self) -> dict[str, Any]:
        engine = self.engine
        weight = next(engine.model.parameters())
        return {"model": self.model_dir.name, "config": engine.model.config.to_dict(),
                "dtype": str(weight.dtype).removeprefix("torch."), "device": str(weight.device),
                "max_batch_size": engine.max_batch_size, "max_len": engine.max_len,
                "threads": _torch_threads()}

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        return [len(self.engine.encode(prompt)) for prompt in prompts]

    def loglikelihoods(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]:
        """(log-likelihood, is greedy) of each continuation, from the engine's model in this process."""
        from raypress.operators.moe.cap.choice_scoring import model_loglikelihoods

        return model_loglikelihoods(self.engine.model, self.engine.encode, pairs, self.engine.max_len)

    async def aclose(self) -> None:
        self.engine.stop()


def _torch_threads() -> int:
    """The engine's torch threads: it runs in this process, so this process's count."""
    import torch

    return torch.get_num_threads()
