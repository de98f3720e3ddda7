"""A ``serve_llm`` node's Report read as the endpoint a later node calls.

Why here: two domains take such a Report as an input (the LLM ops' ``endpoint``, the search's
``endpoints``) and must accept and refuse the same Reports with the same words; the check lives
below both. The Report holds where the server is (``url``, its OpenAI routes under ``base_url``),
the model it serves and the name of the environment variable that holds its bearer key (never the
key itself).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ServedEndpoint:
    """What a consumer needs of a ``serve_llm`` Report."""

    base_url: str  # ".../v1": the OpenAI routes
    model: str  # the id clients send as `model`
    url: str  # the server's root: /health, /metrics
    api_key_env: str | None  # the variable holding the bearer key the server requires, if any

    @property
    def metrics_url(self) -> str:
        """The server's Prometheus text (no token needed)."""
        return self.url + "/metrics"


def served_endpoint(op: str, report: Any, slot: str = "endpoint") -> ServedEndpoint:
    """The endpoint a ``serve_llm`` Report names; ValueError (starting with ``op``, naming ``slot``)
    for any other Report or artifact."""
    metrics = getattr(report, "metrics", None)
    if not isinstance(metrics, dict) or not isinstance(metrics.get("base_url"), str) or not metrics.get("model"):
        raise ValueError(f"{op}: the `{slot}` input must be a serve_llm Report (with base_url and model)")
    base = metrics["base_url"].rstrip("/")
    url = metrics.get("url")
    if not isinstance(url, str) or not url:
        url = server_root(base)
    key_env = metrics.get("api_key_env")
    return ServedEndpoint(base_url=base, model=str(metrics["model"]), url=url.rstrip("/"),
                          api_key_env=str(key_env) if key_env else None)


def server_root(base_url: str) -> str:
    """An OpenAI base URL without its ``/v1``: where the server's own routes (``/metrics``) are."""
    base = base_url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base
