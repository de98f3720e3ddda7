"""One concurrency level of the MoE-CAP benchmark: every prompt sent with at most N in flight,
and exactly the engine steps those requests caused.

Why its own module: a level's numbers are only as good as its bookkeeping.  Requests are gated by
a semaphore and timed by the target; a failed request is kept as a result (a miss) rather than
ending the run; the engine's step records are read while the level runs (a server keeps a
bounded history) and once more after it settles, from a mark past the previous level, so no step
of the warm-up or of another level leaks in, and steps the server's history dropped are counted.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from raypress.operators.moe.cap.target import BenchmarkTarget, CompletionResult

SETTLE_S = 0.2  # after a level: the engine records its last step just after the last token goes out
POLL_S = 1.0  # step records are read this often during a level (a server keeps a bounded history)


class StepCollector:
    """Reads a target's step records from ``mark`` on, counting steps the server's history dropped."""

    def __init__(self, target: BenchmarkTarget, mark: int) -> None:
        self.target = target
        self.last = mark
        self.records: list[dict[str, Any]] = []
        self.missed = 0

    async def poll(self) -> None:
        for record in await asyncio.to_thread(self.target.steps_since, self.last):
            step = int(record["step"])
            if step <= self.last:
                continue
            self.missed += step - self.last - 1
            self.records.append(record)
            self.last = step


@dataclass
class LevelRun:
    """What one concurrency level produced: per-row results (or the error) and the step records."""

    concurrency: int
    results: list[CompletionResult | BaseException]
    wall_seconds: float
    steps: list[dict[str, Any]]
    missed_steps: int


async def run_level(
    target: BenchmarkTarget, prompts: Sequence[str], concurrency: int, max_tokens: int,
    temperature: float, timeout_s: float, mark: int, poll_s: float = POLL_S,
) -> LevelRun:
    """Send every prompt with at most ``concurrency`` in flight; collect the steps after ``mark``."""
    gate = asyncio.Semaphore(concurrency)
    collector = StepCollector(target, mark)

    async def one(prompt: str) -> CompletionResult | BaseException:
        async with gate:
            try:
                return await asyncio.wait_for(target.complete(prompt, max_tokens, temperature), timeout_s)
            except Exception as error:  # one failed request is a result (a miss), not the end of the run
                return error

    async def poll_while_running(done: asyncio.Event) -> None:
        while not done.is_set():
            await asyncio.sleep(poll_s)
            await collector.poll()

    done = asyncio.Event()
    poller = asyncio.create_task(poll_while_running(done))
    start = time.perf_counter()
    try:
        results = list(await asyncio.gather(*(one(p) for p in prompts)))
    finally:
        wall = time.perf_counter() - start
        done.set()
        await poller
    await asyncio.sleep(SETTLE_S)
    await collector.poll()
    return LevelRun(concurrency, results, wall, collector.records, collector.missed)
