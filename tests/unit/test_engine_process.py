"""The engine in a process of its own (``EngineProcess``): the same tokens as in process, the same
errors before anything is sent, cancels and stops that reach the child, and a child that dies
failing its requests instead of hanging them. A real child process over a real tiny checkpoint."""

from __future__ import annotations

import asyncio
import time

import pytest

from raypress.inference.engine import Engine
from raypress.inference.engine_process import EngineProcess
from raypress.inference.requests import EngineStopped, PromptTooLong, QueueFull, RequestFailed

pytestmark = pytest.mark.timeout(180)
GREEDY = {"max_tokens": 20, "temperature": 0, "ignore_eos": True}


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir):
    return tiny_model_dir


@pytest.fixture(scope="module")
def engine(model_dir):
    process = EngineProcess(model_dir, max_batch_size=4, max_len=96, max_queue=2, num_threads=1)
    yield process
    process.stop()


def test_greedy_tokens_text_usage_and_stats_match_the_engine_in_process(engine, model_dir):
    local = Engine.from_pretrained(model_dir, max_batch_size=4, max_len=96, max_queue=2)
    with local:
        want = local.add_request("The quick brown", GREEDY).result(30)
    steps_before = engine.stats.total_steps
    got = engine.add_request("The quick brown", GREEDY).result(30)
    assert got.token_ids == want.token_ids and got.text == want.text and got.usage == want.usage
    assert engine.stats.total_steps > steps_before and engine.stats.requests[-1].completion_tokens == 20
    assert engine.max_len == 96 and engine.model.config.vocab_size == local.model.config.vocab_size


def test_concurrent_streams_in_an_event_loop_get_every_token(engine):
    async def stream(k: int) -> list[int]:
        handle = engine.add_request(f"prompt {k}", {**GREEDY, "max_tokens": 12 + k})
        return [t async for batch in handle.batches(4) for event in batch for t in event.token_ids]

    async def all_streams() -> list[list[int]]:
        return await asyncio.gather(*(stream(k) for k in range(4)))

    assert [len(ids) for ids in asyncio.run(all_streams())] == [12, 13, 14, 15]


def test_errors_are_raised_before_anything_is_sent(engine):
    with pytest.raises(PromptTooLong):
        engine.add_request(list(range(96)), GREEDY)
    with pytest.raises(ValueError, match="vocab|\\[0,"):
        engine.add_request([10**9], GREEDY)
    long = {**GREEDY, "max_tokens": 80}
    handles = [engine.add_request("hold a slot", long) for _ in range(4 + 2)]  # slots + queue
    with pytest.raises(QueueFull):
        engine.add_request("one too many", GREEDY)
    for handle in handles:
        handle.cancel()
    assert {h.result(30).finish_reason for h in handles} == {"cancelled"}
    engine.add_request("room again", GREEDY).result(30)


def test_a_cancel_reaches_the_child_and_frees_the_slot(engine):
    handle = engine.add_request("cancel me", {**GREEDY, "max_tokens": 80})
    events = iter(handle)
    next(events)  # generating
    handle.cancel()
    last = list(events)[-1]
    assert last.finish_reason == "cancelled" and last.usage.completion_tokens < 80
    deadline = time.monotonic() + 10
    while engine.free_slots != 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.free_slots == 4


def test_a_child_that_dies_fails_its_requests_and_health(model_dir):
    process = EngineProcess(model_dir, max_batch_size=2, max_len=96, max_queue=2, num_threads=1)
    try:
        handle = process.add_request("long", {**GREEDY, "max_tokens": 80})
        process._process.kill()
        with pytest.raises(RequestFailed, match="engine process ended"):
            handle.result(30)
        assert not process.is_running
        with pytest.raises(EngineStopped):
            process.add_request("after", GREEDY)
    finally:
        process.stop()


def test_stop_fails_what_is_left_with_engine_stopped(model_dir):
    process = EngineProcess(model_dir, max_batch_size=2, max_len=96, max_queue=2, num_threads=1)
    handle = process.add_request("long", {**GREEDY, "max_tokens": 80})
    process.stop()
    with pytest.raises(EngineStopped):
        handle.result(30)
    assert not process.is_running and process._process.poll() is not None
