"""The ``reason`` Ray Serve application: POST a question, get the CoMCTS search result as JSON.

Each policy is its own deployment (``LocalLMActor``: an engine with continuous batching), so
requests searching at once share batched forwards, and a policy can get its own replicas or GPU.
The ingress holds their deployment handles as the search's policies.

Routes: ``POST /v1/reason`` with ``{family, question, metadata?, answer?, method?}``; ``GET
/v1/policies``; ``GET /health``. With ``answer`` the search stops on a path the family's scorer
accepts (as in training); without it, on the first path with an answer and no step any judge
scored negative (``verified: false`` in the result). A body over ``max_request_bytes`` (default
1 MiB: a question is text) gets 413; Serve's 503 when the queue is full carries ``Retry-After``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from raypress.operators.reasoning.policies.backends import reply_from_actor
from raypress.operators.reasoning.search.types import PolicyReply, Task
from raypress.serving.http_limits import REASON_MAX_REQUEST_BYTES


class ReasonRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    family: str
    question: str = Field(min_length=1)
    metadata: dict[str, Any] = Field(default_factory=dict, description="what the family's checker needs")
    answer: str | None = Field(None, description="ground truth: when given, the search stops on a correct path")
    method: Literal["comcts", "independent", "direct"] = "comcts"
    budget: int | None = Field(None, ge=1, le=200)


class ReasonAppArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    policies: dict[str, str] = Field(description="policy name -> Model dir (a train_policies Model works too)")
    judges: list[str] = Field(default_factory=lambda: ["exact"])
    search: dict[str, Any] = Field(default_factory=dict)
    num_cpus_per_policy: float = 0.5
    max_batch_size: int = 64
    max_request_bytes: int = Field(REASON_MAX_REQUEST_BYTES, ge=1, description="larger request bodies get 413")


class _HandlePolicy:
    """A search policy over a ``LocalLMActor`` deployment handle."""

    def __init__(self, name: str, handle: Any) -> None:
        self.name = name
        self.handle = handle

    async def complete(self, prompt: str, max_tokens: int, temperature: float, seed: int | None = None) -> PolicyReply:
        try:
            out = await self.handle.complete.remote(prompt, max_tokens, temperature, seed)
        except Exception as error:  # noqa: BLE001 - counted as a failed call by the search
            return PolicyReply("", 0, f"{type(error).__name__}: {error}")
        return reply_from_actor(out)


class _Unverified:
    """A family whose scorer accepts any answer: the search then stops on the first path with an
    answer and no negative step (no ground truth to check against)."""

    def __init__(self, family: Any) -> None:
        self.family = family
        self.name = family.name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self.family, attr)

    def score(self, task: Task, final_answer: str) -> bool:
        return True


def create_reason_api(policies: dict[str, Any], args: ReasonAppArgs) -> Any:
    """The FastAPI app over ``policies`` (objects with ``async complete``)."""
    from fastapi import FastAPI

    from raypress.operators.reasoning.search import comcts as core
    from raypress.operators.reasoning.search.judges import ExactStepJudge, ModelJudge
    from raypress.operators.reasoning.tasks.catalog import get_family
    from raypress.serving.http_guards import APIError, install_guards

    app = FastAPI(title="raypress reason")
    install_guards(app, None, args.max_request_bytes)  # the OpenAI app's error shapes and body limit (no key)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "policies": list(policies)}

    @app.get("/v1/policies")
    async def list_policies() -> dict[str, Any]:
        return {"policies": list(policies), "judges": args.judges, "search": args.search}

    @app.post("/v1/reason")
    async def reason(request: ReasonRequest) -> dict[str, Any]:
        try:
            family = get_family(request.family)
        except (KeyError, ValueError) as error:
            raise APIError(400, str(error).strip("'\""), param="family") from error
        task = Task(id="request", family=family.name, question=request.question, answer=request.answer or "",
                    metadata=request.metadata)
        searched = family if request.answer is not None else _Unverified(family)
        members = list(policies.values())
        judges = [ExactStepJudge(family) if j == "exact" else ModelJudge(policies[j.split(":", 1)[1]], family)
                  for j in args.judges]
        params = core.SearchParams(**{**args.search, **({"budget": request.budget} if request.budget else {})})
        try:
            if request.method == "direct":
                result = await core.direct(task, searched, members[0], params)
            elif request.method == "independent":
                result = await core.independent_sampling(task, searched, members, params)
            else:
                result = await core.comcts(task, searched, members, judges, params)
        except (KeyError, ValueError, TypeError) as error:  # metadata the family's checker cannot use
            raise APIError(400, f"the question cannot be searched: {error}", param="metadata") from error
        row = result.to_row()
        row["failures"] = json.loads(row["failures"])
        row["verified"] = request.answer is not None
        return row

    return app


def _policy_dirs(policies: dict[str, str]) -> dict[str, str]:
    """Expand a ``train_policies`` Model dir into its policies."""
    from raypress.artifacts import ModelArtifact
    from raypress.operators.reasoning.policies.model_set import policy_dirs

    out: dict[str, str] = {}
    for name, path in policies.items():
        manifest = Path(path) / ModelArtifact.MANIFEST
        if manifest.is_file():
            expanded = policy_dirs(ModelArtifact.load(path))
            out.update(expanded if len(expanded) > 1 else {name: next(iter(expanded.values()))})
        else:
            out[name] = path
    return out


def build_reason_app(args: dict[str, Any]) -> Any:
    """The Serve application (``import_path: raypress.serving.reason_app:build_reason_app``)."""
    from ray import serve

    from raypress.operators.reasoning.policies.backends import LocalLMActor
    from raypress.serving.http_limits import serve_backpressure

    parsed = ReasonAppArgs.model_validate(args)
    policy_deployment = serve.deployment(LocalLMActor, max_ongoing_requests=4096)
    handles = {name: policy_deployment.options(name=f"policy-{name}",
                                               ray_actor_options={"num_cpus": parsed.num_cpus_per_policy}).bind(
        path, max_batch_size=parsed.max_batch_size) for name, path in _policy_dirs(parsed.policies).items()}

    @serve.deployment(name="ReasonServer", ray_actor_options={"num_cpus": 0}, max_ongoing_requests=256,
                      backpressure_config=serve_backpressure())
    @serve.ingress()
    class ReasonServer:
        def __init__(self, policy_handles: dict[str, Any], app_args: dict[str, Any]) -> None:
            self.policies = {name: _HandlePolicy(name, h) for name, h in policy_handles.items()}
            self.args = ReasonAppArgs.model_validate(app_args)

        def __serve_build_asgi_app__(self) -> Any:
            return create_reason_api(self.policies, self.args)

    return ReasonServer.bind(handles, parsed.model_dump())
