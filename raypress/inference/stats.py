"""What the engine reports about itself: one ``StepRecord`` per step, one ``RequestMetrics`` per
finished request, and ``EngineStats``, a bounded history of both with running totals.

Why apart from the engine: these are plain data that a server exports as metrics and that the
MoE-CAP benchmark reads (in process, or as the JSON of ``/raypress/v1/steps``) to price every forward
pass; reading them needs neither torch nor the scheduler.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass

from raypress.inference.requests import FinishReason


@dataclass(frozen=True)
class RequestMetrics:
    """Timings of one finished request (seconds); TTFT counts the wait in the queue."""

    request_id: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason
    queue_seconds: float
    ttft_seconds: float | None  # None: no token was generated (cancelled while waiting)
    tpot_seconds: float | None  # mean time between output tokens; None with fewer than 2 tokens
    e2e_seconds: float


@dataclass(frozen=True)
class StepRecord:
    """What one engine step did.

    ``batch_size``: sequences in the decode forward. ``*_experts``: distinct experts activated by
    the whole batch in each layer of that forward (empty when the forward did not run).
    ``decode_context_tokens``: cached tokens the decode forward attended over (KV-cache reads).
    ``prefill_lengths`` / ``decode_contexts``: per sequence, the prompt length prefilled and the
    tokens already cached before its decode token (what MoE-CAP's attention FLOPs need exactly).
    """

    step: int
    started: float  # time.monotonic()
    seconds: float
    admitted: int
    prefill_tokens: int
    prefill_seconds: float
    batch_size: int
    decode_context_tokens: int
    decode_seconds: float
    new_tokens: int
    finished: int
    queue_depth: int  # still waiting after admission
    running: int  # sequences holding a KV slot after the step
    prefill_experts: list[int]
    decode_experts: list[int]
    prefill_lengths: list[int]
    decode_contexts: list[int]
    # the forward passes alone (``*_seconds`` above also hold sampling, detokenising and handing the
    # tokens to their requests): what S-MBU / S-MFU divide the pass's bytes and FLOPs by
    prefill_forward_seconds: float = 0.0
    decode_forward_seconds: float = 0.0
    # the new prompts ran in the decode forward (one packed pass): the pass's time is in ``decode_*``,
    # ``prefill_*`` are 0, and the experts are still counted per phase; neither phase alone
    fused: bool = False


class EngineStats:
    """Rolling history of steps and finished requests plus running totals; safe to read from any thread."""

    def __init__(self, history: int = 1024) -> None:
        self._lock = threading.Lock()
        self._steps: deque[StepRecord] = deque(maxlen=history)
        self._requests: deque[RequestMetrics] = deque(maxlen=history)
        self.total_steps = 0
        self.total_tokens = 0
        self.total_requests = 0

    def add_step(self, record: StepRecord) -> None:
        with self._lock:
            self._steps.append(record)
            self.total_steps += 1
            self.total_tokens += record.new_tokens

    def add_request(self, metrics: RequestMetrics) -> None:
        with self._lock:
            self._requests.append(metrics)
            self.total_requests += 1

    @property
    def steps(self) -> list[StepRecord]:
        with self._lock:
            return list(self._steps)

    @property
    def requests(self) -> list[RequestMetrics]:
        with self._lock:
            return list(self._requests)

    def tokens_per_second(self, window_s: float = 10.0) -> float:
        """Generated tokens per wall-clock second over the steps of the last ``window_s`` seconds."""
        now = time.monotonic()
        recent = [s for s in self.steps if s.started >= now - window_s]
        if not recent:
            return 0.0
        elapsed = recent[-1].started + recent[-1].seconds - recent[0].started
        return sum(s.new_tokens for s in recent) / elapsed if elapsed > 0 else 0.0

