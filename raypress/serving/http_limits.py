"""Limits every raypress HTTP app shares: a request-body size cap (413) and ``Retry-After`` on 503.

Why an ASGI middleware and not a check in each route: a route sees the body only after FastAPI
has read all of it into memory; the middleware refuses a declared ``Content-Length`` over the
limit before reading a byte, and stops a chunked (length-less) body as soon as the bytes received
pass the limit, whatever route or content type the request was for.
"""

from __future__ import annotations

from typing import Any

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MIB = 1024 * 1024
# Each app's default body limit (``max_request_bytes`` in its args).
LLM_MAX_REQUEST_BYTES = 4 * MIB  # a 128k-token context is ~0.5 MB of text: room for several prompts
PURIFY_MAX_REQUEST_BYTES = 64 * MIB  # 256 base64 PNGs of up to ~190 KB (256x256 RGB) each
REASON_MAX_REQUEST_BYTES = 1 * MIB  # a question and its metadata
RETRY_AFTER_S = 1  # what a 503 tells a client to wait: the engine's queue drains in about a step


def retry_after(status: int) -> dict[str, str]:
    """The ``Retry-After`` header a 503 carries (empty for any other status)."""
    return {"Retry-After": str(RETRY_AFTER_S)} if status == 503 else {}


def serve_backpressure() -> Any:
    """Serve's own 503 (a deployment's ``max_queued_requests`` reached) with the same ``Retry-After``."""
    from ray.serve.config import BackpressureConfig

    return BackpressureConfig(status_code=503, retry_after_s=RETRY_AFTER_S)


class RequestTooLarge(Exception):
    """Raised from ``receive`` once a body passes the limit; the middleware answers 413."""


def too_large_response(max_bytes: int) -> JSONResponse:
    from raypress.serving.http_guards import error_body  # it imports this module

    message = f"the request body is larger than this server's limit of {max_bytes} bytes"
    return JSONResponse(error_body(message, "invalid_request_error", None, "request_too_large"), 413,
                        headers={"Connection": "close"})


def declared_length(scope: Scope) -> int | None:
    """``Content-Length`` as an int; ``None`` when absent or malformed (the server rejects those)."""
    value = Headers(scope=scope).get("content-length")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


class BodySizeLimit:
    """413 for an HTTP request whose body is over ``max_bytes``, declared or received."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = declared_length(scope)
        if declared is not None and declared > self.max_bytes:
            await too_large_response(self.max_bytes)(scope, receive, send)
            return
        await _LimitedRequest(self.app, self.max_bytes, receive, send).run(scope)


class _LimitedRequest:
    """One request's byte count. Once over, the app's own answer (FastAPI turns the error into a 400,
    a route may let it escape) is dropped and the 413 sent instead, unless a response has started."""

    def __init__(self, app: ASGIApp, max_bytes: int, receive: Receive, send: Send) -> None:
        self.app, self.max_bytes, self._receive, self._send = app, max_bytes, receive, send
        self.received = 0
        self.over = False
        self.started = False

    async def run(self, scope: Scope) -> None:
        try:
            await self.app(scope, self.receive, self.send)
        except Exception:
            if not self.over or self.started:
                raise
        if self.over and not self.started:
            await too_large_response(self.max_bytes)(scope, self._receive, self._send)

    async def receive(self) -> Message:
        if self.over:
            raise RequestTooLarge(self.max_bytes)
        message = await self._receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.max_bytes:
                self.over = True
                raise RequestTooLarge(self.max_bytes)
        return message

    async def send(self, message: Message) -> None:
        if self.over and not self.started:
            return
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


def limit_request_body(app: Any, max_bytes: int | None) -> None:
    """Cap ``app``'s request bodies at ``max_bytes`` (``None``: no cap). Call before the app serves."""
    if max_bytes is not None:
        app.add_middleware(BodySizeLimit, max_bytes=max_bytes)
