"""The OpenAI-compatible API over a real engine and a real HTTP server (uvicorn on a thread, no Ray),
driven by the real ``openai`` client where it can be and by raw HTTP for what a client never sends."""

from __future__ import annotations

import asyncio
import json

import pytest


openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from raypress.inference.engine import Engine  # noqa: E402
from raypress.serving.openai_app import create_app  # noqa: E402
from raypress.serving.uvicorn_thread import serve_in_thread  # noqa: E402

KEY = "test-key"
pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def model_dir(tiny_model_dir):
    return tiny_model_dir


@pytest.fixture(scope="module")
def server(model_dir):
    engine = Engine.from_pretrained(model_dir, max_batch_size=8, max_len=96, max_queue=32)
    with serve_in_thread(create_app(engine, "tiny", api_key=KEY)) as srv:
        yield srv
    engine.stop()


@pytest.fixture
def client(server):
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)


def _post(server, path: str, body: object, key: str | None = KEY) -> httpx.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(f"{server.url}{path}", content=content,
                      headers={**headers, "Content-Type": "application/json"}, timeout=30)


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
def test_coalesced_streams_give_the_same_greedy_text_in_fewer_chunks(client, endpoint):
    """``stream_interval`` (a raypress extension, vLLM's ``--stream-interval``): the first token at once,
    then chunks of up to N tokens; the text, finish reason and usage are those of one chunk per token."""
    def stream(interval: int | None) -> list:
        extra = {"ignore_eos": True, **({"stream_interval": interval} if interval else {})}
        kwargs = dict(model="tiny", max_tokens=24, temperature=0, stream=True,
                      stream_options={"include_usage": True}, extra_body=extra)
        if endpoint == "chat":
            return list(client.chat.completions.create(messages=[{"role": "user", "content": "The quick"}], **kwargs))
        return list(client.completions.create(prompt="The quick brown", **kwargs))

    def text(chunks: list) -> str:
        if endpoint == "chat":
            return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return "".join(c.choices[0].text for c in chunks if c.choices)

    one, eight = stream(None), stream(8)
    assert text(one) == text(eight) and text(one)
    assert one[-1].usage.completion_tokens == eight[-1].usage.completion_tokens == 24
    content = [c for c in eight if c.choices and (c.choices[0].text if endpoint == "completions"
                                                  else c.choices[0].delta.content)]
    assert len(content) <= 1 + 24 // 8 + 1  # the first token, three of eight, the finish


def test_models_and_health(client, server):
    models = client.models.list()
    assert [m.id for m in models.data] == ["tiny"]
    health = httpx.get(f"{server.url}/health").json()  # open without a key: probes have none
    assert health["status"] == "ok" and health["model"] == "tiny"


def test_completion_stream_joins_to_the_same_text_as_non_stream(client):
    kwargs = dict(model="tiny", prompt="The quick brown", max_tokens=12, temperature=0)
    whole = client.completions.create(**kwargs)
    assert whole.object == "text_completion" and whole.choices[0].finish_reason in {"stop", "length"}
    assert whole.usage.prompt_tokens > 0 and whole.usage.completion_tokens >= 1
    chunks = list(client.completions.create(**kwargs, stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole.choices[0].text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == whole.usage.completion_tokens
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == whole.choices[0].finish_reason


def test_raw_stream_is_server_sent_events_ending_in_done(server):
    with httpx.stream("POST", f"{server.url}/v1/completions", headers={"Authorization": f"Bearer {KEY}"},
                      json={"model": "tiny", "prompt": "Mixture", "max_tokens": 5, "stream": True}) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    assert json.loads(lines[0][6:])["object"] == "text_completion"


def test_chat_completion_stream_and_non_stream(client):
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "question: 2 + 2 ="}]
    whole = client.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=0)
    assert whole.object == "chat.completion" and whole.choices[0].message.role == "assistant"
    stream = list(client.chat.completions.create(model="tiny", messages=messages, max_tokens=8, temperature=0,
                                                 stream=True))
    assert stream[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in stream) == whole.choices[0].message.content
    assert stream[-1].choices[0].finish_reason == whole.choices[0].finish_reason
    assert all(c.object == "chat.completion.chunk" for c in stream)


def test_several_prompts_and_n_choices(client):
    out = client.completions.create(model="tiny", prompt=["The quick", "Continuous"], max_tokens=4,
                                    temperature=0)
    assert [c.index for c in out.choices] == [0, 1]
    alone = client.completions.create(model="tiny", prompt="Continuous", max_tokens=4, temperature=0)
    assert out.choices[1].text == alone.choices[0].text
    sampled = client.completions.create(model="tiny", prompt="The", max_tokens=6, n=3, seed=7, temperature=1.0)
    again = client.completions.create(model="tiny", prompt="The", max_tokens=6, n=3, seed=7, temperature=1.0)
    assert [c.text for c in sampled.choices] == [c.text for c in again.choices]  # seeded: reproducible
    assert len(sampled.choices) == 3 and 3 <= sampled.usage.completion_tokens <= 18
    assert sampled.usage.prompt_tokens == 3 * again.usage.prompt_tokens // 3


def test_token_id_prompt_and_stop_string(client, model_dir):
    from raypress.models.bpe_tokenizer import load_tokenizer

    ids = load_tokenizer(model_dir).encode("The quick")
    by_ids = client.completions.create(model="tiny", prompt=ids, max_tokens=6, temperature=0)
    by_text = client.completions.create(model="tiny", prompt="The quick", max_tokens=6, temperature=0)
    assert by_ids.choices[0].text == by_text.choices[0].text
    full = by_text.choices[0].text
    if len(full) >= 2:
        stop = full[1]
        cut = client.completions.create(model="tiny", prompt="The quick", max_tokens=6, temperature=0, stop=[stop])
        assert cut.choices[0].text == full[: full.index(stop)]
        assert cut.choices[0].finish_reason == "stop"


def test_sixteen_concurrent_requests_complete_and_match_their_solo_runs(server):
    prompts = [f"question: {i} + {i} =" for i in range(16)]

    async def main() -> list[str]:
        client = openai.AsyncOpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)
        results = await asyncio.gather(*(client.completions.create(model="tiny", prompt=p, max_tokens=10,
                                                                   temperature=0) for p in prompts))
        await client.close()
        return [r.choices[0].text for r in results]

    together = asyncio.run(main())
    solo_client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY, max_retries=0)
    solo = [solo_client.completions.create(model="tiny", prompt=p, max_tokens=10, temperature=0).choices[0].text
            for p in prompts[:4]]
    assert len(together) == 16
    assert together[:4] == solo


@pytest.mark.parametrize("body,status,param", [
    ({"model": "nope", "prompt": "x"}, 404, "model"),
    ({"model": "tiny", "prompt": "x", "max_tokens": -1}, 400, "max_tokens"),
    ({"model": "tiny", "prompt": "x", "max_tokens": 500}, 400, "max_tokens"),
    ({"model": "tiny", "prompt": "word " * 200}, 400, "prompt"),
    ({"model": "tiny", "prompt": []}, 400, "prompt"),
    ({"model": "tiny", "prompt": "x", "max_tokenz": 3}, 400, "max_tokenz"),
    ({"model": "tiny", "prompt": "x", "logprobs": 21}, 400, "logprobs"),
    ({"model": "tiny", "prompt": "x", "presence_penalty": 0.5}, 400, "presence_penalty"),
    ({"model": "tiny", "prompt": [999999]}, 400, "prompt"),
])
def test_bad_completion_requests_get_openai_errors(server, body, status, param):
    response = _post(server, "/v1/completions", body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["message"]


def test_malformed_json_unknown_route_and_missing_key(server, client):
    bad = _post(server, "/v1/completions", b'{"model": "tiny", "prompt": ')
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]["message"]
    assert _post(server, "/v1/nothing", {}).status_code == 404
    unauthorised = _post(server, "/v1/completions", {"model": "tiny", "prompt": "x"}, key=None)
    assert unauthorised.status_code == 401 and unauthorised.json()["error"]["code"] == "invalid_api_key"
    assert _post(server, "/v1/completions", {"model": "tiny", "prompt": "x"}, key="wrong").status_code == 401
    chat = _post(server, "/v1/chat/completions", {"model": "tiny", "messages": []})
    assert chat.status_code == 400 and chat.json()["error"]["param"] == "messages"
    ok = client.completions.create(model="tiny", prompt="still serving", max_tokens=2)
    assert ok.choices[0].text is not None  # the server kept serving after every bad request


def test_engine_steps_route_reports_batches_and_experts(server, client):
    before = httpx.get(f"{server.url}/raypress/v1/steps", headers={"Authorization": f"Bearer {KEY}"}).json()
    client.completions.create(model="tiny", prompt="experts", max_tokens=4, temperature=0)
    after = httpx.get(f"{server.url}/raypress/v1/steps", params={"after": before["last"]},
                      headers={"Authorization": f"Bearer {KEY}"}).json()
    steps = after["steps"]
    assert steps and all(s["step"] > before["last"] for s in steps)
    prefill = [s for s in steps if s["admitted"]]
    assert prefill and len(prefill[0]["prefill_experts"]) == 2  # two layers
    assert all(1 <= e <= 4 for s in steps for e in s["decode_experts"])
    info = httpx.get(f"{server.url}/raypress/v1/engine", headers={"Authorization": f"Bearer {KEY}"}).json()
    assert info["config"]["num_local_experts"] == 4 and info["dtype"] == "float32"


def test_tokenize_route_counts_like_completions_and_rejects_bad_bodies(server, client):
    prompts = ["The quick brown", "Mixture-of-experts layers route each token", "x"]
    answer = _post(server, "/raypress/v1/tokenize", {"prompts": prompts})
    assert answer.status_code == 200
    body = answer.json()
    assert body["max_len"] == 96 and len(body["counts"]) == 3
    for prompt, count in zip(prompts, body["counts"]):  # the count a completion's usage reports
        usage = client.completions.create(model="tiny", prompt=prompt, max_tokens=1, temperature=0).usage
        assert count == usage.prompt_tokens > 0
    for bad in ({"prompts": []}, {"prompts": "one string"}, {"prompts": [1, 2]}, {}, {"prompts": ["a"], "x": 1}):
        answer = _post(server, "/raypress/v1/tokenize", bad)
        assert answer.status_code == 400 and answer.json()["error"]["type"] == "invalid_request_error", bad
    assert _post(server, "/raypress/v1/tokenize", b"{not json").status_code == 400
    assert _post(server, "/raypress/v1/tokenize", {"prompts": ["a"]}, key=None).status_code == 401
    assert _post(server, "/raypress/v1/tokenize", {"prompts": ["a"]}).status_code == 200  # still serving


def test_full_queue_answers_503_and_recovers(model_dir):
    engine = Engine.from_pretrained(model_dir, max_batch_size=1, max_len=96, max_queue=1)
    body = {"model": "tiny", "prompt": "The", "max_tokens": 4}
    with serve_in_thread(create_app(engine, "tiny")) as srv:

        async def flood() -> list[int]:
            async with httpx.AsyncClient(timeout=60) as http:
                with engine._step_lock:  # freeze the step loop: nothing leaves the queue
                    first = asyncio.create_task(http.post(f"{srv.url}/v1/completions", json=body))
                    while engine.num_waiting < 1:
                        await asyncio.sleep(0.01)
                    second = await http.post(f"{srv.url}/v1/completions", json=body)
                    busy = second.json()["error"]
                    assert busy["type"] == "server_overloaded" and second.headers["retry-after"] == "1"
                return [(await first).status_code, second.status_code]

        first_status, second_status = asyncio.run(flood())
        assert (first_status, second_status) == (200, 503)
        ok = httpx.post(f"{srv.url}/v1/completions", json=body, timeout=30)
        assert ok.status_code == 200  # serving again once the queue drained
    engine.stop()
