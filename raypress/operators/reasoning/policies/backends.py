"""Policies behind one interface (``types.Policy``): a local LM in a Ray actor, an OpenAI-compatible
endpoint, and the wrapper that turns any failure into a counted ``PolicyReply(error=...)``.

Why an actor around the serving ``Engine``: many questions are searched at once and each round
calls every policy; the engine's continuous batching turns those concurrent calls into batched
forwards, so K policies cost K actors, not K × questions model loads.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from raypress.operators.reasoning.search.types import PolicyReply

DEFAULT_TIMEOUT_S = 120.0


class LocalLMActor:
    """Hosts an ``Engine`` over a Model directory (run as a Ray actor: ``ray.remote(LocalLMActor)``)."""

    def __init__(self, model_dir: str, max_batch_size: int = 64, max_queue: int = 4096,
                 num_threads: int = 1, stop: list[str] | None = None) -> None:
        import torch

        from raypress.inference.engine import Engine

        torch.set_num_threads(num_threads)
        self.engine = Engine.from_pretrained(model_dir, max_batch_size=max_batch_size, max_queue=max_queue)
        self.engine.start()
        self.stop = list(stop or [])

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None) -> dict[str, Any]:
        """One continuation; errors come back as data (an actor exception would cost a traceback per call)."""
        from raypress.inference.requests import PromptTooLong

        ids = self.engine.encode(prompt)
        room = self.engine.max_len - len(ids)
        if room < 1:
            return {"text": "", "tokens": 0, "error": f"prompt of {len(ids)} tokens fills the context"}
        params = {"max_tokens": min(max_tokens, room), "temperature": temperature, "seed": seed, "stop": self.stop}
        try:
            handle = self.engine.add_request(ids, params)
            result = await handle.aresult()
        except (PromptTooLong, ValueError) as error:
            return {"text": "", "tokens": 0, "error": str(error)}
        return {"text": result.text, "tokens": result.usage.completion_tokens, "error": None}

    def stats(self) -> dict[str, Any]:
        s = self.engine.stats
        return {"steps": s.total_steps, "tokens": s.total_tokens}


def reply_from_actor(out: dict[str, Any]) -> PolicyReply:
    """What ``LocalLMActor.complete`` returns (plain data across Ray) as a ``PolicyReply``."""
    return PolicyReply(out["text"], int(out["tokens"]), out["error"])


class ActorPolicy:
    """A ``Policy`` over a ``LocalLMActor`` handle, with a per-call timeout."""

    def __init__(self, name: str, actor: Any, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.name = name
        self.actor = actor
        self.timeout_s = timeout_s

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None = None) -> PolicyReply:
        try:
            out = await asyncio.wait_for(self.actor.complete.remote(prompt, max_tokens, temperature, seed),
                                         self.timeout_s)
        except asyncio.TimeoutError:
            return PolicyReply("", 0, f"timeout after {self.timeout_s:.0f} s")
        except Exception as error:  # noqa: BLE001 - a dead actor is one more failed call, counted
            return PolicyReply("", 0, f"{type(error).__name__}: {error}")
        return reply_from_actor(out)


class OpenAIPolicy:
    """A ``Policy`` over any OpenAI-compatible ``/v1/completions`` endpoint (raypress's ``serve_llm`` too)."""

    def __init__(self, name: str, base_url: str, model: str, api_key: str | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, stop: list[str] | None = None,
                 user: str | None = None) -> None:
        import httpx

        self.name = name
        self.user = user  # the OpenAI `user` field: a raypress server counts the calls of each client
        self.url = base_url.rstrip("/") + ("/completions" if base_url.rstrip("/").endswith("/v1") else "/v1/completions")
        self.model = model
        self.stop = list(stop or [])
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.AsyncClient(timeout=timeout_s, headers=headers,
                                        limits=httpx.Limits(max_connections=256))

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None = None) -> PolicyReply:
        import httpx

        body: dict[str, Any] = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens,
                                "temperature": temperature}
        if seed is not None:
            body["seed"] = seed
        if self.user:
            body["user"] = self.user
        if self.stop:
            body["stop"] = self.stop[:4]
        try:
            response = await self.client.post(self.url, json=body)
        except httpx.TimeoutException:
            return PolicyReply("", 0, "timeout")
        except httpx.HTTPError as error:
            return PolicyReply("", 0, f"{type(error).__name__}: {error}")
        if response.status_code != 200:
            return PolicyReply("", 0, f"HTTP {response.status_code}: {response.text[:200]}")
        try:
            data = response.json()
            return PolicyReply(data["choices"][0]["text"], int(data.get("usage", {}).get("completion_tokens", 0)))
        except (ValueError, KeyError, IndexError, TypeError) as error:
            return PolicyReply("", 0, f"malformed response: {error}")

    async def aclose(self) -> None:
        await self.client.aclose()


def stop_local_policies(policies: dict[str, "ActorPolicy"]) -> None:
    """Kill the actors (their CPU reservations would starve the run's later nodes)."""
    import ray

    for policy in policies.values():
        ray.kill(policy.actor)


def start_local_policies(model_dirs: dict[str, str | Path], num_cpus: float = 0.5, max_batch_size: int = 64,
                         timeout_s: float = DEFAULT_TIMEOUT_S, stop: list[str] | None = None) -> dict[str, ActorPolicy]:
    """One ``LocalLMActor`` per model directory (started in parallel), wrapped as policies."""
    import ray

    remote = ray.remote(LocalLMActor)
    actors = {name: remote.options(num_cpus=num_cpus, max_concurrency=4096, name=None).remote(
        str(path), max_batch_size=max_batch_size, stop=stop) for name, path in model_dirs.items()}
    ray.get([actor.stats.remote() for actor in actors.values()])  # wait until every model is loaded
    return {name: ActorPolicy(name, actor, timeout_s) for name, actor in actors.items()}
