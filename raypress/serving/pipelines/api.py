"""The pipelines API's routes (FastAPI), over :class:`PipelinesService`.

Why a plain app factory: the same routes run inside the Serve replica (``deployment``) and under
``TestClient`` in tests without Ray.  Blocking work (YAML, resolving, the Jobs API, parquet) runs
in worker threads, so ``/health`` and event streams keep their latency while a submit resolves.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Header, Path as PathParam, Query, Request
from fastapi.responses import FileResponse, JSONResponse, RedirectResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from raypress.serving.http_guards import OPEN_PATHS, APIError, error_body, install_guards
from raypress.serving.pipelines.event_feed import RunFeeds
from raypress.serving.pipelines.run_files import (
    BadCursor,
    NotInRun,
    RejectQuery,
    artifact_file,
    list_artifacts,
    logs_page,
    rejects_page,
)
from raypress.serving.pipelines.run_view import STATES, node_params, summary
from raypress.serving.pipelines.service import InvalidPipeline, PipelinesService

PAGE_DIR = Path(__file__).resolve().parent / "page"
PAGE_FILES = {"/": "index.html", "/ui/app.js": "app.js", "/ui/style.css": "style.css"}
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}\.(yaml|yml)$"
MAX_OFFSET = 10**18 - 1  # what an event id (18 digits) can say; a file offset fits a C off_t
RUN_ID_PATTERN = r"^\d{8}-\d{6}-[0-9a-f]{8}$"
_RUN_ID = PathParam(max_length=100, description="a run id (YYYYMMDD-HHMMSS-8 hex digits)")

SSE_EVENT = {"type": "object", "required": ["data"], "description": "one server-sent event: `data` is JSON "
             "(an events.jsonl record, or {state, reason} for `state` and `end`)",
             "properties": {"data": {"type": "string"}, "event": {"type": "string", "enum": ["message", "state", "end"]},
                            "id": {"type": "string", "pattern": r"^\d+$"}}}
State = Literal["queued", "running", "succeeded", "failed", "cancelled", "crashed"]


class PipelineRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    yaml: str = Field(max_length=1_000_000, description="the pipeline file's text")
    overrides: list[str] = Field(default_factory=list, max_length=100,
                                 description="NODE.PARAM=VALUE, as `--set` (VALUE is YAML)")
    filename: str = Field("pipeline.yaml", pattern=NAME_PATTERN,
                          description="the name problems are reported against")


class RunRequest(PipelineRequest):
    analyze: bool = Field(False, description="run every filter in stats mode (nothing dropped) and write the "
                                             "analysis (reports/analysis/analysis.json and report.html), as "
                                             "`raypress analyze`")


class ProblemOut(BaseModel):
    line: int | None
    column: int | None
    node: str | None
    key: str | None
    message: str
    text: str


class ValidateOut(BaseModel):
    ok: bool
    problems: list[ProblemOut]


class RunSummary(BaseModel):
    model_config = ConfigDict(extra="allow")

    id: str
    name: str
    state: State
    reason: str | None
    created: float
    run_dir: str
    mode: Literal["run", "analyze"]
    attempts: int
    job_id: str | None
    cancel_requested: bool
    adds_up: bool | None = Field(description="the ledger adds up (null until the run has a final ledger)")
    unfinished: int | None = Field(description="nodes the run did not finish (a failed or cancelled run's)")


class RunList(BaseModel):
    runs: list[RunSummary]
    next_cursor: str | None


class RunDetail(RunSummary):
    nodes: list[dict[str, Any]]
    started: float | None
    finished: float | None
    attempt_history: list[dict[str, Any]]
    overrides: list[str]
    ledger: dict[str, Any] | None


class LogsOut(BaseModel):
    lines: list[dict[str, Any]]
    next_cursor: str


class RejectsOut(BaseModel):
    rows: list[dict[str, Any]]
    next_cursor: str | None


class CancelOut(BaseModel):
    id: str
    cancel_requested: bool
    grace_s: int


class ArtifactList(BaseModel):
    artifacts: list[dict[str, Any]]


class OpOut(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str
    kind: str | None
    summary: str
    available: bool
    params_schema: dict[str, Any] | None


class OpList(BaseModel):
    ops: list[OpOut]


def _not_found(what: str) -> dict[int, dict[str, str]]:
    return {404: {"description": what}}


RUN_404 = _not_found("no such run")
INVALID_422 = {422: {"description": "the pipeline has problems (listed in `problems`, each with its line)"}}


def _op_entry(name: str) -> dict[str, Any]:
    from raypress.operators.registry import OpUnavailable, get_op, missing_requirements, missing_text

    missing = missing_requirements(name)
    if missing:
        return {"name": name, "kind": None, "summary": missing_text(name, missing), "available": False,
                "params_schema": None}
    try:
        cls = get_op(name)
    except OpUnavailable as exc:
        return {"name": name, "kind": None, "summary": str(exc), "available": False, "params_schema": None}
    if cls is None:
        raise KeyError(name)
    try:
        schema = cls.Params.model_json_schema(mode="validation")
    except Exception as exc:  # noqa: BLE001 - a param type JSON Schema cannot say: named, not hidden
        schema = {"description": f"not expressible as JSON Schema: {exc}"}
    return {"name": name, "kind": cls.kind.value, "summary": cls.summary(), "available": True,
            "params_schema": schema, "inputs": {k: v.value for k, v in cls.inputs.items()},
            "output": cls.output.value}


class OpsCatalog:
    """Every op's entry, built once (loading every op imports every domain: seconds)."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, Any]] | None = None

    def entries(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            from raypress.operators.registry import known_names

            self._entries = {name: _op_entry(name) for name in sorted(known_names())}
        return self._entries


def _sse(data: Any, event: str | None = None, event_id: int | None = None) -> str:
    head = (f"id: {event_id}\n" if event_id is not None else "") + (f"event: {event}\n" if event else "")
    return head + f"data: {json.dumps(data, separators=(',', ':'))}\n\n"


def create_pipelines_app(service: PipelinesService, api_key: str | None = None,
                         max_request_bytes: int | None = 1024 * 1024) -> FastAPI:
    app = FastAPI(title="raypress pipelines", version="1",
                  description="Validate, submit and watch raypress pipeline runs; every dropped row "
                              "can be found from its node and reason.")
    app.state.service = service
    catalog = OpsCatalog()
    feeds = RunFeeds()
    install_guards(app, api_key, max_request_bytes, open_paths=OPEN_PATHS | set(PAGE_FILES) | {"/ui"})

    @app.exception_handler(InvalidPipeline)
    async def invalid(_: Request, exc: InvalidPipeline) -> JSONResponse:
        body = error_body(f"the pipeline has {len(exc.problems)} problem(s): {exc}", param="yaml",
                          code="invalid_pipeline")
        return JSONResponse({**body, "problems": exc.problems}, 422)

    @app.exception_handler(BadCursor)
    async def bad_cursor(_: Request, exc: BadCursor) -> JSONResponse:
        return APIError(400, str(exc), param="cursor").response()

    # the page

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(PAGE_DIR / "index.html", media_type="text/html")

    @app.get("/ui", include_in_schema=False)
    async def page_alias() -> RedirectResponse:
        return RedirectResponse("/")

    @app.get("/ui/app.js", include_in_schema=False)
    async def page_script() -> FileResponse:
        return FileResponse(PAGE_DIR / "app.js", media_type="text/javascript")

    @app.get("/ui/style.css", include_in_schema=False)
    async def page_style() -> FileResponse:
        return FileResponse(PAGE_DIR / "style.css", media_type="text/css")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    # pipelines

    @app.post("/v1/validate", response_model=ValidateOut)
    async def validate(body: PipelineRequest) -> dict[str, Any]:
        problems = await run_in_threadpool(service.check, body.yaml, body.overrides, body.filename)
        return {"ok": not problems, "problems": problems}

    @app.post("/v1/runs", status_code=202, response_model=RunSummary,
              responses={200: {"description": "the run this Idempotency-Key already made", "model": RunSummary},
                         409: {"description": "the Idempotency-Key was used for another request"},
                         503: {"description": "the server's run queue is full"}, **INVALID_422})
    async def submit(body: RunRequest,
                     idempotency_key: str | None = Header(None, max_length=200, pattern=r"^[\x21-\x7e]+$",
                                                          description="one run per key")) -> Any:
        record, new = await run_in_threadpool(service.submit, body.yaml, body.overrides, body.filename,
                                              idempotency_key, body.analyze)
        state, why, ledger = await run_in_threadpool(service.state, record)
        return JSONResponse(summary(record, state, why, ledger), 202 if new else 200,
                            headers={"Location": f"/v1/runs/{record.id}"})

    # The two routes every open run page polls answer their dicts as they are: validating them
    # against the model again on each poll cost the replica more CPU than building them
    # (bench/pipelines_api.py); the models still document them, and the contract test holds them to it.
    @app.get("/v1/runs", response_model=None, responses={200: {"model": RunList, "description": "a page of runs"}})
    async def runs(state: State | None = Query(None), name: str | None = Query(None, max_length=100),
                   cursor: str | None = Query(None, pattern=RUN_ID_PATTERN),
                   limit: int = Query(50, ge=1, le=500)) -> JSONResponse:
        return JSONResponse(await run_in_threadpool(service.list, state, name, cursor, limit))

    @app.get("/v1/runs/{run_id}", response_model=None,
             responses={**RUN_404, 200: {"model": RunDetail, "description": "the run"}})
    async def run(run_id: str = _RUN_ID) -> JSONResponse:
        return JSONResponse(await run_in_threadpool(service.view, run_id))

    @app.post("/v1/runs/{run_id}/cancel", status_code=202, response_model=CancelOut,
              responses={**RUN_404, 409: {"description": "the run has already ended"},
                         502: {"description": "the cluster's Jobs API did not take the stop"}})
    async def cancel(run_id: str = _RUN_ID) -> dict[str, Any]:
        return await run_in_threadpool(service.cancel, run_id)

    @app.post("/v1/runs/{run_id}/resume", status_code=202, response_model=RunSummary,
              responses={**RUN_404, 409: {"description": "the run is not failed, cancelled or crashed"}})
    async def resume(run_id: str = _RUN_ID) -> dict[str, Any]:
        record = await run_in_threadpool(service.resume, run_id)
        state, why, ledger = await run_in_threadpool(service.state, record)
        return summary(record, state, why, ledger)

    @app.get("/v1/runs/{run_id}/events", responses={**RUN_404, 200: {
        "description": "Server-Sent Events: each event of events.jsonl (its byte offset as the id), `state` "
                       "when the run's state changes, `end` once it has ended",
        "content": {"text/event-stream": {"schema": SSE_EVENT}}}})
    async def events(request: Request, run_id: str = _RUN_ID,
                     cursor: int | None = Query(None, ge=0, le=MAX_OFFSET, description="a byte offset (an event's id)"),
                     last_event_id: str = Header("", pattern=r"^\d{0,18}$",
                                                  description="a byte offset: where a reconnecting stream goes on")) -> StreamingResponse:
        record = await run_in_threadpool(service.record, run_id)
        run_dir = Path(record.run_dir)
        start = cursor if cursor is not None else int(last_event_id) if last_event_id else 0

        async def stream() -> Any:
            async for name, data, event_id in feeds.stream(run_id, run_dir, lambda: service.current_state(run_id),
                                                           start, request.is_disconnected):
                yield ": keep-alive\n\n" if data is None else _sse(data, event=name, event_id=event_id)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})

    @app.get("/v1/runs/{run_id}/logs", response_model=LogsOut, responses=RUN_404)
    async def logs(run_id: str = _RUN_ID, node: str | None = Query(None, max_length=200),
                   cursor: str | None = Query(None, max_length=200),
                   limit: int = Query(200, ge=1, le=5000)) -> dict[str, Any]:
        record = await run_in_threadpool(service.record, run_id)
        return await run_in_threadpool(logs_page, Path(record.run_dir), cursor, node, limit)

    @app.get("/v1/runs/{run_id}/nodes/{node}/rejects", response_model=RejectsOut,
             responses=_not_found("no such run or node"))
    async def rejects(run_id: str = _RUN_ID, node: str = PathParam(max_length=200),
                      reason: str | None = Query(None, max_length=500),
                      kind: Literal["filtered", "duplicate", "error"] | None = Query(None),
                      cursor: str | None = Query(None, max_length=1000),
                      limit: int = Query(50, ge=1, le=1000)) -> dict[str, Any]:
        record = await run_in_threadpool(service.record, run_id)
        run_dir = Path(record.run_dir)
        params = await run_in_threadpool(node_params, run_dir, node)
        if params is None:
            raise APIError(404, f"run {run_id} has no node {node!r}", param="node", code="node_not_found")
        query = RejectQuery(node, reason, kind, limit)
        return await run_in_threadpool(rejects_page, run_dir, query, cursor, params)

    @app.get("/v1/runs/{run_id}/artifacts", response_model=ArtifactList, responses=RUN_404)
    async def artifacts(run_id: str = _RUN_ID) -> dict[str, Any]:
        record = await run_in_threadpool(service.record, run_id)
        return {"artifacts": await run_in_threadpool(list_artifacts, Path(record.run_dir))}

    @app.get("/v1/runs/{run_id}/artifacts/{path:path}", responses={**_not_found("no such run or file in it"), 200: {
        "description": "the file, with the media type its name suggests",
        "content": {"*/*": {"schema": {"type": "string", "format": "binary"}}}}})
    async def artifact(run_id: str = _RUN_ID, path: str = PathParam(max_length=1000)) -> FileResponse:
        record = await run_in_threadpool(service.record, run_id)
        try:
            target = await run_in_threadpool(artifact_file, Path(record.run_dir), path)
        except NotInRun:
            raise APIError(404, f"run {run_id} has no file {path!r}", param="path", code="artifact_not_found") from None
        return FileResponse(target)

    # ops

    @app.get("/v1/ops", response_model=OpList)
    async def ops() -> dict[str, Any]:
        entries = await run_in_threadpool(catalog.entries)
        return {"ops": list(entries.values())}

    @app.get("/v1/ops/{name}", response_model=OpOut, responses=_not_found("no such op"))
    async def op(name: str = PathParam(max_length=200)) -> dict[str, Any]:
        entries = await run_in_threadpool(catalog.entries)
        if name not in entries:
            from raypress.suggest import did_you_mean_op

            raise APIError(404, f"unknown op {name!r}{did_you_mean_op(name, list(entries))}", param="name",
                           code="op_not_found")
        return entries[name]

    assert set(STATES) == set(State.__args__)  # the documented states are the ones the service derives
    return app
