"""The engine's step and request records as Ray metrics (exported on each node's metrics port and
scraped by Prometheus the usual way; Ray prefixes every name with ``ray_``).

Why callbacks and not polling: the engine reports each step and each finished request as it
happens (on its step thread), so histograms see every value, not a sample.
"""

from __future__ import annotations

from collections import deque

from raypress.inference.stats import RequestMetrics, StepRecord

SECONDS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0]
BATCH = [1, 2, 4, 8, 16, 32, 64, 128, 256]


class EngineMetrics:
    """TTFT, TPOT, end-to-end latency, tokens (counter and tokens/s), queue depth, running batch
    size, and the distinct experts each layer activated per step (prefill and decode apart)."""

    def __init__(self, model_name: str, num_experts: int) -> None:
        from ray.util.metrics import Counter, Gauge, Histogram

        tags = ("model",)
        self.tags = {"model": model_name}
        self.ttft = Histogram("raypress_llm_time_to_first_token_seconds", "time from arrival to the first token",
                              boundaries=SECONDS, tag_keys=tags)
        self.tpot = Histogram("raypress_llm_time_per_output_token_seconds", "mean time between output tokens",
                              boundaries=SECONDS, tag_keys=tags)
        self.e2e = Histogram("raypress_llm_request_seconds", "time from arrival to the last token",
                             boundaries=SECONDS, tag_keys=tags)
        self.requests = Counter("raypress_llm_requests_total", "finished requests by finish reason",
                                tag_keys=("model", "finish_reason"))
        self.prompt_tokens = Counter("raypress_llm_prompt_tokens_total", "prompt tokens prefilled", tag_keys=tags)
        self.generated = Counter("raypress_llm_generated_tokens_total", "tokens generated", tag_keys=tags)
        self.tokens_per_s = Gauge("raypress_llm_tokens_per_second", "tokens generated per second (last 10 s)",
                                  tag_keys=tags)
        self.queue_depth = Gauge("raypress_llm_queue_depth", "requests waiting for a KV slot", tag_keys=tags)
        self.batch_size = Gauge("raypress_llm_running_batch_size", "sequences in the last decode step",
                                tag_keys=tags)
        self.batch_hist = Histogram("raypress_llm_decode_batch_size", "sequences per decode step",
                                    boundaries=BATCH, tag_keys=tags)
        expert_bounds = [float(k) for k in range(1, max(num_experts, 1) + 1)]
        self.experts = Histogram("raypress_llm_distinct_experts", "distinct experts a layer ran in one forward",
                                 boundaries=expert_bounds, tag_keys=("model", "phase", "layer"))
        self.experts_now = Gauge("raypress_llm_distinct_experts_last", "distinct experts per layer, last step",
                                 tag_keys=("model", "phase", "layer"))
        self._window: deque[tuple[float, int]] = deque()

    def on_step(self, record: StepRecord) -> None:
        self.queue_depth.set(record.queue_depth, self.tags)
        self.batch_size.set(record.batch_size, self.tags)
        if record.batch_size:
            self.batch_hist.observe(record.batch_size, self.tags)
        if record.new_tokens:
            self.generated.inc(record.new_tokens, self.tags)
        if record.prefill_tokens:
            self.prompt_tokens.inc(record.prefill_tokens, self.tags)
        self.tokens_per_s.set(self._rate(record), self.tags)
        for phase, counts in (("prefill", record.prefill_experts), ("decode", record.decode_experts)):
            for layer, distinct in enumerate(counts):
                tags = {"model": self.tags["model"], "phase": phase, "layer": str(layer)}
                self.experts.observe(distinct, tags)
                self.experts_now.set(distinct, tags)

    def _rate(self, record: StepRecord, window_s: float = 10.0) -> float:
        end = record.started + record.seconds
        self._window.append((end, record.new_tokens))
        while self._window and self._window[0][0] < end - window_s:
            self._window.popleft()
        span = end - min(self._window[0][0], record.started)
        return sum(n for _, n in self._window) / span if span > 0 else 0.0

    def on_request_finished(self, metrics: RequestMetrics) -> None:
        self.requests.inc(1, {"model": self.tags["model"], "finish_reason": metrics.finish_reason})
        self.e2e.observe(metrics.e2e_seconds, self.tags)
        if metrics.ttft_seconds is not None:
            self.ttft.observe(metrics.ttft_seconds, self.tags)
        if metrics.tpot_seconds is not None:
            self.tpot.observe(metrics.tpot_seconds, self.tags)
