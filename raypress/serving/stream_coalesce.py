"""Streamed tokens joined into fewer server-sent events.

Why: every SSE chunk a route yields is one message from the Serve replica to its HTTP proxy (and
one ``send`` on the socket); at 16-64 concurrent streams those messages, not the engine, bounded
what the server delivered (Ray issues #42565, #52745).  vLLM, SGLang and TensorRT-LLM answer the
same way (``--stream-interval``): a choice's first event goes out at once (time to first token is
never traded), later ones are held until ``interval`` tokens are waiting or the choice finishes.
Events that are already waiting when the route wakes are joined whatever the interval, so a
slow reader gets fewer, larger chunks instead of a growing backlog.  The text and every token's
logprob are unchanged: only the chunk boundaries move.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

from raypress.inference.requests import GenerationEvent, TokenLogprob


def merge_events(events: Sequence[GenerationEvent]) -> GenerationEvent:
    """One event carrying ``events`` in order: their ids, text and logprobs; the last one's finish
    reason and usage; the first prompt logprobs."""
    if len(events) == 1:
        return events[0]
    logprobs: list[TokenLogprob] | None = None
    if any(e.logprobs is not None for e in events):
        logprobs = [lp for e in events for lp in (e.logprobs or [])]
    last = events[-1]
    return GenerationEvent(
        token_ids=[t for e in events for t in e.token_ids],
        text="".join(e.text for e in events),
        finish_reason=last.finish_reason,
        usage=last.usage,
        logprobs=logprobs,
        prompt_logprobs=next((e.prompt_logprobs for e in events if e.prompt_logprobs is not None), None),
    )


async def coalesced(
    batches: AsyncIterator[tuple[int, list[GenerationEvent]]], interval: int
) -> AsyncIterator[tuple[int, GenerationEvent]]:
    """Per choice index: the first batch at once, then batches held until ``interval`` tokens wait or
    the choice finishes; each yield is one merged event."""
    held: dict[int, list[GenerationEvent]] = {}
    started: set[int] = set()
    async for index, batch in batches:
        waiting = held.setdefault(index, [])
        waiting.extend(batch)
        tokens = sum(len(e.token_ids) for e in waiting)
        done = waiting[-1].finish_reason is not None
        if index in started and not done and tokens < interval:
            continue
        started.add(index)
        held[index] = []
        yield index, merge_events(waiting)
