"""A server one request cannot stall: a 10 MB prompt tokenises off the event loop, bodies over the
limit get 413, every 503 says when to retry, and `serve` warns when it listens unauthenticated."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
import torch

from moe_fixtures import save_tiny_model_dir

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")

from fastapi.testclient import TestClient  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from raypress.inference.engine import Engine  # noqa: E402
from raypress.serving.http_limits import RETRY_AFTER_S  # noqa: E402
from raypress.serving.openai_app import create_app  # noqa: E402
from raypress.serving.uvicorn_thread import serve_in_thread  # noqa: E402

pytestmark = pytest.mark.timeout(180)
SMALL = {"model": "tiny", "prompt": "The", "max_tokens": 5}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    torch.set_num_threads(1)
    return save_tiny_model_dir(tmp_path_factory.mktemp("tiny"))


@pytest.fixture
def engine(model_dir):
    engine = Engine.from_pretrained(model_dir, max_batch_size=4, max_len=96, max_queue=8)
    yield engine
    engine.stop()


class SpyTokenizer:
    """The engine's tokenizer, saying when a long text starts tokenising (either entry point)."""

    def __init__(self, tokenizer: Any, long_chars: int) -> None:
        self._tokenizer, self._long = tokenizer, long_chars
        self.long_started = threading.Event()
        self.started_at = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def _saw(self, chars: int) -> None:
        if chars >= self._long:
            self.started_at = time.perf_counter()
            self.long_started.set()

    def encode(self, text: str, *args: Any, **kwargs: Any) -> Any:
        self._saw(len(text))
        return self._tokenizer.encode(text, *args, **kwargs)

    def encode_batch(self, texts: list[str], *args: Any, **kwargs: Any) -> Any:
        self._saw(sum(map(len, texts)))
        return self._tokenizer.encode_batch(texts, *args, **kwargs)


def _done_at(call: Any) -> tuple[Any, float]:
    result = call()
    return result, time.perf_counter()


# ---- 1. no request blocks the event loop ---------------------------------------------------------


def test_health_and_a_small_completion_answer_while_a_10mb_prompt_tokenizes(engine):
    spy = SpyTokenizer(engine.tokenizer, long_chars=1_000_000)
    engine.tokenizer = spy
    prompt = ("The quick brown fox jumps over the lazy dog. " * 230_000)[:10_000_000]
    body = json.dumps({"model": "tiny", "prompt": prompt, "max_tokens": 1}).encode()
    big: dict[str, Any] = {}
    with serve_in_thread(create_app(engine, "tiny", max_request_bytes=16 * 2**20)) as srv, \
            httpx.Client(base_url=srv.url, timeout=120) as http:
        assert http.post("/v1/completions", json=SMALL).status_code == 200  # warm: first forward compiles

        def send_big() -> None:
            big["response"] = httpx.post(f"{srv.url}/v1/completions", content=body, timeout=120,
                                         headers={"Content-Type": "application/json"})

        sender = threading.Thread(target=send_big)
        sender.start()
        assert spy.long_started.wait(60), "the 10 MB prompt never reached the tokenizer"
        # timed from the moment tokenising began: a tokenizer holding the GIL freezes this thread too
        health, health_at = _done_at(lambda: http.get("/health"))
        small, small_at = _done_at(lambda: http.post("/v1/completions", json=SMALL))
        still_tokenizing = sender.is_alive()
        sender.join(120)
    health_s, small_s = health_at - spy.started_at, small_at - health_at
    assert health.status_code == 200 and health_s < 1.0, f"/health answered {health_s:.2f} s into tokenising"
    assert small.status_code == 200 and small_s < 5.0, f"a 5-token completion took {small_s:.2f} s"
    assert still_tokenizing, "the big prompt finished before the probes: they measured nothing"
    error = big["response"].json()["error"]  # tokenised, then refused: it cannot fit the context
    assert big["response"].status_code == 400 and error["code"] == "context_length_exceeded"


def test_tokenize_route_and_chat_count_as_before(engine):
    with TestClient(create_app(engine, "tiny")) as client:
        counts = client.post("/raypress/v1/tokenize", json={"prompts": ["The quick brown", "x" * 20_000]}).json()
        usage = client.post("/v1/completions", json={**SMALL, "prompt": "The quick brown"}).json()["usage"]
        assert counts["counts"][0] == usage["prompt_tokens"] and counts["counts"][1] > 0
        chat = client.post("/v1/chat/completions", json={"model": "tiny", "max_tokens": 2,
                                                         "messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 200 and chat.json()["usage"]["prompt_tokens"] > 2
        too_long = client.post("/v1/chat/completions", json={"model": "tiny", "max_tokens": 2,
                                                             "messages": [{"role": "user", "content": "hi " * 9000}]})
        assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "context_length_exceeded"


# ---- 2. a request-body size limit -------------------------------------------------------------------


def _assert_413(response: Any, limit: int) -> None:
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["code"] == "request_too_large"
    assert error["param"] is None and str(limit) in error["message"]


def test_body_over_the_limit_gets_413_declared_or_chunked(engine):
    limit = 2048
    with serve_in_thread(create_app(engine, "tiny", max_request_bytes=limit)) as srv, \
            httpx.Client(base_url=srv.url, timeout=30) as http:
        big = {**SMALL, "prompt": "x" * 4000}
        _assert_413(http.post("/v1/completions", json=big), limit)  # Content-Length: refused unread

        def chunks():  # no Content-Length: counted as it arrives
            data = json.dumps(big).encode()
            for i in range(0, len(data), 512):
                yield data[i:i + 512]

        _assert_413(http.post("/v1/completions", content=chunks(), headers={"Content-Type": "application/json"}),
                    limit)
        _assert_413(http.post("/raypress/v1/tokenize", json={"prompts": ["y" * 3000]}), limit)
        assert http.post("/v1/completions", json=SMALL).status_code == 200  # under the limit: served
        small_chunks = iter([json.dumps(SMALL).encode()])
        assert http.post("/v1/completions", content=small_chunks,
                         headers={"Content-Type": "application/json"}).status_code == 200
        assert http.get("/health").status_code == 200


def test_limit_comes_before_auth_and_defaults_are_set(engine):
    from raypress.serving.http_limits import LLM_MAX_REQUEST_BYTES, PURIFY_MAX_REQUEST_BYTES
    from raypress.serving.llm_deployment import LLMAppArgs
    from raypress.serving.reason_app import ReasonAppArgs

    with TestClient(create_app(engine, "tiny", api_key="k", max_request_bytes=100)) as client:
        _assert_413(client.post("/v1/completions", content=b"x" * 101), 100)
        assert client.post("/v1/completions", json=SMALL).status_code == 401
    assert LLMAppArgs.model_fields["max_request_bytes"].default == LLM_MAX_REQUEST_BYTES == 4 * 2**20
    assert PURIFY_MAX_REQUEST_BYTES > LLM_MAX_REQUEST_BYTES > ReasonAppArgs.model_fields["max_request_bytes"].default


def test_purify_and_reason_apps_enforce_their_limits(tmp_path):
    from raypress.models.bridge_unet import BridgeUNet, BridgeUNetConfig, save_bridge
    from raypress.models.ddbm import VEBridge
    from raypress.serving.purify_app import PurifyAppArgs, create_purify_app
    from raypress.serving.reason_app import ReasonAppArgs, create_reason_api

    tiny = BridgeUNet(BridgeUNetConfig(base_channels=8, channel_mult=(1, 2), num_res_blocks=1, attention=False,
                                       norm_groups=4))
    save_bridge(tiny, {"objective": "bridge", "bridge": VEBridge().to_dict()}, tmp_path / "bridge")
    purify = create_purify_app(str(tmp_path / "bridge"),
                               PurifyAppArgs(model=str(tmp_path / "bridge"), max_request_bytes=1000))
    with TestClient(purify) as client:
        _assert_413(client.post("/v1/purify", content=b"\x89PNG" + b"0" * 2000,
                                headers={"Content-Type": "image/png"}), 1000)
        assert client.get("/health").status_code == 200
    reason = create_reason_api({}, ReasonAppArgs(policies={}, max_request_bytes=500))
    with TestClient(reason) as client:
        _assert_413(client.post("/v1/reason", json={"family": "arith", "question": "q" * 600}), 500)
        assert client.post("/v1/reason", json={"family": "nope", "question": "q"}).status_code == 400


# ---- 3. every 503 carries Retry-After --------------------------------------------------------------------


def test_queue_full_and_shutting_down_503s_carry_retry_after():
    """(A real full queue answering 503 with the header: tests/unit/test_openai_app.py.)"""
    from raypress.inference.requests import EngineStopped, QueueFull
    from raypress.serving.http_guards import APIError
    from raypress.serving.openai_app import _engine_error

    for error in (QueueFull("8 waiting"), EngineStopped("stopping")):
        response = _engine_error(error, "prompt").response()
        assert response.status_code == 503 and response.headers["retry-after"] == str(RETRY_AFTER_S)
    assert "retry-after" not in APIError(400, "bad").response().headers


def test_stopped_engine_health_503_carries_retry_after(engine):
    with TestClient(create_app(engine, "tiny")) as client:
        assert "retry-after" not in client.get("/health").headers
        engine.stop()
        health = client.get("/health")
    assert health.status_code == 503 and health.headers["retry-after"] == str(RETRY_AFTER_S)


def test_serve_backpressure_503_carries_retry_after(model_dir, tmp_path):
    from raypress.serving.http_limits import serve_backpressure
    from raypress.serving.llm_deployment import build_app

    config = serve_backpressure()
    assert config.status_code == 503 and config.retry_after_s == RETRY_AFTER_S
    deployment = build_app({"model": str(model_dir)})._bound_deployment  # what Serve deploys
    assert deployment.backpressure_config.retry_after_s == RETRY_AFTER_S


# ---- 4. the embedded Ray's interface (its sockets: tests/integration/test_ray_loopback.py) ---------


def test_ray_host_and_loopback_detection(monkeypatch):
    from raypress.dag.ray_session import HOST_ENV, LOOPBACK, is_loopback, ray_host

    monkeypatch.delenv(HOST_ENV, raising=False)
    assert ray_host() == LOOPBACK and ray_host("10.1.2.3") == "10.1.2.3"
    monkeypatch.setenv(HOST_ENV, "10.9.9.9")
    assert ray_host() == "10.9.9.9" and ray_host("10.1.2.3") == "10.1.2.3"
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.0.2.1") and not is_loopback("example.org")
    from raypress.dag.ray_session import _address_is_loopback

    assert _address_is_loopback("127.0.0.1:6379") and _address_is_loopback("localhost:6379")
    assert not any(_address_is_loopback(a) for a in ("auto", "ray://127.0.0.1:10001", "10.0.0.5:6379"))


# ---- 5. serve on a public interface without a key warns -----------------------------------------------


@pytest.mark.parametrize("host, key, warns", [
    ("127.0.0.1", None, False), ("localhost", None, False), ("::1", None, False),
    ("0.0.0.0", None, True), ("192.0.2.7", None, True), ("my-host", None, True), ("0.0.0.0", "KEY_VAR", False),
])
def test_exposure_warning(host, key, warns):
    from raypress.serving.launch import exposure_warning

    message = exposure_warning(host, key is not None)
    assert (message is not None) == warns
    if warns:
        assert host in message and "without authentication" in message


def test_cli_serve_warns_on_stderr_before_anything_starts(tmp_path, monkeypatch):
    from raypress.cli import app

    def no_ray(*_: Any, **__: Any) -> None:
        raise AssertionError("Ray started")

    monkeypatch.setattr("raypress.dag.ray_session.ensure_ray", no_ray)
    runner = CliRunner()
    bad_model = str(tmp_path)  # not a model directory: exits 2 right after the warning
    result = runner.invoke(app, ["serve", "--model", bad_model, "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "without authentication" in result.stderr and "without authentication" not in result.stdout
    quiet = runner.invoke(app, ["serve", "--model", bad_model])
    assert quiet.exit_code == 2 and "without authentication" not in quiet.output
