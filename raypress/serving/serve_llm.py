"""``serve_llm``: put a Model artifact behind the OpenAI-compatible API with Ray Serve, mid-pipeline.

Why a stage: later nodes (the MoE-CAP benchmark, an evaluation) talk to the live endpoint the
way users will, and the run's Report records where it was. The endpoint lives until the run
ends (the runner calls the cleanup this stage defers) unless ``keep_serving`` is set — useful on
a cluster, where Serve outlives the driver; with an embedded Ray it ends with the process.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import httpx
from pydantic import Field

from raypress.artifacts import Artifact, ModelArtifact, ReportArtifact
from raypress.dag.haproxy_loopback import ha_proxy_requested
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.registry import register
from raypress.schema import ArtifactType
from raypress.serving.llm_deployment import DEFAULT_PORT, LLMAppArgs, deploy_llm


class ServeLLMParams(Params):
    host: str = Field("127.0.0.1", description="interface Serve's HTTP proxy binds (0.0.0.0: every interface)")
    port: int = Field(DEFAULT_PORT, ge=1, le=65535)
    app_name: str | None = Field(None, description="Serve application name (default: the node id)")
    route_prefix: str = Field("/", pattern=r"^/")
    model_name: str | None = Field(None, description="the id clients send as `model` (default: the node id)")
    api_key_env: str | None = Field(None, description="environment variable holding a bearer token to require")
    max_batch_size: int = Field(16, ge=1)
    max_len: int | None = Field(None, ge=2)
    max_queue: int = Field(64, ge=1)
    num_cpus: float = Field(1.0, ge=0)
    num_gpus: float = Field(0.0, ge=0)
    dtype: str | None = None
    keep_serving: bool = Field(False, description="leave the app deployed after the run")
    ready_timeout_s: float = Field(120.0, gt=0)


@register("serve_llm", requires={"torch": "moe", "safetensors": "moe", "tokenizers": "moe"})
class ServeLLM(Stage[ServeLLMParams]):
    """Deploy a Model with Ray Serve (OpenAI-compatible API); the Report holds the endpoint URL."""

    @classmethod
    def planned_workers(cls, params: Any) -> str:
        return f"a Serve replica × cpu={params.num_cpus:g}" + (f" gpu={params.num_gpus:g}" if params.num_gpus else "")

    inputs: ClassVar[dict[str, ArtifactType]] = {"model": ArtifactType.MODEL}
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=0)
    resumable: ClassVar[bool] = False  # a cached Report would point at an endpoint that is gone
    serves_http: ClassVar[bool] = True

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        p = self.params
        model = inputs.get("model")
        if not isinstance(model, ModelArtifact):
            raise ValueError(f"node {ctx.node_id!r}: serve_llm needs a `model` input (a Model artifact)")
        args = LLMAppArgs(model=model.path, model_name=p.model_name or ctx.node_id, api_key_env=p.api_key_env,
                          max_batch_size=p.max_batch_size, max_len=p.max_len, max_queue=p.max_queue,
                          num_cpus=p.num_cpus, num_gpus=p.num_gpus, dtype=p.dtype)
        app_name = p.app_name or ctx.node_id
        started = time.perf_counter()
        url = deploy_llm(args, host=p.host, port=p.port, app_name=app_name, route_prefix=p.route_prefix)
        if not p.keep_serving:
            ctx.defer(lambda: _delete_app(app_name))
        info = _wait_ready(url, args, p.ready_timeout_s)
        seconds = time.perf_counter() - started
        ctx.event("endpoint_ready", url=url, model=args.served_name, seconds=round(seconds, 3))
        report = ReportArtifact(str(ctx.path("reports", ctx.node_id, "report.json")), metrics={
            "url": url, "base_url": f"{url}/v1", "model": args.served_name, "app_name": app_name,
            "model_path": model.path, "api_key_env": p.api_key_env, "keep_serving": p.keep_serving,
            "deploy_seconds": round(seconds, 3), "engine": info,
            "ingress": "haproxy" if ha_proxy_requested() else "proxy",  # Serve's Python proxy or its HAProxy
            "routes": ["/v1/completions", "/v1/chat/completions", "/v1/models", "/health",
                       "/raypress/v1/engine", "/raypress/v1/steps", "/raypress/v1/tokenize"],
        })
        report.save()
        return report


def _delete_app(app_name: str) -> None:
    from ray import serve

    serve.delete(app_name)


def _wait_ready(url: str, args: LLMAppArgs, timeout_s: float) -> dict[str, Any]:
    """Poll the health route until the replica's engine answers; the engine info for the Report."""
    headers = {}
    key = args.resolved_key()
    if key:
        headers["Authorization"] = f"Bearer {key}"
    deadline = time.monotonic() + timeout_s
    last = "no answer"
    with httpx.Client(timeout=10.0) as client:
        while time.monotonic() < deadline:
            try:
                if client.get(f"{url}/health").status_code == 200:
                    return client.get(f"{url}/raypress/v1/engine", headers=headers).json()
                last = "health check not ok"
            except httpx.HTTPError as error:
                last = str(error)
            time.sleep(0.5)
    raise RuntimeError(f"the endpoint {url} did not become ready in {timeout_s:.0f} s ({last})")
