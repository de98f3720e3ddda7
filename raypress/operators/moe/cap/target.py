"""What the MoE-CAP benchmark needs from a model it measures: ``BenchmarkTarget``, and ``CompletionResult``.

Why a protocol of its own: the benchmark measures a live endpoint (``http_client.HttpTarget``) and
a model loaded in this process (``in_process.InProcessTarget``) with the same code, so that their
numbers mean the same; this module is the contract both keep, and all the level runner and the
report see of either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class CompletionResult:
    """One request as the client saw it; times in seconds from sending it."""

    text: str
    completion_tokens: int
    ttft: float | None  # first streamed token (None: none came)
    e2e: float
    token_times: list[float] = field(default_factory=list)  # arrival of each streamed piece
    prompt_tokens: int | None = None


class BenchmarkTarget(Protocol):
    """What the benchmark needs from a model it talks to."""

    async def complete(self, prompt: str, max_tokens: int, temperature: float) -> CompletionResult: ...

    def steps_since(self, step: int) -> list[dict[str, Any]]:
        """Engine step records (as dicts) numbered above ``step``, oldest first."""
        ...

    def engine_info(self) -> dict[str, Any]:
        """``{"model", "config" (MoEConfig dict), "dtype", "device", "max_batch_size", "max_len"}``."""
        ...

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        """Each prompt's tokens as the target encodes it for a completion."""
        ...

    def loglikelihoods(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]:
        """(summed log-probability, is greedy) of each continuation given its context."""
        ...

    async def aclose(self) -> None: ...
