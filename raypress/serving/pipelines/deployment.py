"""The pipelines service as a Ray Serve application (``raypress server``, or ``serve deploy`` with
``serve_configs/pipelines.yaml``).

Why the replica reserves no CPU by default, and runs at a lower CPU priority: the server waits on
files and the Jobs API; a CPU it held would be one the pipelines it starts cannot use (on a 2-core
machine, half of them), and under fifty polling clients its work should wait for theirs.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from raypress.serving.http_limits import MIB, serve_backpressure

TOKEN_ENV = "RAYPRESS_SERVER_TOKEN"


class PipelinesAppArgs(BaseModel):
    """What the app needs; invalid args fail the deploy with a message naming the field."""

    model_config = ConfigDict(extra="forbid")

    runs_root: str = Field("runs", description="where runs go: runs_root/<pipeline name>/<run id>; writers "
                                               "may only write under it")
    base_dir: str | None = Field(None, description="what relative paths in a posted pipeline mean "
                                                   "(default: the server's working directory)")
    jobs_address: str | None = Field(None, description="the cluster's dashboard URL (Jobs API); default: "
                                                       "the one the cluster publishes")
    api_key: str | None = Field(None, description="require `Authorization: Bearer <key>`")
    api_key_env: str | None = Field(None, description=f"environment variable holding the key (e.g. {TOKEN_ENV})")
    api_key_file: str | None = Field(None, description="file holding the key (its first line)")
    max_active_runs: int = Field(16, ge=1, description="queued + running runs before submits get 503")
    cancel_grace_s: int = Field(30, ge=1, le=3600, description="a cancelled run's time to stop cleanly "
                                                                "(its ledger says cancelled) before it is killed")
    check_cluster: bool = Field(False, description="run `raypress submit`'s environment probe job before "
                                                    "each run (a few seconds each)")
    max_request_bytes: int = Field(1 * MIB, ge=1, description="larger request bodies get 413")
    num_cpus: float = Field(0.0, ge=0)
    num_replicas: int = Field(1, ge=1)
    max_ongoing_requests: int = Field(256, ge=1, description="requests a replica holds (event streams "
                                                             "included) before Serve queues them")
    max_queued_requests: int = Field(256, ge=1, description="requests Serve queues before answering 503")
    niceness: int = Field(10, ge=0, le=19, description="the replica's CPU priority below the pipelines it "
                                                       "watches (os.nice): on a busy node they go first")

    @model_validator(mode="after")
    def _one_key_source(self) -> PipelinesAppArgs:
        given = [n for n in ("api_key", "api_key_env", "api_key_file") if getattr(self, n)]
        if len(given) > 1:
            raise ValueError(f"give one of api_key, api_key_env, api_key_file (got {', '.join(given)})")
        return self

    def resolved_key(self) -> str | None:
        """The bearer token, or None; ValueError naming the variable or file when it is empty."""
        if self.api_key:
            return self.api_key
        if self.api_key_env:
            value = os.environ.get(self.api_key_env, "").strip()
            if not value:
                raise ValueError(f"api_key_env: the environment variable {self.api_key_env} is not set or empty")
            return value
        if self.api_key_file:
            try:
                value = Path(self.api_key_file).expanduser().read_text(encoding="utf-8").splitlines()[0].strip()
            except (OSError, IndexError) as exc:
                raise ValueError(f"api_key_file: cannot read a key from {self.api_key_file}: {exc}") from None
            if not value:
                raise ValueError(f"api_key_file: {self.api_key_file} starts with an empty line")
            return value
        return None


def create_from_args(args: PipelinesAppArgs, jobs_address: str | None) -> Any:
    """The FastAPI app for ``args`` (what the replica serves)."""
    from raypress.serving.pipelines.api import create_pipelines_app
    from raypress.serving.pipelines.jobs import Jobs
    from raypress.serving.pipelines.service import PipelinesService, ServiceSettings

    runs_root = Path(args.runs_root).expanduser().resolve()
    runs_root.mkdir(parents=True, exist_ok=True)
    settings = ServiceSettings(runs_root=runs_root, base_dir=Path(args.base_dir or os.getcwd()).resolve(),
                               max_active_runs=args.max_active_runs, cancel_grace_s=args.cancel_grace_s,
                               check_cluster=args.check_cluster)
    service = PipelinesService(settings, Jobs(jobs_address))
    return create_pipelines_app(service, args.resolved_key(), args.max_request_bytes)


def build_pipelines_app(args: dict[str, Any]) -> Any:
    """The Serve application (``import_path: raypress.serving.pipelines.deployment:build_pipelines_app``)."""
    from ray import serve

    parsed = PipelinesAppArgs.model_validate(args)
    key = parsed.resolved_key()  # read where the app is deployed (the replica's node may lack the variable)
    parsed = parsed.model_copy(update={"api_key": key, "api_key_env": None, "api_key_file": None})

    @serve.deployment(name="PipelinesServer", health_check_period_s=10, health_check_timeout_s=30)
    @serve.ingress()
    class PipelinesServer:
        """Stateless over the runs root and the Jobs API: replicas agree, restarts lose nothing."""

        def __init__(self, app_args: dict[str, Any]) -> None:
            from raypress.dag.ray_compat import dashboard_address
            from raypress.operators.registry import add_op_package

            add_op_package("raypress.serving")  # serving's ops (serve_llm) are ops a pipeline may name
            self.args = PipelinesAppArgs.model_validate(app_args)
            self.jobs_address = self.args.jobs_address or dashboard_address()
            if self.args.niceness:  # a page polled by fifty clients must not slow the runs it shows
                os.nice(self.args.niceness)

        def __serve_build_asgi_app__(self) -> Any:
            return create_from_args(self.args, self.jobs_address)

    return PipelinesServer.options(
        num_replicas=parsed.num_replicas, max_ongoing_requests=parsed.max_ongoing_requests,
        max_queued_requests=parsed.max_queued_requests, ray_actor_options={"num_cpus": parsed.num_cpus},
        backpressure_config=serve_backpressure(),
    ).bind(parsed.model_dump())
