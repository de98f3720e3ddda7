"""A request handle read a batch at a time: the first event wakes the reader at once, later ones
only once ``every`` tokens wait (or at the last event), so the step thread hands the event loop one
wake-up per streamed chunk instead of one per token (no model, no Ray)."""

from __future__ import annotations

import asyncio

import pytest

from raypress.inference.requests import GenerationEvent, RequestHandle, Usage
from raypress.inference.sampling import SamplingParams


class Owner:
    def _cancel(self, handle: RequestHandle) -> None:
        """No engine here: a cancel has nothing to stop."""


def event(i: int, last: bool = False) -> GenerationEvent:
    return GenerationEvent([i], f"{i} ", "length" if last else None, Usage(2, i + 1) if last else None)


def test_the_reader_wakes_for_the_first_event_then_every_n_tokens_and_at_the_end():
    async def scenario() -> list:
        handle = RequestHandle(Owner(), "r", [1, 2], SamplingParams(max_tokens=6))
        batches = handle.batches(every=4).__aiter__()
        seen = []
        handle._deliver(event(0))
        seen.append([e.token_ids[0] for e in await asyncio.wait_for(batches.__anext__(), 1)])
        for i in (1, 2, 3):
            handle._deliver(event(i))
        nxt = asyncio.ensure_future(batches.__anext__())
        with pytest.raises(asyncio.TimeoutError):  # three tokens wait: not enough to wake the reader
            await asyncio.wait_for(asyncio.shield(nxt), 0.05)
        handle._deliver(event(4))
        seen.append([e.token_ids[0] for e in await asyncio.wait_for(nxt, 1)])
        handle._deliver(event(5, last=True))  # the last event wakes it whatever the count
        seen.append([e.token_ids[0] for e in await asyncio.wait_for(batches.__anext__(), 1)])
        return seen

    assert asyncio.run(scenario()) == [[0], [1, 2, 3, 4], [5]]


def test_every_one_hands_over_whatever_waits():
    async def scenario() -> list:
        handle = RequestHandle(Owner(), "r", [1], SamplingParams(max_tokens=3))
        for i in range(2):
            handle._deliver(event(i))
        handle._deliver(event(2, last=True))
        return [[e.token_ids[0] for e in batch] async for batch in handle.batches()]

    assert asyncio.run(scenario()) == [[0, 1, 2]]
