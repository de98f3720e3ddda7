"""Prometheus metrics of one OpenAI app, served at its ``GET /metrics`` (vLLM's names, our prefix).

Why beside ``llm_metrics.py`` (Ray metrics): those need Ray and are scraped from a node's metrics
port under Ray's names; dashboards and load tools built for vLLM scrape the server itself for
``vllm:time_to_first_token_seconds`` and friends. These are the same quantities under
``raypress:`` names, every series labelled ``model_name``, in a ``CollectorRegistry`` of the
app's own (two apps in one process, as in tests, never share or clash).

Fed by the engine's existing callbacks (``on_step``: tokens prefilled and generated per step;
``on_request_finished``: TTFT, queue time, end-to-end latency, mean time per output token), chained
after whatever callbacks the engine already has. Running / waiting requests and KV-cache use are
read from the engine when scraped. The engine records one mean time between a request's output
tokens, not each gap, so ``raypress:inter_token_latency_seconds`` observes that mean once per gap:
its count and sum are exact (gaps, total decode time), its buckets are per request.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from raypress.inference.engine import Engine
from raypress.inference.stats import RequestMetrics, StepRecord

try:  # ray[serve] installs it; without it the app answers /metrics with a 501 that names it
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
except ImportError:
    CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"
    CollectorRegistry = None  # type: ignore[assignment,misc]

log = logging.getLogger(__name__)

LATENCY_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                   7.5, 10.0, 20.0, 40.0, 80.0, 160.0)
TOKEN_GAP_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                     0.75, 1.0, 2.5, 5.0, 10.0)
PROMETHEUS_CONTENT_TYPE = CONTENT_TYPE_LATEST


def prometheus_available() -> bool:
    return CollectorRegistry is not None


MAX_USERS = 100  # distinct `user` labels kept (a label per value: the series must stay few)


class PrometheusMetrics:
    """The registry and its series for one served model over one engine."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self.engine = engine
        self.registry = CollectorRegistry()
        labels = ["model_name"]
        reg = self.registry

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Any:
            return Histogram(name, doc, labels, registry=reg, buckets=buckets).labels(model_name)

        self.ttft = histogram("raypress:time_to_first_token_seconds",
                              "seconds from a request's arrival to its first token (queue included)", LATENCY_BUCKETS)
        self.itl = histogram("raypress:inter_token_latency_seconds",
                             "seconds between two output tokens of a request", TOKEN_GAP_BUCKETS)
        self.e2e = histogram("raypress:e2e_request_latency_seconds",
                             "seconds from a request's arrival to its end", LATENCY_BUCKETS)
        self.queue = histogram("raypress:request_queue_time_seconds",
                               "seconds a request waited for a KV-cache slot", LATENCY_BUCKETS)
        self.prompt_tokens = Counter("raypress:prompt_tokens", "prompt tokens prefilled", labels,
                                     registry=reg).labels(model_name)
        self.generation_tokens = Counter("raypress:generation_tokens", "tokens generated", labels,
                                         registry=reg).labels(model_name)
        # answered requests per client (the OpenAI `user` field): a client counting its own calls (a
        # search) reads its series while others use the endpoint; at most MAX_USERS names, then "other"
        self.by_user = Counter("raypress:requests_by_user", "requests answered, by the client's `user` field",
                               ["model_name", "user"], registry=reg)
        self.model_name = model_name
        self.users: set[str] = set()
        Gauge("raypress:num_requests_running", "requests holding a KV-cache slot", labels,
              registry=reg).labels(model_name).set_function(lambda: engine.num_running)
        Gauge("raypress:num_requests_waiting", "requests queued for a KV-cache slot", labels,
              registry=reg).labels(model_name).set_function(lambda: engine.num_waiting)
        Gauge("raypress:kv_cache_usage_perc", "fraction of KV-cache slots in use (1 = full)", labels,
              registry=reg).labels(model_name).set_function(self.kv_cache_usage)

    def count_user(self, user: str | None) -> None:
        """One answered request of client ``user`` (none: not counted per client)."""
        if not user:
            return
        if user not in self.users and len(self.users) >= MAX_USERS:
            user = "other"
        self.users.add(user)
        self.by_user.labels(self.model_name, user[:128]).inc()

    def kv_cache_usage(self) -> float:
        """Slots held / slots: the cache reserves a whole context per sequence, so this is its use."""
        slots = self.engine.max_batch_size
        return (slots - self.engine.free_slots) / slots

    def attach(self) -> None:
        """Chain ``on_step`` / ``on_request_finished`` after the engine's current callbacks."""
        self.engine.on_step = _chain(self.engine.on_step, self.on_step)
        self.engine.on_request_finished = _chain(self.engine.on_request_finished, self.on_request_finished)

    def on_step(self, record: StepRecord) -> None:
        if record.prefill_tokens:
            self.prompt_tokens.inc(record.prefill_tokens)
        if record.new_tokens:
            self.generation_tokens.inc(record.new_tokens)

    def on_request_finished(self, metrics: RequestMetrics) -> None:
        self.e2e.observe(metrics.e2e_seconds)
        self.queue.observe(metrics.queue_seconds)
        if metrics.ttft_seconds is not None:
            self.ttft.observe(metrics.ttft_seconds)
        if metrics.tpot_seconds is not None:
            for _ in range(metrics.completion_tokens - 1):
                self.itl.observe(metrics.tpot_seconds)

    def exposition(self) -> bytes:
        """The registry in Prometheus' text format."""
        return generate_latest(self.registry)


def _chain(first: Callable[[Any], None] | None, then: Callable[[Any], None]) -> Callable[[Any], None]:
    """Call ``first`` (if any) and ``then``; an error in one does not keep the other from running."""
    if first is None:
        return then

    def both(value: Any) -> None:
        try:
            first(value)
        except Exception:
            log.exception("engine metrics callback failed")
        then(value)

    return both
