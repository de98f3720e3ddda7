"""What evaluation clients need of the OpenAI server, driven by the real ``openai`` client over a
real HTTP server (uvicorn on a thread, no Ray): logprobs in the completions and chat schemas,
``echo`` + ``max_tokens: 0`` prompt scoring (checked against a direct log-softmax of the model's
logits), ``n``, ``seed`` under 16 concurrent requests, ``min_p``, ``top_k``, ``ignore_eos``, stop
strings, usage in streams, OpenAI error bodies, and an error after a stream started."""

from __future__ import annotations

import asyncio
import json

import pytest
import torch


openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from raypress.inference.engine import Engine  # noqa: E402
from raypress.inference.sampling import SamplingParams, min_p_filter, sample  # noqa: E402
from raypress.serving.openai_app import create_app  # noqa: E402
from raypress.serving.uvicorn_thread import serve_in_thread  # noqa: E402

KEY = "test-key"
PROMPT = "The quick brown fox"
pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir):
    return tiny_model_dir


@pytest.fixture(scope="module")
def engine(model_dir):
    engine = Engine.from_pretrained(model_dir, max_batch_size=8, max_len=96, max_queue=32)
    yield engine
    engine.stop()


@pytest.fixture(scope="module")
def server(engine):
    with serve_in_thread(create_app(engine, "tiny", api_key=KEY)) as srv:
        yield srv


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)


@pytest.fixture(scope="module")
def reference(model_dir):
    """The same weights loaded apart from the engine: a plain full forward, no KV cache."""
    from raypress.models.moe_checkpoint import load_moe

    model, _ = load_moe(model_dir, None, "cpu")
    return model.eval()


def _direct_logprobs(model, ids: list[int]) -> torch.Tensor:
    """``(len(ids), V)``: log-softmax (temperature 1) of the logits at every position."""
    with torch.inference_mode():
        return torch.log_softmax(model(torch.tensor([ids])).float()[0], dim=-1)


def _prompt_ids(engine, text: str) -> list[int]:
    return engine.encode(text)


# ---- completions: echo, prompt scoring, logprobs ------------------------------------------------


def test_echo_max_tokens_0_scores_the_prompt_like_a_direct_log_softmax(client, engine, reference):
    ids = _prompt_ids(engine, PROMPT)
    out = client.completions.create(model="tiny", prompt=ids, echo=True, max_tokens=0, logprobs=1, temperature=0)
    choice = out.choices[0]
    lp = choice.logprobs
    assert out.usage.prompt_tokens == len(ids) and out.usage.completion_tokens == 0
    assert choice.finish_reason == "length" and choice.text == engine.decode(ids)
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == len(ids)
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    expected = _direct_logprobs(reference, ids)
    want = expected[:-1].gather(-1, torch.tensor(ids[1:])[:, None]).squeeze(-1)
    assert torch.allclose(torch.tensor(lp.token_logprobs[1:]), want, atol=1e-4)
    for position, top in enumerate(lp.top_logprobs[1:]):
        assert len(top) == 1
        best = expected[position].max().item()
        assert list(top.values())[0] == pytest.approx(best, abs=1e-4)
        greedy = int(expected[position].argmax()) == ids[position + 1]
        assert (lp.token_logprobs[position + 1] == max(top.values())) == greedy  # lm-eval's is_greedy
    assert lp.text_offset[0] == 0
    assert all(b - a == len(t) for a, b, t in zip(lp.text_offset, lp.text_offset[1:], lp.tokens))


def test_text_prompt_echo_and_generated_logprobs_follow_the_model(client, engine, reference):
    out = client.completions.create(model="tiny", prompt=PROMPT, echo=True, max_tokens=5, logprobs=3,
                                    temperature=0, extra_body={"ignore_eos": True})
    choice = out.choices[0]
    lp = choice.logprobs
    ids = _prompt_ids(engine, PROMPT)
    plain = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=5, temperature=0,
                                      extra_body={"ignore_eos": True}).choices[0].text
    assert choice.text == PROMPT + plain
    assert out.usage.completion_tokens == 5 and len(lp.tokens) == len(ids) + 5
    # greedy: every generated token is the top alternative; the generated ids come from a direct
    # greedy rollout and their logprobs equal the reference model's
    seq = list(ids)
    for _ in range(5):
        seq.append(int(_direct_logprobs(reference, seq)[-1].argmax()))
    full = _direct_logprobs(reference, seq)
    want = full[:-1].gather(-1, torch.tensor(seq[1:])[:, None]).squeeze(-1)
    assert torch.allclose(torch.tensor(lp.token_logprobs[1:]), want, atol=1e-4)
    for value, top in zip(lp.token_logprobs[len(ids):], lp.top_logprobs[len(ids):]):
        assert len(top) <= 3 and value == pytest.approx(max(top.values()), abs=1e-6)
    assert "".join(lp.tokens[len(ids):]) == plain


def test_logprobs_without_echo_cover_only_generated_tokens_and_k0_has_empty_tops(client):
    out = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=4, logprobs=0, temperature=0,
                                    extra_body={"ignore_eos": True})
    lp = out.choices[0].logprobs
    assert len(lp.tokens) == out.usage.completion_tokens == 4
    assert all(top == {} for top in lp.top_logprobs) and all(v <= 0 for v in lp.token_logprobs)
    assert lp.text_offset[0] == 0
    none = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=2, temperature=0)
    assert none.choices[0].logprobs is None


def test_streamed_logprobs_and_echo_join_to_the_non_streamed_ones(client):
    kwargs = dict(model="tiny", prompt=PROMPT, max_tokens=6, logprobs=2, echo=True, temperature=0)
    whole = client.completions.create(**kwargs).choices[0]
    chunks = [c for c in client.completions.create(**kwargs, stream=True) if c.choices]
    assert "".join(c.choices[0].text for c in chunks) == whole.text
    tokens = [t for c in chunks for t in c.choices[0].logprobs.tokens]
    values = [v for c in chunks for v in c.choices[0].logprobs.token_logprobs]
    offsets = [o for c in chunks for o in c.choices[0].logprobs.text_offset]
    assert tokens == whole.logprobs.tokens and offsets == whole.logprobs.text_offset
    assert values[0] is None and values[1:] == pytest.approx(whole.logprobs.token_logprobs[1:], abs=1e-6)


def test_sampled_tokens_report_the_raw_distribution_not_the_sampling_one(engine, reference):
    """temperature 0.5 + top_k 5 sample; the logprobs are still the model's log-softmax at temperature 1."""
    ids = _prompt_ids(engine, PROMPT)
    params = SamplingParams(max_tokens=6, temperature=0.5, top_k=5, seed=11, logprobs=2, ignore_eos=True)
    done = engine.add_request(ids, params).result(timeout=60)
    assert done.logprobs is not None and len(done.logprobs) == len(done.token_ids) == 6
    full = _direct_logprobs(reference, ids + done.token_ids)
    for step, entry in enumerate(done.logprobs):
        row = full[len(ids) - 1 + step]
        assert entry.token_id == done.token_ids[step]
        assert entry.logprob == pytest.approx(row[entry.token_id].item(), abs=1e-4)
        assert [t for t, _ in entry.top] == row.topk(2).indices.tolist()


# ---- chat logprobs --------------------------------------------------------------------------------


MESSAGES = [{"role": "user", "content": "question: 2 + 2 ="}]


def test_chat_logprobs_schema_and_stream(client):
    whole = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=6, temperature=0,
                                           logprobs=True, top_logprobs=3)
    content = whole.choices[0].logprobs.content
    assert len(content) == whole.usage.completion_tokens
    for entry in content:
        assert entry.bytes == list(entry.token.encode())
        assert len(entry.top_logprobs) == 3
        assert entry.top_logprobs[0].logprob >= entry.top_logprobs[1].logprob >= entry.top_logprobs[2].logprob
        assert entry.logprob == pytest.approx(entry.top_logprobs[0].logprob, abs=1e-6)  # greedy
        assert all(t.bytes == list(t.token.encode()) for t in entry.top_logprobs)
    streamed = [c for c in client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=6,
                                                          temperature=0, logprobs=True, top_logprobs=3,
                                                          stream=True) if c.choices]
    joined = [e for c in streamed if c.choices[0].logprobs for e in c.choices[0].logprobs.content]
    assert [e.token for e in joined] == [e.token for e in content]
    assert [e.logprob for e in joined] == pytest.approx([e.logprob for e in content], abs=1e-6)
    plain = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2, temperature=0,
                                           logprobs=True)
    assert all(e.top_logprobs == [] for e in plain.choices[0].logprobs.content)
    off = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2, temperature=0)
    assert off.choices[0].logprobs is None


# ---- sampling: n, seed, min_p, top_k, ignore_eos, stop, usage ------------------------------------


def test_same_seed_same_output_under_16_concurrent_requests(server, client):
    kwargs = dict(model="tiny", prompt=PROMPT, max_tokens=8, temperature=1.0, extra_body={"ignore_eos": True})

    async def main() -> list[str]:
        aclient = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)
        seeds = [5] * 12 + [6, 7, 8, 9]  # mixed into the same batches
        results = await asyncio.gather(*(aclient.completions.create(**kwargs, seed=s) for s in seeds))
        await aclient.close()
        return [r.choices[0].text for r in results]

    texts = asyncio.run(main())
    solo = client.completions.create(**kwargs, seed=5).choices[0].text
    assert texts[:12] == [solo] * 12
    assert len(set(texts)) > 1  # other seeds sample other text


def test_n_choices_each_with_their_logprobs_and_seeds(client):
    out = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=5, n=3, seed=3, logprobs=1,
                                    temperature=1.0, extra_body={"ignore_eos": True})
    assert [c.index for c in out.choices] == [0, 1, 2]
    assert all(len(c.logprobs.tokens) == 5 for c in out.choices) and out.usage.completion_tokens == 15
    again = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=5, n=3, seed=3, temperature=1.0,
                                      extra_body={"ignore_eos": True})
    assert [c.text for c in again.choices] == [c.text for c in out.choices]


def test_min_p_filter_follows_vllm():
    probs = torch.tensor([[0.5, 0.3, 0.15, 0.05]])
    kept = min_p_filter(probs.log(), torch.tensor([0.5])).isfinite()
    assert kept.tolist() == [[True, True, False, False]]  # 0.3 >= 0.5 * 0.5 > 0.15
    assert min_p_filter(probs.log(), torch.tensor([0.0])).isfinite().all()
    draws = sample(probs.log().expand(64, 4), torch.ones(64), torch.zeros(64, dtype=torch.long), torch.ones(64),
                   torch.rand(64, generator=torch.Generator().manual_seed(0)), min_p=torch.full((64,), 0.5))
    assert set(draws.tolist()) <= {0, 1} and set(draws.tolist()) == {0, 1}


def test_min_p_1_and_top_k_1_sample_the_greedy_text(client):
    kwargs = dict(model="tiny", prompt=PROMPT, max_tokens=8)
    greedy = client.completions.create(**kwargs, temperature=0).choices[0].text
    assert client.completions.create(**kwargs, temperature=1.0, seed=1,
                                     extra_body={"min_p": 1.0}).choices[0].text == greedy
    assert client.completions.create(**kwargs, temperature=1.0, seed=2,
                                     extra_body={"top_k": 1}).choices[0].text == greedy


def test_ignore_eos_generates_max_tokens(client):
    out = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=20, temperature=0,
                                    extra_body={"ignore_eos": True})
    assert out.usage.completion_tokens == 20 and out.choices[0].finish_reason == "length"


def test_stop_string_streamed_and_not(client):
    kwargs = dict(model="tiny", prompt=PROMPT, max_tokens=12, temperature=0, extra_body={"ignore_eos": True})
    full = client.completions.create(**kwargs).choices[0].text
    stops = [ch for ch in full[1:] if ch.strip()]
    if not stops:
        pytest.skip("the greedy text has no visible character to stop at")
    stop = stops[0]
    cut = client.completions.create(**kwargs, stop=[stop]).choices[0]
    assert cut.text == full[: full.index(stop, 1)] and cut.finish_reason == "stop"
    chunks = [c for c in client.completions.create(**kwargs, stop=stop, stream=True) if c.choices]
    assert "".join(c.choices[0].text for c in chunks) == cut.text
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_usage_in_completion_and_chat_streams(client):
    whole = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=5, temperature=0, n=2)
    chunks = list(client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=5, temperature=0, n=2,
                                                 stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].choices == [] and chunks[-1].usage.model_dump() == whole.usage.model_dump()
    assert all(c.usage is None for c in chunks[:-1])
    completion = client.completions.create(model="tiny", prompt=PROMPT, max_tokens=0, echo=True, logprobs=0)
    streamed = list(client.completions.create(model="tiny", prompt=PROMPT, max_tokens=0, echo=True, logprobs=0,
                                              stream=True, stream_options={"include_usage": True}))
    assert streamed[-1].usage.prompt_tokens == completion.usage.prompt_tokens
    assert streamed[-1].usage.completion_tokens == 0


# ---- errors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("call,param", [
    (lambda c: c.completions.create(model="tiny", prompt="x", logprobs=21), "logprobs"),
    (lambda c: c.completions.create(model="tiny", prompt="x", logprobs=-1), "logprobs"),
    (lambda c: c.completions.create(model="tiny", prompt="x", max_tokens=-1), "max_tokens"),
    (lambda c: c.completions.create(model="tiny", prompt="x", extra_body={"min_p": 1.5}), "min_p"),
    (lambda c: c.completions.create(model="tiny", prompt="x", n=0), "n"),
    (lambda c: c.completions.create(model="tiny", prompt="x", seed=-3), "seed"),
    (lambda c: c.completions.create(model="tiny", prompt="x", suffix="y"), "suffix"),
    (lambda c: c.completions.create(model="tiny", prompt="x", max_tokens=0), None),  # scoring needs echo
    (lambda c: c.completions.create(model="tiny", prompt="x", max_tokens=0, echo=True), None),  # ... and logprobs
    (lambda c: c.chat.completions.create(model="tiny", messages=MESSAGES, top_logprobs=21, logprobs=True),
     "top_logprobs"),
    (lambda c: c.chat.completions.create(model="tiny", messages=MESSAGES, top_logprobs=2), None),
    (lambda c: c.chat.completions.create(model="tiny", messages=MESSAGES, extra_body={"top_k": -1}), "top_k"),
])
def test_bad_requests_get_openai_error_bodies(client, call, param):
    with pytest.raises(openai.BadRequestError) as caught:
        call(client)
    error = caught.value.response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["message"] and error["param"] == param
    assert caught.value.status_code == 400
    assert client.completions.create(model="tiny", prompt="x", max_tokens=1).choices  # still serving


def test_unknown_model_is_a_404_error_body(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.completions.create(model="other", prompt="x")
    assert caught.value.response.json()["error"]["code"] == "model_not_found"


def test_an_error_after_the_stream_started_is_one_sse_error_line_then_done(model_dir):
    engine = Engine.from_pretrained(model_dir, max_batch_size=2, max_len=96, max_queue=4)
    real_decode = engine._decode

    def broken(batch):
        raise RuntimeError("decode exploded")

    body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 8, "temperature": 0, "stream": True,
            "ignore_eos": True}
    try:
        with serve_in_thread(create_app(engine, "tiny")) as srv:
            engine._decode = broken  # the prefill's token goes out, the first decode fails
            with httpx.stream("POST", f"{srv.url}/v1/chat/completions", json=body, timeout=60) as response:
                assert response.status_code == 200
                lines = [line for line in response.iter_lines() if line]
            assert lines[-1] == "data: [DONE]"
            payloads = [json.loads(line[6:]) for line in lines[:-1]]
            assert payloads[0]["choices"][0]["delta"]["role"] == "assistant"  # the stream had started
            errors = [p for p in payloads if "error" in p]
            assert len(errors) == 1 and payloads[-1] is errors[0]
            error = errors[0]["error"]
            assert set(error) == {"message", "type", "param", "code"} and error["type"] == "server_error"
            assert "decode exploded" in error["message"]
            client = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="unused", max_retries=0)
            with pytest.raises(openai.APIError):  # the client sees it as an error too
                list(client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=8, stream=True,
                                                    extra_body={"ignore_eos": True}))
            engine._decode = real_decode
            again = client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=4)
            assert again.choices[0].message.content is not None  # the server kept serving
            assert engine.is_running
    finally:
        engine._decode = real_decode
        engine.stop()


def test_multibyte_text_tokens_join_to_the_echoed_text_and_offsets_point_into_it(client, engine):
    prompt = "naïve café — 2 × 3 ≠ 5 😀 done"
    ids = engine.encode(prompt)
    assert any(engine.decode([t]).endswith("\ufffd") for t in ids)  # some token ends half a character
    kwargs = dict(model="tiny", prompt=prompt, echo=True, max_tokens=0, logprobs=1)
    lp = client.completions.create(**kwargs).choices[0].logprobs
    assert "".join(lp.tokens) == prompt and len(lp.tokens) == len(ids)
    assert [prompt[o:o + len(t)] for o, t in zip(lp.text_offset, lp.tokens)] == lp.tokens
    for token, value, top in zip(lp.tokens[1:], lp.token_logprobs[1:], lp.top_logprobs[1:]):
        if value == max(top.values()):  # the token is the argmax: its top key is its own text
            assert max(top, key=top.get) == token
    chunks = [c for c in client.completions.create(**kwargs, stream=True) if c.choices]
    assert [t for c in chunks for t in c.choices[0].logprobs.tokens] == lp.tokens
