"""The MoE-CAP benchmark's client of a live raypress server: ``/v1/completions`` streamed as SSE.

Why its own module: timing a request from its server-sent events (TTFT at the first chunk, one
arrival time per chunk, usage from the final chunk) and reading the raypress routes
(``/raypress/v1/engine``, ``/raypress/v1/steps``, ``/raypress/v1/tokenize``) is HTTP work that the
benchmark's measuring and scoring should not know about.  Only ``httpx`` (core) is needed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

from raypress.operators.moe.cap.target import CompletionResult


class EndpointError(RuntimeError):
    """The server answered a request with an error (status and OpenAI error body in the message)."""


class HttpTarget:
    """A live OpenAI-compatible raypress server (``/v1/completions`` + the ``/raypress/v1`` routes)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 600.0):
        import httpx

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0))
        self._sync = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=self.timeout)
        self._client: Any = None  # httpx.AsyncClient, made inside the running event loop

    def _async_client(self) -> Any:
        import httpx

        if self._client is None:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
            self._client = httpx.AsyncClient(base_url=self.base_url, headers=self.headers,
                                             timeout=self.timeout, limits=limits)
        return self._client

    async def complete(self, prompt: str, max_tokens: int, temperature: float) -> CompletionResult:
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
                "stream": True, "stream_options": {"include_usage": True}}
        start = time.perf_counter()
        parts: list[str] = []
        times: list[float] = []
        usage: dict[str, Any] | None = None
        async with self._async_client().stream("POST", "/v1/completions", json=body) as response:
            if response.status_code != 200:
                detail = (await response.aread()).decode(errors="replace")[:500]
                raise EndpointError(f"POST /v1/completions: HTTP {response.status_code}: {detail}")
            async for line in response.aiter_lines():
                chunk = _sse_data(line)
                if chunk is None:
                    continue
                if chunk == "[DONE]":
                    break
                if "error" in chunk:
                    raise EndpointError(f"POST /v1/completions: error in stream: {chunk['error']}")
                if chunk.get("choices"):
                    times.append(time.perf_counter() - start)
                    parts.append(chunk["choices"][0].get("text") or "")
                usage = chunk.get("usage") or usage
        e2e = time.perf_counter() - start
        count = int(usage["completion_tokens"]) if usage else len(times)
        prompt_tokens = int(usage["prompt_tokens"]) if usage and "prompt_tokens" in usage else None
        return CompletionResult("".join(parts), count, times[0] if times else None, e2e, times, prompt_tokens)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One synchronous request to a raypress route; its JSON, or EndpointError with the body."""
        response = self._sync.request(method, path, **kwargs)
        if response.status_code != 200:
            raise EndpointError(f"{method} {path}: HTTP {response.status_code}: {response.text[:500]}")
        return response.json()

    def steps_since(self, step: int) -> list[dict[str, Any]]:
        return list(self._call("GET", "/raypress/v1/steps", params={"after": step})["steps"])

    def engine_info(self) -> dict[str, Any]:
        return dict(self._call("GET", "/raypress/v1/engine"))

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        return [int(n) for n in self._call("POST", "/raypress/v1/tokenize", json={"prompts": list(prompts)})["counts"]]

    def loglikelihoods(self, pairs: Sequence[tuple[str, str]]) -> list[tuple[float, bool]]:
        """(log-likelihood, is greedy) of each continuation from ``/v1/completions`` with ``echo`` and
        ``max_tokens: 0`` (what lm-eval's local-completions sends)."""
        from raypress.operators.moe.cap.choice_scoring import completion_loglikelihoods

        return completion_loglikelihoods(lambda body: self._call("POST", "/v1/completions", json=body),
                                         self.model, pairs, lambda text: self.count_tokens([text])[0])

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self._sync.close()


def _sse_data(line: str) -> dict[str, Any] | str | None:
    """The JSON payload of one ``data: ...`` line, ``"[DONE]"``, or None for anything else."""
    if not line.startswith("data:"):
        return None
    payload = line[len("data:"):].strip()
    if payload == "[DONE]":
        return payload
    return json.loads(payload) if payload else None
