"""The search's call counting without Ray: the counting wrapper around any policy, the finished-request
count read from a server's Prometheus text, both sides reported into the ledger and the events, and the
``endpoints`` input of ``comcts_search`` (a serve_llm Report or a list of them) checked where it is
wired (validation) and where it is read (names, keys)."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from raypress.artifacts import ReportArtifact
from raypress.operators.base import RunContext
from raypress.operators.reasoning.policies import call_counts
from raypress.operators.reasoning.policies.call_counts import (CallCounts, CountingPolicy, ServedBy,
                                                               ServedCountUnavailable, finished_requests)
from raypress.operators.reasoning.search.types import PolicyReply


class Scripted:
    """Answers, fails, raises or hangs as its script says, one entry per call."""

    def __init__(self, name: str, script: list[str]) -> None:
        self.name, self.script, self.closed = name, list(script), False

    async def complete(self, prompt, max_tokens, temperature, seed=None):
        what = self.script.pop(0)
        if what == "ok":
            return PolicyReply("1 + 1 = 2\nAnswer: 2", 8)
        if what == "error":
            return PolicyReply("", 0, "HTTP 503: full")
        if what == "raise":
            raise RuntimeError("boom")
        if what == "junk":
            return "not a PolicyReply"
        await asyncio.sleep(10)  # "hang"
        return PolicyReply("late", 1)

    async def aclose(self):
        self.closed = True


def test_counting_policy_counts_every_call_and_the_unanswered_ones():
    inner = Scripted("m", ["ok", "error", "raise", "junk", "hang", "ok"])
    policy = CountingPolicy(inner)

    async def calls():
        replies = [await policy.complete("p", 4, 0.0), await policy.complete("p", 4, 0.0, seed=1)]
        with pytest.raises(RuntimeError):
            await policy.complete("p", 4, 0.0)
        replies.append(await policy.complete("p", 4, 0.0))
        with pytest.raises(asyncio.TimeoutError):  # the search's per-call timeout cancels it
            await asyncio.wait_for(policy.complete("p", 4, 0.0), 0.01)
        replies.append(await policy.complete("p", 4, 0.0))
        await policy.aclose()
        return replies

    replies = asyncio.run(calls())
    assert policy.name == "m" and (policy.calls, policy.failed) == (6, 4)
    assert replies[0].text.endswith("Answer: 2") and replies[1].error == "HTTP 503: full"  # passed on as they came
    assert inner.closed


def _exposition(counts: dict[str, int]) -> str:
    """Prometheus text as the OpenAI app's /metrics writes it (its histogram, its label)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    registry = CollectorRegistry()
    e2e = Histogram("raypress:e2e_request_latency_seconds", "seconds", ["model_name"], registry=registry)
    tokens = Counter("raypress:generation_tokens", "tokens", ["model_name"], registry=registry)
    for model, n in counts.items():
        series = e2e.labels(model)  # made when the app starts: a model served nothing yet reads 0
        for _ in range(n):
            series.observe(0.05)
        tokens.labels(model).inc(3 * n + 1)
    return generate_latest(registry).decode()


def test_finished_requests_from_prometheus_text():
    text = _exposition({"tiny": 7, 'odd "name"\\x': 2, "zero": 0})
    assert finished_requests(text, "tiny") == 7
    assert finished_requests(text, 'odd "name"\\x') == 2  # escaped label values
    assert finished_requests(text, "zero") == 0
    with pytest.raises(ServedCountUnavailable, match="no raypress:e2e_request_latency_seconds_count series "
                                                     "for model_name='other'"):
        finished_requests(text, "other")
    with pytest.raises(ServedCountUnavailable):
        finished_requests("# HELP\nnot prometheus at all {{{\n", "tiny")


def test_both_sides_reach_the_ledger_counts_and_one_event(monkeypatch, tmp_path):
    served = {"up": [3, 7], "dead": []}  # /metrics answers per call; "dead" refuses connections

    def fake_get(url, timeout):
        if "dead" in url:
            raise httpx.ConnectError("connection refused")
        return httpx.Response(200, text=_exposition({"up-model": served["up"].pop(0)}))

    monkeypatch.setattr(httpx, "get", fake_get)
    events: list[dict] = []
    ctx = RunContext(run_dir=str(tmp_path), node_id="search", emit=events.append)
    counts = CallCounts({"up": Scripted("up", ["ok"] * 4), "dead": Scripted("dead", ["error", "ok"]),
                         "local": Scripted("local", ["ok"])},
                        {"up": ServedBy("http://up.test/metrics", "up-model"),
                         "dead": ServedBy("http://dead.test/metrics", "d")})
    counts.start(ctx)

    async def search():
        p = counts.policies
        await asyncio.gather(*(p["up"].complete("q", 4, 0.7) for _ in range(4)),
                             p["dead"].complete("q", 4, 0.7), p["dead"].complete("q", 4, 0.7),
                             p["local"].complete("q", 4, 0.7))

    asyncio.run(search())
    flat = counts.report(ctx)
    assert flat == {"calls.up": 4, "calls.dead": 2, "calls.local": 1, "failed_calls.up": 0, "failed_calls.dead": 1,
                    "failed_calls.local": 0, "served_requests.up": 4}
    unavailable = [e for e in events if e["event"] == "served_count_unavailable"]
    assert len(unavailable) == 1 and unavailable[0]["policy"] == "dead" and "refused" in unavailable[0]["reason"]
    counted = [e for e in events if e["event"] == "counted"]
    assert counted == [{"event": "counted", "node": "search", "counts": flat}]
    (summary,) = [e for e in events if e["event"] == "policy_calls"]
    assert summary["calls"] == {"up": 4, "dead": 2, "local": 1} and summary["served_requests"] == {"up": 4}
    assert summary["failed_calls"]["dead"] == 1


def test_a_server_without_the_series_or_with_an_error_is_unavailable(monkeypatch):
    monkeypatch.setattr(httpx, "get", lambda url, timeout: httpx.Response(501, text="metrics need prometheus_client"))
    with pytest.raises(ServedCountUnavailable, match="HTTP 501"):
        call_counts.read_finished_requests(ServedBy("http://x.test/metrics", "m"))
    monkeypatch.setattr(httpx, "get", lambda url, timeout: httpx.Response(200, text=_exposition({"m": 1})))
    with pytest.raises(ServedCountUnavailable, match="model_name='n'"):
        call_counts.read_finished_requests(ServedBy("http://x.test/metrics", "n"))


# ---- the `endpoints` input of comcts_search -------------------------------------------------------

PIPELINE = """
name: served-policy
nodes:
  - id: tasks
    op: reasoning_tasks
    with: {{families: [chain_arithmetic], n_per_family: 4}}
  - id: corpus
    op: read_jsonl
    with: {{paths: ["{rows}"]}}
  - id: lm
    op: train_moe_lm
    input: corpus
  - id: served
    op: serve_llm
    input: {{model: lm}}
  - id: search
    op: comcts_search
    input: {{data: tasks, endpoints: {endpoints}}}
    with:
      runs:
        - {{name: direct, method: direct, policies: [served]}}
"""


def test_a_pipeline_wires_serve_llm_nodes_into_the_search(tmp_path):
    pytest.importorskip("reasoning_gym")
    from raypress.dag.validate import PipelineInvalid, load_pipeline

    (tmp_path / "rows.jsonl").write_text('{"text": "1 + 1 = 2"}\n')
    path = tmp_path / "p.yaml"
    for wiring in ("[served]", "served"):
        path.write_text(PIPELINE.format(rows=tmp_path / "rows.jsonl", endpoints=wiring))
        assert load_pipeline(path).nodes["search"].slots["endpoints"] == ["served"]
    for wrong, says in (("[tasks]", "input 'tasks' gives a Dataset but 'endpoints' needs a Report"),
                        ("[lm]", "input 'lm' gives a Model but 'endpoints' needs a Report")):
        path.write_text(PIPELINE.format(rows=tmp_path / "rows.jsonl", endpoints=wrong))
        with pytest.raises(PipelineInvalid) as exc:
            load_pipeline(path)
        assert any(says in str(p) and "node 'search'" in str(p) for p in exc.value.problems), exc.value.problems


def _report(model: str, key_env: str | None = None, port: int = 8123) -> ReportArtifact:
    url = f"http://127.0.0.1:{port}"
    return ReportArtifact("report.json", {"url": url, "base_url": f"{url}/v1", "model": model, "api_key_env": key_env})


def test_served_policies_are_named_by_their_model_and_never_twice(monkeypatch):
    pytest.importorskip("reasoning_gym")
    from raypress.operators.reasoning.comcts_search import ComctsSearch, SearchStageParams, _served_key

    stage = ComctsSearch(SearchStageParams(
        runs=[{"name": "r", "method": "comcts", "policies": ["a", "served"], "judges": ["policy:served"]}],
        endpoints=[{"name": "static", "base_url": "http://h.test/v1", "model": "m"}]))
    served = stage._served([_report("served")], {"a": "/x"}, "search")
    assert list(served) == ["served"] and served["served"].metrics_url == "http://127.0.0.1:8123/metrics"
    stage._check_names({"a": "/x"}, "search", served)
    assert list(stage._served(_report("served"), {}, "search")) == ["served"]  # one Report, not in a list
    for taken, where in (("a", "a local policy"), ("static", "an `endpoints` param entry")):
        with pytest.raises(ValueError, match=f"node 'search': the `endpoints` input serving '{taken}' .* {where}"):
            stage._served([_report(taken)], {"a": "/x"}, "search")
    with pytest.raises(ValueError, match="another `endpoints` input"):
        stage._served([_report("served"), _report("served", port=9)], {}, "search")
    with pytest.raises(ValueError, match="comcts_search node 'search': the `endpoints` input must be a serve_llm "
                                         "Report"):
        stage._served([ReportArtifact("r.json", {"accuracy": 0.5})], {}, "search")
    monkeypatch.delenv("RP_TEST_SERVED_KEY", raising=False)
    keyed = stage._served([_report("served", "RP_TEST_SERVED_KEY")], {}, "search")["served"]
    with pytest.raises(ValueError, match=r"requires the key in \$RP_TEST_SERVED_KEY, which is not set here"):
        _served_key(keyed, "served", "search")
    monkeypatch.setenv("RP_TEST_SERVED_KEY", "sk-test")
    assert _served_key(keyed, "served", "search") == "sk-test"


def test_a_client_reads_its_own_answered_requests_while_others_use_the_endpoint() -> None:
    """The server counts answered requests per OpenAI `user`; a search reads only its own series."""
    from prometheus_client import generate_latest

    from raypress.operators.reasoning.policies.call_counts import answered_for_user
    from raypress.serving.prometheus_metrics import MAX_USERS, PrometheusMetrics

    class Engine:
        max_batch_size, free_slots, num_running, num_waiting = 4, 4, 0, 0

    metrics = PrometheusMetrics(Engine(), "served")
    text = generate_latest(metrics.registry).decode()
    assert answered_for_user(text, "served", "search-1") == 0  # the family is there before any call
    for user in ["search-1"] * 3 + ["benchmark"] * 5 + [None]:
        metrics.count_user(user)
    text = generate_latest(metrics.registry).decode()
    assert answered_for_user(text, "served", "search-1") == 3
    assert answered_for_user(text, "served", "benchmark") == 5
    assert answered_for_user(text, "other-model", "search-1") == 0
    for i in range(MAX_USERS + 5):
        metrics.count_user(f"u{i}")
    assert answered_for_user(generate_latest(metrics.registry).decode(), "served", "other") >= 5
    with pytest.raises(ServedCountUnavailable, match="counts no clients"):
        answered_for_user("# a server without per-client counts\n", "served", "search-1")
