"""The LLM on real Ray Serve: deployed by the ``serve_llm`` stage (with a bearer token), driven by
the real ``openai`` client; Ray metrics exported; a Serve config file deployed the way
``raypress serve CONFIG`` does; the stage's cleanup takes the app down."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest
import yaml

from moe_fixtures import save_tiny_model_dir

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")

from raypress.artifacts import ModelArtifact  # noqa: E402
from raypress.operators.base import RunContext  # noqa: E402
from raypress.serving.serve_llm import ServeLLM, ServeLLMParams  # noqa: E402
from raypress.serving.uvicorn_thread import free_port  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
KEY_ENV = "RAYPRESS_TEST_LLM_KEY"
KEY = "integration-secret"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return save_tiny_model_dir(tmp_path_factory.mktemp("served"))


@pytest.fixture(scope="module")
def endpoint(ray_session, model_dir, tmp_path_factory):
    """The stage's Report while the app runs; afterwards the deferred cleanup must remove it."""
    from ray import serve

    os.environ[KEY_ENV] = KEY
    run_dir = tmp_path_factory.mktemp("run")
    events: list[dict] = []
    ctx = RunContext(run_dir=str(run_dir), node_id="endpoint", emit=events.append)
    stage = ServeLLM(ServeLLMParams(port=free_port(), model_name="tiny", api_key_env=KEY_ENV,
                                    max_batch_size=8, max_len=96, max_queue=32))
    report = stage.run({"model": ModelArtifact(str(model_dir))}, ctx)
    yield report, events
    for cleanup in reversed(ctx.cleanups):
        cleanup()
    assert "endpoint" not in serve.status().applications
    serve.shutdown()


@pytest.fixture
def client(endpoint):
    report, _ = endpoint
    return openai.OpenAI(base_url=report.metrics["base_url"], api_key=KEY, max_retries=0)


def test_stage_report_names_a_live_endpoint(endpoint):
    report, events = endpoint
    m = report.metrics
    assert m["url"].startswith("http://127.0.0.1:") and m["model"] == "tiny" and m["api_key_env"] == KEY_ENV
    assert KEY not in Path(report.path).read_text()  # the secret never lands in the run's files
    assert m["engine"]["config"]["num_local_experts"] == 4 and m["engine"]["max_batch_size"] == 8
    assert [e["event"] for e in events] == ["endpoint_ready"]
    assert httpx.get(f"{m['url']}/health").json()["status"] == "ok"


def test_openai_client_stream_and_non_stream(client):
    whole = client.completions.create(model="tiny", prompt="The quick brown", max_tokens=10, temperature=0)
    streamed = client.completions.create(model="tiny", prompt="The quick brown", max_tokens=10, temperature=0,
                                         stream=True)
    assert "".join(c.choices[0].text for c in streamed if c.choices) == whole.choices[0].text
    chat = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                          max_tokens=6, temperature=0)
    chat_stream = client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=6, temperature=0, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in chat_stream) == chat.choices[0].message.content


def test_sixteen_concurrent_requests_and_greedy_alone_equals_batched(endpoint, client):
    report, _ = endpoint
    prompts = [f"question: {i} + {2 * i} =" for i in range(16)]
    alone = [client.completions.create(model="tiny", prompt=p, max_tokens=12, temperature=0).choices[0].text
             for p in prompts[:3]]

    async def together() -> list:
        aclient = openai.AsyncOpenAI(base_url=report.metrics["base_url"], api_key=KEY, max_retries=0)
        try:
            return await asyncio.gather(*(aclient.completions.create(model="tiny", prompt=p, max_tokens=12,
                                                                     temperature=0) for p in prompts))
        finally:
            await aclient.close()

    results = asyncio.run(together())
    assert len(results) == 16 and all(r.choices[0].finish_reason in {"stop", "length"} for r in results)
    assert [r.choices[0].text for r in results[:3]] == alone
    steps = httpx.get(f"{report.metrics['url']}/raypress/v1/steps", headers={"Authorization": f"Bearer {KEY}"})
    assert max(s["batch_size"] for s in steps.json()["steps"]) > 1  # they really shared decode steps


def test_bad_requests_get_4xx_while_serving(endpoint, client):
    report, _ = endpoint
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-model", prompt="x")
    with pytest.raises(openai.BadRequestError, match="max_tokens"):
        client.completions.create(model="tiny", prompt="x", max_tokens=-3)
    with pytest.raises(openai.BadRequestError, match="context"):
        client.completions.create(model="tiny", prompt="word " * 500)
    bad_json = httpx.post(f"{report.metrics['url']}/v1/chat/completions", content=b"{not json",
                          headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"})
    assert bad_json.status_code == 400 and bad_json.json()["error"]["type"] == "invalid_request_error"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=report.metrics["base_url"], api_key="wrong", max_retries=0).models.list()
    assert client.completions.create(model="tiny", prompt="ok", max_tokens=2).usage.completion_tokens >= 1


def test_engine_metrics_reach_rays_prometheus_endpoint(endpoint, client):
    import ray

    client.completions.create(model="tiny", prompt="metrics", max_tokens=5, temperature=0)
    node = ray._private.worker.global_worker.node
    url = f"http://127.0.0.1:{node.metrics_export_port}/metrics"
    wanted = ["raypress_llm_time_to_first_token_seconds", "raypress_llm_time_per_output_token_seconds",
              "raypress_llm_tokens_per_second", "raypress_llm_queue_depth", "raypress_llm_running_batch_size",
              "raypress_llm_distinct_experts"]
    deadline = time.monotonic() + 60
    missing = wanted
    while missing and time.monotonic() < deadline:
        try:
            text = httpx.get(url, timeout=5).text
            missing = [name for name in wanted if name not in text]
        except httpx.HTTPError:
            missing = wanted
        time.sleep(2)
    assert not missing, f"not exported at {url}: {missing}"


def test_serve_config_file_deploys_the_same_app(endpoint, model_dir, tmp_path):
    from ray import serve

    from raypress.serving.launch import deploy_config, load_serve_config

    report, _ = endpoint
    port = int(report.metrics["url"].rsplit(":", 1)[1])  # one Serve instance, one HTTP port
    shipped = yaml.safe_load((Path(__file__).resolve().parents[2] / "serve_configs" / "llm.yaml").read_text())
    load_serve_config_path = tmp_path / "llm.yaml"
    app = {**shipped["applications"][0], "name": "from-config", "route_prefix": "/cfg"}
    app["args"] = {**app["args"], "model": str(model_dir), "model_name": "cfg-model", "max_len": 64}
    config = {**shipped, "http_options": {"host": "127.0.0.1", "port": port}, "applications": [app]}
    load_serve_config_path.write_text(yaml.safe_dump(config))
    load_serve_config(load_serve_config_path)  # the shipped file's shape validates
    try:
        urls = deploy_config(load_serve_config_path, timeout_s=180)
        out = openai.OpenAI(base_url=urls["from-config"] + "/v1", api_key="none", max_retries=0)
        answer = out.completions.create(model="cfg-model", prompt="The quick", max_tokens=3)
        assert answer.model == "cfg-model" and answer.usage.completion_tokens >= 1
    finally:
        serve.delete("from-config")
