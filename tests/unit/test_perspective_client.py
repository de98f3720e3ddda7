"""The Perspective API scorer against a local stand-in server (never the internet): request shape,
scores, 429 and 5xx retried with backoff, permanent failures as clear errors, the 20 kB skip,
chunks and the rate limit."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from raypress.operators.curation.beancounter.toxicity.scorers import (PERSPECTIVE_ENDPOINT, PerspectiveError,
                                                                     PerspectiveScorer, RateLimiter, make_scorer)

KEY = "test-key-123"


class StandIn:
    """A Perspective look-alike: ``script[text]`` is a list of statuses answered in turn (then 200)."""

    def __init__(self):
        self.script: dict[str, list[int]] = {}
        self.retry_after: dict[str, str] = {}
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                text = body["comment"]["text"]
                with stand_in.lock:
                    stand_in.requests.append({"path": urlparse(self.path).path,
                                              "query": parse_qs(urlparse(self.path).query), "body": body})
                    stand_in.in_flight += 1
                    stand_in.max_in_flight = max(stand_in.max_in_flight, stand_in.in_flight)
                    queue = stand_in.script.get(text, [])
                    status = queue.pop(0) if queue else 200
                time.sleep(0.01)
                if status == 200:
                    payload = {"attributeScores": {"TOXICITY": {
                        "spanScores": [{"begin": 0, "end": len(text), "score": {"value": 0.0, "type": "PROBABILITY"}}],
                        "summaryScore": {"value": round(len(text) % 10 / 10, 1), "type": "PROBABILITY"}}},
                        "languages": ["en"], "detectedLanguages": ["en"]}
                elif status == 403:
                    payload = {"error": {"code": 403, "message": "API key not valid. Please pass a valid API key.",
                                         "status": "PERMISSION_DENIED"}}
                else:
                    payload = {"error": {"code": status, "message": "Quota exceeded" if status == 429 else "Backend error",
                                         "status": "RESOURCE_EXHAUSTED" if status == 429 else "INTERNAL"}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if text in stand_in.retry_after and status == 429:
                    self.send_header("Retry-After", stand_in.retry_after[text])
                self.end_headers()
                self.wfile.write(data)
                with stand_in.lock:
                    stand_in.in_flight -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}/v1alpha1/comments:analyze"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def sent(self, text: str) -> int:
        return sum(1 for r in self.requests if r["body"]["comment"]["text"] == text)


@pytest.fixture
def server(monkeypatch):
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    s = StandIn()
    s.thread.start()
    yield s
    s.server.shutdown()
    s.server.server_close()


def scorer(server, **kw) -> PerspectiveScorer:
    kw = {"requests_per_second": 1000, "backoff_s": 0.001, **kw}
    return PerspectiveScorer(KEY, endpoint=server.endpoint, **kw)


def test_the_default_endpoint_is_the_real_api():
    assert PERSPECTIVE_ENDPOINT == "https://commentanalyzer.googleapis.com/v1alpha1/comments:analyze"


def test_scores_come_back_in_order_from_perspective_shaped_answers(server):
    texts = ["a", "abc", "Our Chinese suppliers are reliable.", "abcdefg"]
    assert scorer(server).score(texts) == [0.1, 0.3, round(len(texts[2]) % 10 / 10, 1), 0.7]
    first = server.requests[0]
    assert first["path"] == "/v1alpha1/comments:analyze" and first["query"] == {"key": [KEY]}
    assert first["body"]["requestedAttributes"] == {"TOXICITY": {}}
    assert first["body"]["languages"] == ["en"] and first["body"]["doNotStore"] is True


def test_429_and_5xx_are_retried_with_backoff_then_succeed(server):
    server.script = {"flaky-429": [429, 429], "flaky-5xx": [500, 503]}
    s = scorer(server)
    assert s.score(["flaky-429", "ok", "flaky-5xx"]) == [0.9, 0.2, 0.9]
    assert server.sent("flaky-429") == 3 and server.sent("flaky-5xx") == 3 and server.sent("ok") == 1
    assert s.retries == 4 and s.requests == 7


def test_backoff_doubles_and_retry_after_wins_when_longer(server):
    s = scorer(server, backoff_s=0.05, max_backoff_s=0.15)
    assert [s._delay(a, None) for a in range(4)] == [0.05, 0.1, 0.15, 0.15]
    server.script = {"slow-down": [429]}
    server.retry_after = {"slow-down": "0.3"}
    t0 = time.monotonic()
    assert scorer(server, backoff_s=0.001).score(["slow-down"]) == [0.9]
    assert time.monotonic() - t0 >= 0.3


def test_a_5xx_that_never_ends_is_a_clear_error(server):
    server.script = {"always-broken": [500] * 10}
    with pytest.raises(PerspectiveError, match=r"text 0 \('always-broken'\) still failing after 2 retries: "
                                               r"HTTP 500: Backend error") as info:
        scorer(server, max_retries=2).score(["always-broken"])
    assert KEY not in str(info.value)
    assert server.sent("always-broken") == 3


def test_other_4xx_are_not_retried(server):
    server.script = {"bad key": [403]}
    with pytest.raises(PerspectiveError, match=r"refused text 1 \('bad key'\): HTTP 403: API key not valid.*not retried"):
        scorer(server).score(["fine", "bad key"])
    assert server.sent("bad key") == 1


def test_after_a_permanent_failure_later_chunks_are_not_sent(server):
    server.script = {"bad": [400]}
    texts = ["bad", "t1", "t2", "t3", "t4", "t5", "t6"]
    with pytest.raises(PerspectiveError):
        scorer(server, chunk_size=2, concurrency=1).score(texts)
    assert server.sent("bad") == 1 and all(server.sent(t) == 0 for t in texts[2:])


def test_chunks_keep_at_most_concurrency_requests_in_flight(server):
    texts = [f"text {i}" for i in range(12)]
    out = scorer(server, chunk_size=5, concurrency=3).score(texts)
    assert len(out) == 12 and all(v is not None for v in out)
    assert 1 <= server.max_in_flight <= 3


def test_texts_over_20kB_are_skipped_not_sent(server):
    at_limit = "x" * 20_480
    over = "é" * 10_241  # 20,482 bytes in UTF-8, though only 10,241 characters
    s = scorer(server)
    out = s.score([at_limit, over, "short", "   "])
    assert out[0] == 0.0 and out[1] is None and out[2] == 0.5 and out[3] is None
    assert s.skipped == {"over_20kB": 1, "empty": 1}
    assert server.sent(over) == 0 and server.sent(at_limit) == 1


def test_the_rate_limit_spaces_requests(server):
    t0 = time.monotonic()
    scorer(server, requests_per_second=20, concurrency=4).score([f"r{i}" for i in range(10)])
    assert time.monotonic() - t0 >= 9 / 20 - 0.01
    limiter = RateLimiter(50)
    t0 = time.monotonic()
    for _ in range(6):
        limiter.wait()
    assert time.monotonic() - t0 >= 5 / 50 - 0.01


def test_the_key_comes_from_the_named_environment_variable(server, monkeypatch):
    monkeypatch.delenv("MY_PERSPECTIVE_KEY", raising=False)
    with pytest.raises(ValueError, match="environment variable 'MY_PERSPECTIVE_KEY'"):
        make_scorer("perspective", api_key_env="MY_PERSPECTIVE_KEY", endpoint=server.endpoint)
    monkeypatch.setenv("MY_PERSPECTIVE_KEY", "from-env")
    s = make_scorer("perspective", api_key_env="MY_PERSPECTIVE_KEY", endpoint=server.endpoint,
                    requests_per_second=1000)
    assert s.score(["hey"]) == [0.3]
    assert server.requests[-1]["query"] == {"key": ["from-env"]}
    with pytest.raises(ValueError, match="unknown scorer"):
        make_scorer("detoxify")


def test_an_answer_of_the_wrong_shape_is_a_clear_error(server, monkeypatch):
    import httpx

    real_post = httpx.Client.post

    def post(self, url, **kw):
        response = real_post(self, url, **kw)
        return httpx.Response(200, json={"attributeScores": {}}, request=response.request)

    monkeypatch.setattr(httpx.Client, "post", post)
    with pytest.raises(PerspectiveError, match="unexpected answer"):
        scorer(server).score(["hello"])
