"""Every model call of a search counted on both sides: what the search sent, and what the server did.

Why a wrapper: the search's rows count what each question was charged (``calls``), not which
policy answered nor whether the model behind it saw the call. ``CountingPolicy`` sits around any
``Policy`` and counts, per policy, the calls sent (success or failure) and the failed ones (the
reply came back with ``error`` set, or the call raised, timed out or was cancelled: no answer at
all; a reply the search cannot parse is a failure of the search's own, in its rows, not here).
For a policy behind a raypress OpenAI server, ``CallCounts`` also reads the server's Prometheus
``/metrics`` before and after the search: ``raypress:e2e_request_latency_seconds_count`` (one
per finished request, labelled ``model_name``) gives the requests it served meanwhile. The two
sides agree when every call reached the model and nobody else used the endpoint meanwhile; a
request the server refused (a 4xx, a full queue) or that the client gave up on is the difference.

What comes out (``CallCounts.report``): ``ctx.count`` into the node's ledger entry, as
``calls.<policy>``, ``failed_calls.<policy>`` and ``served_requests.<policy>``, and one
``policy_calls`` event with the same numbers. A server whose ``/metrics`` cannot be read gives a
``served_count_unavailable`` event and no served count; it never fails the search.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from raypress.operators.base import RunContext
from raypress.operators.reasoning.search.types import Policy, PolicyReply

# raypress/serving/prometheus_metrics.py's end-to-end latency histogram: its _count is one per finished request
SERVED_SERIES = "raypress:e2e_request_latency_seconds_count"
MODEL_LABEL = "model_name"
# raypress/serving/prometheus_metrics.py's answered requests per client (the OpenAI `user` field)
BY_USER_FAMILY = "raypress:requests_by_user"
USER_LABEL = "user"
METRICS_TIMEOUT_S = 5.0


class CountingPolicy:
    """A ``Policy`` that counts the calls it passes on and the ones that got no answer."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.name = policy.name
        self.calls = 0
        self.failed = 0

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None = None) -> PolicyReply:
        self.calls += 1
        try:
            reply = await self.policy.complete(prompt, max_tokens, temperature, seed)
        except BaseException:  # raised, timed out, cancelled: sent and never answered
            self.failed += 1
            raise
        if not isinstance(reply, PolicyReply) or reply.error is not None:
            self.failed += 1
        return reply

    async def aclose(self) -> None:
        close = getattr(self.policy, "aclose", None)
        if close is not None:
            await close()


@dataclass(frozen=True)
class ServedBy:
    """Where a policy's server counts the requests it finished."""

    metrics_url: str
    model: str
    user: str | None = None  # the `user` this search's calls send: its own series, whoever else calls


class ServedCountUnavailable(Exception):
    """The server's count of finished requests cannot be read (why: the message)."""


def _families(exposition: str) -> list:
    """The metric families of a Prometheus text; ServedCountUnavailable when it cannot be read."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError as error:  # ray[serve] installs it
        raise ServedCountUnavailable("reading /metrics needs prometheus_client (pip install prometheus_client)") \
            from error
    try:
        return list(text_string_to_metric_families(exposition))
    except ValueError as error:
        raise ServedCountUnavailable(f"unreadable Prometheus text: {error}") from error


def finished_requests(exposition: str, model: str) -> int:
    """``raypress:e2e_request_latency_seconds_count{model_name=model}`` in Prometheus text;
    ServedCountUnavailable when the text holds no such series (not a raypress server, another model)."""
    found = [s.value for family in _families(exposition) for s in family.samples
             if s.name == SERVED_SERIES and s.labels.get(MODEL_LABEL) == model]
    if not found:
        raise ServedCountUnavailable(f"no {SERVED_SERIES} series for {MODEL_LABEL}={model!r}")
    return int(sum(found))


def read_finished_requests(served: ServedBy, timeout_s: float = METRICS_TIMEOUT_S) -> int:
    """Ask the server now; ServedCountUnavailable when it cannot tell."""
    import httpx

    try:
        response = httpx.get(served.metrics_url, timeout=timeout_s)
    except httpx.HTTPError as error:
        raise ServedCountUnavailable(f"{type(error).__name__}: {error}") from error
    if response.status_code != 200:
        raise ServedCountUnavailable(f"HTTP {response.status_code}: {response.text[:200]}")
    if served.user is not None:
        return answered_for_user(response.text, served.model, served.user)
    return finished_requests(response.text, served.model)


def answered_for_user(exposition: str, model: str, user: str) -> int:
    """The requests the server answered for client ``user`` (0 before its first); ServedCountUnavailable
    when the server keeps no per-client count (not a raypress server, or an older one)."""
    families = [f for f in _families(exposition) if f.name == BY_USER_FAMILY]
    if not families:
        raise ServedCountUnavailable(f"no {BY_USER_FAMILY} series (the server counts no clients)")
    return int(sum(s.value for f in families for s in f.samples if s.name.endswith("_total")
                   and s.labels.get(MODEL_LABEL) == model and s.labels.get(USER_LABEL) == user))


class CallCounts:
    """The counting wrappers of one search's policies and their servers' counts before it."""

    def __init__(self, policies: Mapping[str, Policy], served: Mapping[str, ServedBy] | None = None) -> None:
        self.policies: dict[str, CountingPolicy] = {name: CountingPolicy(p) for name, p in policies.items()}
        self.served = dict(served or {})
        self.before: dict[str, int] = {}

    def start(self, ctx: RunContext) -> None:
        """Read every server's count before the search (call this before any policy is called)."""
        for name, served in self.served.items():
            try:
                self.before[name] = read_finished_requests(served)
            except ServedCountUnavailable as error:
                _unavailable(ctx, name, served, str(error))

    def report(self, ctx: RunContext) -> dict[str, int]:
        """Read the servers again; count into the ledger and the events; the flat counts."""
        served_requests: dict[str, int] = {}
        for name, before in self.before.items():
            served = self.served[name]
            try:
                served_requests[name] = read_finished_requests(served) - before
            except ServedCountUnavailable as error:
                _unavailable(ctx, name, served, str(error))
        calls = {name: p.calls for name, p in self.policies.items()}
        failed = {name: p.failed for name, p in self.policies.items()}
        counts = {**{f"calls.{n}": v for n, v in calls.items()},
                  **{f"failed_calls.{n}": v for n, v in failed.items()},
                  **{f"served_requests.{n}": v for n, v in served_requests.items()}}
        if counts:
            ctx.count(**counts)
        ctx.event("policy_calls", calls=calls, failed_calls=failed, served_requests=served_requests)
        return counts


def _unavailable(ctx: RunContext, name: str, served: ServedBy, reason: str) -> None:
    ctx.event("served_count_unavailable", policy=name, url=served.metrics_url, model=served.model, reason=reason)
