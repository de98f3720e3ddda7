"""``GET /metrics`` of the OpenAI app: scraped over HTTP after real requests and parsed with
``prometheus_client``'s own parser; the counters equal what the responses' usage reported."""

from __future__ import annotations

import asyncio

import pytest
import torch

from moe_fixtures import save_tiny_model_dir

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
parser = pytest.importorskip("prometheus_client.parser")

from raypress.inference.engine import Engine  # noqa: E402
from raypress.serving.openai_app import create_app  # noqa: E402
from raypress.serving.uvicorn_thread import serve_in_thread  # noqa: E402

KEY = "metrics-key"
pytestmark = pytest.mark.timeout(120)
HISTOGRAMS = ["raypress:time_to_first_token_seconds", "raypress:inter_token_latency_seconds",
              "raypress:e2e_request_latency_seconds", "raypress:request_queue_time_seconds"]
GAUGES = ["raypress:num_requests_running", "raypress:num_requests_waiting", "raypress:kv_cache_usage_perc"]
COUNTERS = ["raypress:prompt_tokens", "raypress:generation_tokens"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    torch.set_num_threads(1)
    return save_tiny_model_dir(tmp_path_factory.mktemp("tiny"))


def _scrape(url: str) -> dict[str, dict[str, float]]:
    """family -> {sample name (+ le): value}, every sample checked to carry the model label."""
    response = httpx.get(f"{url}/metrics", timeout=10)  # open: scrapers carry no key
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    out: dict[str, dict[str, float]] = {}
    for family in parser.text_string_to_metric_families(response.text):
        for sample in family.samples:
            assert sample.labels["model_name"] == "tiny", sample
            key = sample.name + (f"[{sample.labels['le']}]" if "le" in sample.labels else "")
            out.setdefault(family.name, {})[key] = sample.value
    return out


def test_metrics_count_what_was_served(model_dir):
    calls: list[object] = []
    engine = Engine.from_pretrained(model_dir, max_batch_size=4, max_len=96, max_queue=16,
                                    on_request_finished=calls.append)  # an existing callback keeps running
    try:
        with serve_in_thread(create_app(engine, "tiny", api_key=KEY)) as srv:
            empty = _scrape(srv.url)
            for name in HISTOGRAMS + GAUGES + COUNTERS:
                assert name in empty, name
            assert empty["raypress:prompt_tokens"]["raypress:prompt_tokens_total"] == 0

            async def traffic() -> list[object]:
                client = openai.AsyncOpenAI(base_url=f"{srv.url}/v1", api_key=KEY, max_retries=0)
                calls_ = [client.completions.create(model="tiny", prompt=f"question {i}", max_tokens=3 + i,
                                                    temperature=0, extra_body={"ignore_eos": True})
                          for i in range(6)]
                calls_.append(client.completions.create(model="tiny", prompt="score me", max_tokens=0, echo=True,
                                                        logprobs=1))
                calls_.append(client.chat.completions.create(model="tiny", max_tokens=4, n=2, temperature=0,
                                                             messages=[{"role": "user", "content": "hi"}],
                                                             extra_body={"ignore_eos": True}))
                results = await asyncio.gather(*calls_)
                await client.close()
                return list(results)

            results = asyncio.run(traffic())
            prompt = sum(r.usage.prompt_tokens for r in results)
            generated = sum(r.usage.completion_tokens for r in results)
            requests = 6 + 1 + 2  # engine requests: the chat's n=2 are two
            scraped = _scrape(srv.url)
    finally:
        engine.stop()
    assert scraped["raypress:prompt_tokens"]["raypress:prompt_tokens_total"] == prompt
    assert scraped["raypress:generation_tokens"]["raypress:generation_tokens_total"] == generated
    e2e = scraped["raypress:e2e_request_latency_seconds"]
    assert e2e["raypress:e2e_request_latency_seconds_count"] == requests
    assert e2e["raypress:e2e_request_latency_seconds_bucket[+Inf]"] == requests
    assert e2e["raypress:e2e_request_latency_seconds_sum"] > 0
    queue = scraped["raypress:request_queue_time_seconds"]
    assert queue["raypress:request_queue_time_seconds_count"] == requests
    ttft = scraped["raypress:time_to_first_token_seconds"]
    assert ttft["raypress:time_to_first_token_seconds_count"] == requests - 1  # the scored prompt made no token
    gaps = sum(r.usage.completion_tokens - 1 for r in results[:6]) + 2 * 3  # chat: 2 choices × 4 tokens
    assert results[-1].usage.completion_tokens == 8
    itl = scraped["raypress:inter_token_latency_seconds"]
    assert itl["raypress:inter_token_latency_seconds_count"] == gaps
    for name in GAUGES:  # everything finished: nothing running, waiting or holding the cache
        assert list(scraped[name].values()) == [0.0], name
    assert len(calls) == requests


def test_gauges_read_the_engine_live_and_two_apps_keep_their_own_registries(model_dir):
    engine = Engine.from_pretrained(model_dir, max_batch_size=4, max_len=96, max_queue=16)
    try:
        first, second = create_app(engine, "tiny"), create_app(engine, "tiny")  # no duplicate-series error
        assert first.state.metrics.registry is not second.state.metrics.registry
        with serve_in_thread(first) as srv:
            with engine._step_lock:  # freeze the step loop: both wait
                handles = [engine.add_request("abc", {"max_tokens": 2}) for _ in range(2)]
                scraped = _scrape(srv.url)
            assert scraped["raypress:num_requests_waiting"]["raypress:num_requests_waiting"] == 2
            assert scraped["raypress:num_requests_running"]["raypress:num_requests_running"] == 0
            for handle in handles:
                handle.result(timeout=30)
            slot = engine.cache.allocate()  # one of four slots held
            try:
                assert _scrape(srv.url)["raypress:kv_cache_usage_perc"]["raypress:kv_cache_usage_perc"] == 0.25
            finally:
                engine.cache.free(slot)
    finally:
        engine.stop()
