"""The OpenAI-compatible LLM as a Ray Serve application: one replica = one ``Engine`` + its API.

Why the app is built inside the replica (``__serve_build_asgi_app__``): the FastAPI routes need
the replica's engine, which exists only after the constructor has loaded the model there.

Three ways in, one set of arguments (``LLMAppArgs``):
- ``deploy_llm(args, host, port)`` from Python (the ``serve_llm`` stage, ``raypress serve --model``);
- a Serve config file with ``import_path: raypress.serving.llm_deployment:build_app`` and
  ``args: {model: DIR, ...}`` (``raypress serve CONFIG.yaml`` here, ``serve deploy`` on a cluster);
- ``build_app(args)`` for ``serve.run``.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from raypress.serving.http_limits import LLM_MAX_REQUEST_BYTES

log = logging.getLogger(__name__)
DEFAULT_PORT = 8000
STREAM_INTERVAL = 8  # tokens per SSE chunk after the first: bench/serve_path.py (README "Serving speed")


class LLMAppArgs(BaseModel):
    """What a served model needs; invalid args fail the deploy with a message naming the field."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="Model directory: ours or an HF Mixtral / Qwen2-MoE checkpoint")
    model_name: str | None = Field(None, description="the id clients send as `model` (default: directory name)")
    api_key: str | None = Field(None, description="require `Authorization: Bearer <key>` (prefer api_key_env)")
    api_key_env: str | None = Field(None, description="environment variable holding the key (read in the replica)")
    max_batch_size: int = Field(16, ge=1, description="KV-cache slots: sequences decoding at once")
    max_len: int | None = Field(None, ge=2, description="context (prompt + completion) per sequence")
    max_queue: int = Field(64, ge=1, description="requests waiting for a slot before answering 503")
    max_prefill_tokens: int = Field(2048, ge=1, description="padded prompt tokens one step may prefill")
    max_request_bytes: int = Field(LLM_MAX_REQUEST_BYTES, ge=1, description="larger request bodies get 413 "
                                   "(default 4 MiB: a 128k-token context is ~0.5 MB of text)")
    dtype: str | None = Field(None, description="float32 | bfloat16 | float16 (default: as saved; fp32 on CPU)")
    device: str | None = Field(None, description="cpu | cuda (default: cuda when the replica has a GPU)")
    stream_interval: int = Field(STREAM_INTERVAL, ge=1, le=1024, description=(
        "streamed tokens per SSE chunk after the first (a request's `stream_interval` overrides it)"))
    num_cpus: float = Field(1.0, ge=0, description="CPUs the replica reserves (also its torch threads)")
    engine_process: bool = Field(True, description=(
        "run the engine's step loop in a process of its own, not beside the replica's event loop "
        "(one GIL for both slowed each: bench/serve_path.py)"))
    num_gpus: float = Field(0.0, ge=0)

    @field_validator("model")
    @classmethod
    def _model_dir(cls, value: str) -> str:
        path = Path(value).expanduser()
        if not (path / "config.json").is_file():
            raise ValueError(f"{value} is not a model directory (no config.json)")
        return str(path.resolve())

    @field_validator("dtype")
    @classmethod
    def _dtype(cls, value: str | None) -> str | None:
        if value is not None and value not in {"float32", "bfloat16", "float16"}:
            raise ValueError("dtype must be float32, bfloat16 or float16")
        return value

    @property
    def served_name(self) -> str:
        return self.model_name or Path(self.model).name

    def resolved_key(self) -> str | None:
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ValueError(f"api_key_env={self.api_key_env!r} names an unset environment variable")
            return key
        return None


def _make_deployment() -> Any:
    from ray import serve

    @serve.deployment(name="LLMServer", health_check_period_s=10, health_check_timeout_s=30,
                      graceful_shutdown_timeout_s=20)
    @serve.ingress()
    class LLMServer:
        """Loads the model, starts the engine's step loop, exports its metrics."""

        def __init__(self, args: dict[str, Any]) -> None:
            import torch

            from raypress.inference.engine import Engine
            from raypress.inference.engine_process import EngineProcess
            from raypress.models.device import choose_device
            from raypress.serving.llm_metrics import EngineMetrics

            self.args = LLMAppArgs.model_validate(args)
            a = self.args
            device = choose_device(a.device, gpu=a.num_gpus > 0)
            dtype = getattr(torch, a.dtype) if a.dtype else (torch.float32 if device == "cpu" else None)
            threads = max(1, int(a.num_cpus)) if device == "cpu" else None
            started = time.perf_counter()
            kind = EngineProcess if a.engine_process else Engine.from_pretrained
            self.engine = kind(
                a.model, dtype=dtype, device=device, max_batch_size=a.max_batch_size, max_len=a.max_len,
                max_queue=a.max_queue, max_prefill_tokens=a.max_prefill_tokens, num_threads=threads)
            self.metrics = EngineMetrics(a.served_name, self.engine.model.config.num_local_experts)
            self.engine.on_step = self.metrics.on_step
            self.engine.on_request_finished = self.metrics.on_request_finished
            self.engine.start()
            log.info("serving %s from %s on %s in %.1f s", a.served_name, a.model, device,
                     time.perf_counter() - started)

        def __serve_build_asgi_app__(self) -> Any:
            from raypress.serving.openai_app import create_app

            return create_app(self.engine, self.args.served_name, self.args.resolved_key(),
                              max_request_bytes=self.args.max_request_bytes,
                              stream_interval=self.args.stream_interval)

        async def stream_tokens(self, prompt_ids: list[int], sampling: dict[str, Any],
                                interval: int | None = None) -> Any:
            """Generated token ids, a list per chunk (the first at once, then every ``interval``):
            the token path for Python callers holding a deployment handle, without HTTP
            (``handle.options(stream=True).stream_tokens.remote(ids, {"max_tokens": 16})``)."""
            from raypress.inference.sampling import SamplingParams
            from raypress.serving.stream_coalesce import coalesced

            handle = self.engine.add_request(list(prompt_ids), SamplingParams(**sampling))
            every = interval or self.args.stream_interval

            async def batches() -> Any:
                try:
                    async for batch in handle.batches(every):
                        yield 0, batch
                finally:
                    handle.cancel()

            async for _, event in coalesced(batches(), every):
                yield event.token_ids

        def check_health(self) -> None:
            if not self.engine.is_running:
                raise RuntimeError("the engine's step loop is not running")

        def __del__(self) -> None:
            engine = getattr(self, "engine", None)
            if engine is not None:
                engine.stop(timeout=5)

    return LLMServer


def build_app(args: dict[str, Any]) -> Any:
    """A Serve application over ``args`` (the ``import_path`` target of a Serve config file)."""
    from raypress.serving.http_limits import serve_backpressure

    parsed = LLMAppArgs.model_validate(args)
    deployment = _make_deployment()
    max_ongoing = parsed.max_batch_size + parsed.max_queue + 8  # the engine's queue answers 503, not Serve's
    options: dict[str, Any] = {"num_cpus": parsed.num_cpus, "num_gpus": parsed.num_gpus}
    if parsed.api_key_env and not parsed.api_key and os.environ.get(parsed.api_key_env):
        # carry the variable to the replica's process (else the replica reads its own environment)
        options["runtime_env"] = {"env_vars": {parsed.api_key_env: os.environ[parsed.api_key_env]}}
    return deployment.options(ray_actor_options=options, max_ongoing_requests=max_ongoing,
                              backpressure_config=serve_backpressure()).bind(parsed.model_dump())


def http_url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in {"0.0.0.0", "::", ""} else host
    return f"http://{shown}:{port}"


def start_serve(host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """Start Serve's HTTP proxy on ``host:port``; if Serve already runs elsewhere, say so clearly."""
    from ray import serve
    from ray.serve.context import _get_global_client

    serve.start(http_options={"host": host, "port": port})
    config = _get_global_client().http_config
    if (config.host, config.port) != (host, port):
        raise RuntimeError(f"Ray Serve is already running on {config.host}:{config.port}; "
                           f"it cannot also listen on {host}:{port} (use that address or stop it first)")


def deploy_llm(args: LLMAppArgs | dict[str, Any], host: str = "127.0.0.1", port: int = DEFAULT_PORT,
               app_name: str = "llm", route_prefix: str = "/") -> str:
    """Deploy (or update) the app and wait until it serves; returns its base URL."""
    from ray import serve

    parsed = args if isinstance(args, LLMAppArgs) else LLMAppArgs.model_validate(args)
    parsed.resolved_key()  # fail here, not in the replica, when the key's variable is unset
    start_serve(host, port)
    serve.run(build_app(parsed.model_dump()), name=app_name, route_prefix=route_prefix, blocking=False)
    return http_url(host, port) + route_prefix.rstrip("/")
