"""Streamed events joined into fewer chunks: the first of each choice at once, then every
``interval`` tokens or at the finish, with ids, text and logprobs unchanged (no Ray, no model)."""

from __future__ import annotations

import asyncio

from raypress.inference.requests import GenerationEvent, TokenLogprob, Usage
from raypress.serving.stream_coalesce import coalesced, merge_events


def token(i: int, finish: str | None = None, logprob: bool = False) -> GenerationEvent:
    return GenerationEvent([i], f"t{i} ", finish, Usage(3, i + 1) if finish else None,
                           [TokenLogprob(i, -0.5 * i, [])] if logprob else None)


def run(batches: list[tuple[int, list[GenerationEvent]]], interval: int) -> list[tuple[int, GenerationEvent]]:
    async def source():
        for item in batches:
            yield item

    async def collect():
        return [item async for item in coalesced(source(), interval)]

    return asyncio.run(collect())


def test_merged_event_keeps_ids_text_logprobs_and_the_last_finish():
    events = [token(0, logprob=True), token(1, logprob=True), token(2, "length", logprob=True)]
    merged = merge_events(events)
    assert merged.token_ids == [0, 1, 2] and merged.text == "t0 t1 t2 "
    assert [lp.token_id for lp in merged.logprobs] == [0, 1, 2]
    assert merged.finish_reason == "length" and merged.usage == Usage(3, 3)
    assert merge_events([token(5)]) is not None and merge_events([token(0), token(1)]).logprobs is None


def test_the_first_token_goes_at_once_then_every_interval_tokens_and_the_finish():
    batches = [(0, [token(i, "stop" if i == 9 else None)]) for i in range(10)]
    out = run(batches, 4)
    assert [e.token_ids for _, e in out] == [[0], [1, 2, 3, 4], [5, 6, 7, 8], [9]]
    assert "".join(e.text for _, e in out) == "".join(f"t{i} " for i in range(10))
    assert out[-1][1].finish_reason == "stop"


def test_interval_one_still_joins_what_was_already_waiting():
    out = run([(0, [token(0)]), (0, [token(1), token(2)]), (0, [token(3, "stop")])], 1)
    assert [e.token_ids for _, e in out] == [[0], [1, 2], [3]]


def test_choices_are_held_apart():
    batches = [(0, [token(0)]), (1, [token(10)]), (0, [token(1)]), (1, [token(11)]), (0, [token(2, "stop")]),
               (1, [token(12, "stop")])]
    out = run(batches, 8)
    assert [(i, e.token_ids) for i, e in out] == [(0, [0]), (1, [10]), (0, [1, 2]), (1, [11, 12])]
