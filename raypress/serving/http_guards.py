"""What every raypress HTTP app shares: one error body, one auth rule, one body limit.

Why its own module: the pipelines service answers with the same error shape and bearer check as
the LLM, purify and reason apps, but must not import the inference engine (torch) to do so.
"""

from __future__ import annotations

import hmac
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException

from raypress.serving.http_limits import limit_request_body, retry_after
from raypress.serving.openapi_contract import document_contract

OPEN_PATHS = frozenset({"/health", "/metrics", "/docs", "/openapi.json"})


def error_body(message: str, type_: str = "invalid_request_error", param: str | None = None,
               code: str | None = None) -> dict[str, Any]:
    """OpenAI's error shape; its client turns it into ``openai.BadRequestError`` etc."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


class APIError(Exception):
    """An error answered with an OpenAI error body."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type_, param, code

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else retry_after(self.status)
        return JSONResponse(error_body(self.message, self.type, self.param, self.code), self.status, headers)


def validation_error(exc: RequestValidationError) -> APIError:
    """pydantic's error list -> one readable 400 naming the first bad field."""
    errors = exc.errors()
    first = errors[0] if errors else {"loc": (), "msg": "invalid request"}
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    if first.get("type") == "json_invalid":
        return APIError(400, f"the request body is not valid JSON: {first.get('ctx', {}).get('error', first['msg'])}")
    param = ".".join(loc) or None
    if param is None and first.get("type") == "missing":
        return APIError(400, "the request needs a JSON body (Content-Type: application/json)")
    where = f"{param}: " if param else ""
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return APIError(400, f"{where}{first['msg']}{more}", param=param)


class BearerToken:
    """401 unless ``Authorization: Bearer <api_key>`` (paths in ``open_paths`` excepted).

    Why plain ASGI and not ``@app.middleware("http")``: Starlette's ``BaseHTTPMiddleware`` runs
    every request in a task of its own and passes every streamed body chunk through a memory
    stream; on a server streaming tokens to 32 clients that was a cost per request and per chunk
    for a header check (``bench/serve_path.py``)."""

    def __init__(self, app: Any, api_key: str, open_paths: frozenset[str]) -> None:
        self.app, self.key, self.open_paths = app, api_key.encode(), open_paths

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] not in self.open_paths:
            header = Headers(scope=scope).get("authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(), self.key):
                response = APIError(401, "a valid API key is required (Authorization: Bearer <key>)",
                                    "authentication_error", code="invalid_api_key").response()
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def allowed_methods(request: Request) -> list[str]:
    """Every method some route on the request's path answers (routes are per method and path)."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in request.app.router.routes:
        if route.matches(request.scope)[0] is not Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return sorted(methods)


def install_guards(app: FastAPI, api_key: str | None, max_request_bytes: int | None = None,
                   open_paths: frozenset[str] = OPEN_PATHS) -> None:
    """The bearer-token check (every path but ``OPEN_PATHS``), the body-size limit (413) and
    OpenAI-style error bodies for every error — shared by each raypress HTTP app, so a client sees
    one error shape and one auth rule."""

    if api_key is not None:
        app.add_middleware(BearerToken, api_key=api_key, open_paths=open_paths)

    @app.exception_handler(APIError)
    async def api_error(_: Request, exc: APIError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return validation_error(exc).response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = "not_found" if exc.status_code == 404 else None
        response = APIError(exc.status_code, str(exc.detail), code=code).response()
        response.headers.update(exc.headers or {})  # a 405's ``Allow`` (RFC 9110)
        if exc.status_code == 405:  # Starlette names only the first route on the path; a path has several
            response.headers["Allow"] = ", ".join(allowed_methods(request))
        return response

    limit_request_body(app, max_request_bytes)  # outermost: a body over the limit is never read
    document_contract(app, api_key, open_paths, max_request_bytes)
