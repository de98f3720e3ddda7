"""The continuous-batching engine on a tiny random MoE model (CPU fp32) with a one-char-per-token tokenizer.

The key property: a request's greedy output does not depend on what else is in the batch, on
when it arrived, or on prompt lengths around it; and it equals plain full-recompute decoding.
"""

from __future__ import annotations

import asyncio

import pytest
import torch

from moe_fixtures import tiny_config
from raypress.models.moe import MoEForCausalLM
from raypress.models.moe_config import MoEConfig
from raypress.inference.engine import Engine
from raypress.inference.requests import EngineStopped, GenerationEvent, PromptTooLong, QueueFull, RequestFailed
from raypress.inference.stats import StepRecord
from raypress.inference.text_stream import TextStream
from raypress.inference.sampling import SamplingParams

CONFIG = tiny_config(vocab_size=96, eos_token_id=None)
EOS = 95
PROMPTS = [
    "Hello world",
    "a",
    "The quick brown fox jumps",
    "xyz",
    "MoE serving",
    "0123456789abcdef",
    "ok",
    "continuous batching!",
]
GREEDY = SamplingParams(temperature=0, max_tokens=12)
pytestmark = pytest.mark.timeout(60)  # a hang in the step loop fails instead of blocking


class CharTokenizer:
    """Token i <-> chr(32 + i) (printable ASCII); 95 is EOS and decodes to nothing."""

    def encode(self, text: str) -> list[int]:
        return [ord(c) - 32 for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i + 32) for i in ids if i != EOS)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def model() -> MoEForCausalLM:
    torch.manual_seed(0)
    return MoEForCausalLM(CONFIG).eval()


def _engine(model: MoEForCausalLM, **kwargs) -> Engine:
    kwargs = {"max_batch_size": 8, "max_len": 64, **kwargs}
    return Engine(model, CharTokenizer(), **kwargs)


def _run(engine: Engine, handles, max_steps: int = 500) -> None:
    """Step by hand (no thread) until every handle has its final event."""
    for _ in range(max_steps):
        if all(h.finished for h in handles):
            return
        engine.step()
    raise AssertionError("requests did not finish")


def _alone(model: MoEForCausalLM, prompt: str, params: SamplingParams) -> list[int]:
    engine = _engine(model)
    handle = engine.add_request(prompt, params)
    _run(engine, [handle])
    return handle.result().token_ids


def _full_recompute_greedy(model: MoEForCausalLM, prompt: str, n: int) -> list[int]:
    """Oracle without KV cache or batching: rerun the whole sequence for every token."""
    ids = CharTokenizer().encode(prompt)
    out = []
    with torch.inference_mode():
        for _ in range(n):
            token = int(model(torch.tensor([ids + out]))[0, -1].argmax())
            out.append(token)
    return out


def test_alone_matches_full_recompute(model):
    for prompt in PROMPTS[:3]:
        assert _alone(model, prompt, GREEDY) == _full_recompute_greedy(model, prompt, 12)


def test_greedy_alone_equals_inside_a_batch_of_8(model):
    alone = {p: _alone(model, p, GREEDY) for p in PROMPTS}
    engine = _engine(model)
    # different prompt lengths and different max_tokens: rows leave the batch at different steps
    params = [SamplingParams(temperature=0, max_tokens=12 - (i % 3) * 4) for i in range(8)]
    handles = [engine.add_request(p, q) for p, q in zip(PROMPTS, params)]
    _run(engine, handles)
    for prompt, param, handle in zip(PROMPTS, params, handles):
        result = handle.result()
        assert result.token_ids == alone[prompt][: param.max_tokens]
        assert result.finish_reason == "length"
        assert result.usage.prompt_tokens == len(prompt)
        assert result.usage.completion_tokens == param.max_tokens
    first = engine.stats.steps[0]
    assert first.admitted == 8 and first.batch_size == 8
    assert first.prefill_tokens == sum(len(p) for p in PROMPTS)
    assert engine.cache.num_free == 8 and engine.num_running == 0


@pytest.mark.parametrize("fuse", [True, False], ids=["new-prompts-in-the-decode-forward", "prefill-forward-first"])
def test_requests_join_mid_flight(model, fuse):
    engine = _engine(model, fuse_prefill=fuse)
    early = [engine.add_request(PROMPTS[0], SamplingParams(temperature=0, max_tokens=20))]
    engine.step()
    engine.step()
    late = [engine.add_request(p, GREEDY) for p in PROMPTS[1:4]]
    engine.step()
    engine.step()
    late.append(engine.add_request(PROMPTS[4], GREEDY))
    _run(engine, early + late)
    sizes = [s.batch_size for s in engine.stats.steps]
    if fuse:  # a fused step decodes the sequences that ran before it; its new prompts get one token
        assert sizes[:5] == [1, 1, 1, 4, 4]
        assert [s.fused for s in engine.stats.steps[:5]] == [False, False, True, False, True]
        assert [s.new_tokens for s in engine.stats.steps[:5]] == [2, 1, 4, 4, 5]
    else:  # the new prompts' prefill forward, then a decode forward that includes them
        assert sizes[:5] == [1, 1, 4, 4, 5]
        assert not any(s.fused for s in engine.stats.steps)
    assert [s.admitted for s in engine.stats.steps[:5]] == [1, 0, 3, 0, 1]
    assert early[0].result().token_ids == _alone(model, PROMPTS[0], SamplingParams(temperature=0, max_tokens=20))
    for prompt, handle in zip(PROMPTS[1:5], late):
        assert handle.result().token_ids == _alone(model, prompt, GREEDY)


def test_queued_requests_wait_for_a_free_slot(model):
    engine = _engine(model, max_batch_size=2)
    handles = [engine.add_request(p, SamplingParams(temperature=0, max_tokens=3 + i)) for i, p in enumerate(PROMPTS[:5])]
    engine.step()
    assert engine.num_running == 2 and engine.num_waiting == 3
    _run(engine, handles)
    assert max(s.batch_size for s in engine.stats.steps) == 2
    for i, (prompt, handle) in enumerate(zip(PROMPTS, handles)):
        assert handle.result().token_ids == _alone(model, prompt, GREEDY)[: 3 + i]


def test_max_tokens_respected_and_events_stream(model):
    engine = _engine(model)
    handle = engine.add_request("abc", SamplingParams(temperature=0, max_tokens=5))
    _run(engine, [handle])
    events = list(handle.events(timeout=1))
    assert [len(e.token_ids) for e in events] == [1] * 5
    assert [e.finish_reason for e in events] == [None] * 4 + ["length"]
    assert events[-1].usage.completion_tokens == 5
    assert "".join(e.text for e in events) == CharTokenizer().decode([t for e in events for t in e.token_ids])


def test_stop_string_truncates(model):
    params = SamplingParams(temperature=0, max_tokens=12)
    full = _engine_text(model, PROMPTS[0], params)
    stop = full[4:6]
    cut = full.find(stop)
    engine = _engine(model)
    handle = engine.add_request(PROMPTS[0], SamplingParams(temperature=0, max_tokens=12, stop=["never seen", stop]))
    _run(engine, [handle])
    events = list(handle.events(timeout=1))
    result = _join(events)
    assert result == full[:cut]
    assert events[-1].finish_reason == "stop"
    assert len([t for e in events for t in e.token_ids]) < 12  # it stopped early


def _engine_text(model, prompt, params) -> str:
    engine = _engine(model)
    handle = engine.add_request(prompt, params)
    _run(engine, [handle])
    return handle.result().text


def _join(events: list[GenerationEvent]) -> str:
    return "".join(e.text for e in events)


def test_text_stream_holds_back_stop_prefixes():
    stream = TextStream("".join, stop=["abc"])
    assert [stream.push(c) for c in "xab"] == ["x", "", ""]  # "ab" could start "abc"
    assert stream.push("d") == "abd"
    assert [stream.push(c) for c in "ab"] == ["", ""]
    assert stream.push("c") == "" and stream.stopped and stream.text == "xabd"


def test_text_stream_holds_back_half_utf8_characters():
    stream = TextStream(lambda ids: bytes(ids).decode("utf-8", errors="replace"))
    euro = "€".encode()  # three bytes
    assert stream.push(ord("a")) == "a"
    assert [stream.push(b) for b in euro] == ["", "", "€"]


def test_eos_stops_and_is_not_text(model):
    greedy = _alone(model, PROMPTS[0], GREEDY)
    eos = greedy[3]
    engine = _engine(model, eos_token_ids=[eos])
    handle = engine.add_request(PROMPTS[0], GREEDY)
    _run(engine, [handle])
    result = handle.result()
    first = greedy.index(eos)
    assert result.token_ids == greedy[: first + 1] and result.finish_reason == "stop"
    assert result.text == CharTokenizer().decode(greedy[:first])


def test_seeded_sampling_same_alone_and_in_batch(model):
    params = SamplingParams(temperature=1.0, top_k=20, top_p=0.9, seed=1234, max_tokens=16)
    alone = _alone(model, PROMPTS[2], params)
    assert alone == _alone(model, PROMPTS[2], params)
    engine = _engine(model)
    others = [engine.add_request(p, SamplingParams(temperature=0.8, max_tokens=10)) for p in PROMPTS[:3]]
    engine.step()
    target = engine.add_request(PROMPTS[2], params)
    others += [engine.add_request(p, GREEDY) for p in PROMPTS[3:6]]
    _run(engine, others + [target])
    assert target.result().token_ids == alone
    assert _alone(model, PROMPTS[2], params.model_copy(update={"seed": 99})) != alone


def test_queue_full(model):
    engine = _engine(model, max_batch_size=1, max_queue=2)
    engine.add_request("a", GREEDY)
    engine.add_request("b", GREEDY)
    with pytest.raises(QueueFull):
        engine.add_request("c", GREEDY)
    engine.step()  # "a" takes the slot; one place in the queue frees up
    assert engine.num_waiting == 1
    engine.add_request("c", GREEDY)
    with pytest.raises(QueueFull):
        engine.add_request("d", GREEDY)


def test_prompt_too_long_and_bad_prompts(model):
    engine = _engine(model, max_len=16)
    with pytest.raises(PromptTooLong):
        engine.add_request("x" * 16, GREEDY)
    with pytest.raises(ValueError):
        engine.add_request([], GREEDY)
    with pytest.raises(ValueError):
        engine.add_request([3, 200], GREEDY)
    with pytest.raises(ValueError):
        engine.add_request("ok", {"max_tokens": -1})
    # one token of room left: exactly one is generated, then the context is full
    handle = engine.add_request("x" * 15, SamplingParams(temperature=0, max_tokens=10))
    _run(engine, [handle])
    result = handle.result()
    assert len(result.token_ids) == 1 and result.finish_reason == "length"


def test_context_limit_ends_generation(model):
    engine = _engine(model, max_len=20)
    handle = engine.add_request("x" * 12, SamplingParams(temperature=0, max_tokens=100))
    _run(engine, [handle])
    assert handle.result().usage.completion_tokens == 8
    assert handle.result().finish_reason == "length"


def test_cancel_frees_the_slot(model):
    engine = _engine(model, max_batch_size=2)
    running = engine.add_request("abc", SamplingParams(temperature=0, max_tokens=50))
    other = engine.add_request("d", SamplingParams(temperature=0, max_tokens=50))
    queued = [engine.add_request(p, GREEDY) for p in ("e", "f")]
    engine.step()
    engine.step()
    assert engine.cache.num_free == 0 and engine.num_waiting == 2
    queued[1].cancel()  # still queued: leaves the queue at once
    assert engine.num_waiting == 1 and queued[1].finished
    assert list(queued[1].events(timeout=1))[-1].finish_reason == "cancelled"
    running.cancel()
    record = engine.step()  # retired before the forwards: its slot goes to the queued request
    assert record.admitted == 1 and record.batch_size == 1 and record.fused and engine.num_waiting == 0
    events = list(running.events(timeout=1))
    assert events[-1].finish_reason == "cancelled"
    assert events[-1].usage.completion_tokens == 3  # prefill + decode in step 1, decode in step 2
    other.cancel()
    engine.step()
    assert engine.cache.num_free == 1  # only the queued request still holds a slot
    _run(engine, [queued[0]])
    assert engine.cache.num_free == 2 and engine.num_running == 0
    assert queued[0].result().token_ids == _alone(model, "e", GREEDY)


def test_step_records_and_metrics_callbacks(model):
    steps: list[StepRecord] = []
    finished = []
    engine = _engine(model, on_step=steps.append, on_request_finished=finished.append)
    handles = [engine.add_request(p, GREEDY) for p in PROMPTS[:4]]
    _run(engine, handles)
    assert steps == engine.stats.steps and len(steps) == 11  # 2 tokens in step 1 (prefill + decode), then 1
    first = steps[0]
    assert first.new_tokens == 8 and first.running == 4
    assert len(first.prefill_experts) == CONFIG.num_hidden_layers
    assert all(1 <= n <= CONFIG.num_local_experts for n in first.prefill_experts + first.decode_experts)
    assert first.decode_context_tokens == sum(len(p) + 1 for p in PROMPTS[:4])
    assert steps[-1].finished == 4 and steps[-1].running == 0
    for step in steps:  # the forwards alone, inside their phases' times (which add sampling and hand-off)
        assert 0 < step.decode_forward_seconds <= step.decode_seconds
        assert (0 < step.prefill_forward_seconds <= step.prefill_seconds) == (step.admitted > 0)
    assert engine.stats.total_tokens == 48
    assert sorted(m.request_id for m in finished) == sorted(h.request_id for h in handles)
    for metrics in finished:
        assert metrics.completion_tokens == 12 and metrics.finish_reason == "length"
        assert 0 < metrics.ttft_seconds <= metrics.e2e_seconds and metrics.tpot_seconds > 0


def test_a_failing_callback_does_not_stop_the_engine(model):
    def broken(_record):
        raise RuntimeError("exporter down")

    engine = _engine(model, on_step=broken)
    handle = engine.add_request("abc", GREEDY)
    _run(engine, [handle])
    assert handle.result().usage.completion_tokens == 12


def test_a_failing_forward_fails_its_requests_and_frees_their_slots(model, monkeypatch):
    engine = _engine(model, max_batch_size=2)
    handles = [engine.add_request(p, GREEDY) for p in ("ab", "cd")]

    def broken(batch):
        raise RuntimeError("device lost")

    monkeypatch.setattr(engine, "_decode", broken)
    engine.step()
    for handle in handles:
        with pytest.raises(RequestFailed, match="device lost"):
            handle.result(timeout=1)
    assert engine.cache.num_free == 2 and engine.num_running == 0
    monkeypatch.undo()
    later = engine.add_request("ab", GREEDY)
    _run(engine, [later])
    assert later.result().token_ids == _alone(model, "ab", GREEDY)


async def _stream(engine: Engine, prompt: str, params: SamplingParams) -> list[GenerationEvent]:
    return [event async for event in engine.generate(prompt, params)]


def test_sixteen_concurrent_requests_complete(model):
    prompts = [PROMPTS[i % 8] + str(i) for i in range(16)]
    params = [SamplingParams(temperature=0, max_tokens=8 + i % 5) for i in range(16)]
    engine = _engine(model, max_queue=16)

    async def main():
        return await asyncio.gather(*(_stream(engine, p, q) for p, q in zip(prompts, params)))

    try:
        results = asyncio.run(main())
    finally:
        engine.stop()
    for prompt, param, events in zip(prompts, params, results):
        assert events[-1].finish_reason == "length"
        assert events[-1].usage.completion_tokens == param.max_tokens
        assert [t for e in events for t in e.token_ids] == _alone(model, prompt, param)
    assert max(s.batch_size for s in engine.stats.steps) == 8
    assert engine.stats.total_requests == 16 and engine.cache.num_free == 8
    assert engine.stats.tokens_per_second(window_s=60) > 0


def test_client_disconnect_frees_the_slot(model):
    engine = _engine(model)

    async def main():
        received = []
        stream = engine.generate("abc", SamplingParams(temperature=0, max_tokens=200))
        async for event in stream:
            received.append(event)
            if len(received) == 2:
                break
        await stream.aclose()  # what a server does when the client goes away
        for _ in range(200):
            if engine.num_running == 0:
                break
            await asyncio.sleep(0.01)
        return received

    try:
        received = asyncio.run(main())
        assert len(received) == 2 and engine.num_running == 0 and engine.cache.num_free == 8
        assert engine.stats.requests[-1].finish_reason == "cancelled"
    finally:
        engine.stop()


def test_stop_fails_unfinished_requests(model):
    engine = _engine(model, max_batch_size=1)
    handle = engine.add_request("abc", GREEDY)
    engine.stop()
    with pytest.raises(EngineStopped):
        handle.result(timeout=1)
    assert engine.cache.num_free == 1
    with pytest.raises(EngineStopped):
        engine.add_request("abc", GREEDY)


def test_background_thread_serves_sync_handles(model):
    with _engine(model) as engine:
        handle = engine.add_request(PROMPTS[0], GREEDY)
        result = handle.result(timeout=30)
    assert result.token_ids == _alone(model, PROMPTS[0], GREEDY)
    assert engine.num_running == 0 and engine.cache.num_free == 8


def test_from_pretrained_serves_a_saved_model_directory(tmp_path):
    pytest.importorskip("tokenizers")
    pytest.importorskip("safetensors")
    from raypress.models.bpe_tokenizer import train_bpe_tokenizer
    from raypress.models.moe_checkpoint import save_moe

    tokenizer = train_bpe_tokenizer(["héllo wörld, continuous batching"] * 20, vocab_size=300)
    config = MoEConfig(**{**CONFIG.to_dict(), "vocab_size": tokenizer.vocab_size, "eos_token_id": tokenizer.eos_token_id})
    torch.manual_seed(1)
    save_moe(MoEForCausalLM(config).eval(), tmp_path)
    tokenizer.save(tmp_path)
    engine = Engine.from_pretrained(tmp_path, max_batch_size=2, max_len=64)
    assert tokenizer.eos_token_id in engine.eos_token_ids
    handle = engine.add_request("héllo", SamplingParams(temperature=0, max_tokens=6, ignore_eos=True))
    assert handle.prompt_ids == tokenizer.encode("héllo")
    _run(engine, [handle])
    result = handle.result()
    assert len(result.token_ids) == 6
    assert result.text == tokenizer.decode(result.token_ids)  # byte-level: streamed pieces join exactly


def test_the_event_loop_is_woken_once_per_batch_of_events_and_once_per_result():
    """Each wake-up of the serving loop costs its thread the GIL, which the step thread needs: events
    that arrive before the consumer runs share one wake-up, and ``aresult`` wakes only at the end."""
    import threading

    from raypress.inference.requests import RequestHandle, Usage

    class Owner:
        def _cancel(self, handle: RequestHandle) -> None:
            pass

    def events(n: int) -> list[GenerationEvent]:
        return [GenerationEvent([i], f"t{i}") for i in range(n - 1)] + [
            GenerationEvent([n - 1], "end", "length", Usage(1, n))]

    async def main() -> tuple[list[str], int, str, int]:
        loop = asyncio.get_running_loop()
        wakeups = {"stream": 0, "result": 0}

        def counting(name: str):
            class Loop:
                def call_soon_threadsafe(self, fn, *args):
                    wakeups[name] += 1
                    return loop.call_soon_threadsafe(fn, *args)
            return Loop()

        streamed = RequestHandle(Owner(), "s", [1], SamplingParams())
        streamed._loop = counting("stream")
        feeder = threading.Thread(target=lambda: [streamed._deliver(e) for e in events(5)])
        feeder.start()
        feeder.join()  # all five arrive before the consumer runs
        texts = [e.text async for e in streamed]

        result_only = RequestHandle(Owner(), "r", [1], SamplingParams())
        result_only._loop = counting("result")
        waiting = asyncio.ensure_future(result_only.aresult())
        await asyncio.sleep(0)  # the consumer is waiting before any event arrives

        def feed_slowly() -> None:
            for event in events(6):
                result_only._deliver(event)
                threading.Event().wait(0.005)

        await asyncio.to_thread(feed_slowly)
        completion = await waiting
        return texts, wakeups["stream"], completion.text, wakeups["result"]

    texts, stream_wakeups, text, result_wakeups = asyncio.run(main())
    assert texts == ["t0", "t1", "t2", "t3", "end"] and stream_wakeups == 1
    assert text == "t0t1t2t3t4end" and result_wakeups == 1
