"""The OpenAPI document of a raypress HTTP app says what its server really answers.

Why a post-processing step over FastAPI's generated document: FastAPI documents a 422 that our
apps never send (``install_guards`` turns validation errors into OpenAI's 400) and none of the
codes they do send (401 without the key, 404, 405, 413 before the body is read, 503 with
``Retry-After``), nor the bearer scheme. Generated clients and contract testers (schemathesis,
``--checks all`` in the test suite) read the document, so it must list every status a route can
answer, the headers those answers carry and the media types of their bodies.

A route adds its own codes with FastAPI's ``responses={404: {"description": ...}}``; this module
gives every error answer OpenAI's error body and adds the codes every route shares.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

ERROR_SCHEMA_NAME = "ErrorResponse"
ERROR_SCHEMA: dict[str, Any] = {
    "title": ERROR_SCHEMA_NAME,
    "description": "OpenAI's error body.",
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["message", "type"],
        "properties": {
            "message": {"type": "string"},
            "type": {"type": "string"},
            "param": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "code": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
    }},
}
BEARER_SCHEME = "bearer"
_HEADER = {"schema": {"type": "string"}, "required": True}


def document_contract(app: FastAPI, api_key: str | None, open_paths: Collection[str],
                      max_request_bytes: int | None) -> None:
    """Replace ``app.openapi`` with one that documents the answers ``install_guards`` gives."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(title=app.title, version=app.version, openapi_version=app.openapi_version,
                               description=app.description, routes=app.routes)
            app.openapi_schema = amend(spec, protected=_protected(api_key, open_paths),
                                       max_request_bytes=max_request_bytes)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _protected(api_key: str | None, open_paths: Collection[str]) -> Callable[[str], bool]:
    return lambda path: api_key is not None and path not in open_paths


def amend(spec: dict[str, Any], protected: Callable[[str], bool], max_request_bytes: int | None) -> dict[str, Any]:
    """``spec`` with the shared error answers, the error body and the bearer scheme (changed in place)."""
    components = spec.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas[ERROR_SCHEMA_NAME] = ERROR_SCHEMA
    any_protected = False
    for path, operations in spec.get("paths", {}).items():
        methods = sorted(method.upper() for method in operations if method != "parameters")
        for operation in operations.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            has_input = "requestBody" in operation or bool(operation.get("parameters"))
            responses = operation["responses"]
            if "HTTPValidationError" in str(responses.get("422", {})):  # FastAPI's default, never sent
                responses.pop("422")
            if has_input:
                responses.setdefault("400", {"description": "invalid request: the body or a parameter "
                                                            "does not match this schema, or malformed JSON"})
            if protected(path):
                any_protected = True
                operation["security"] = [{BEARER_SCHEME: []}]
                responses.setdefault("401", {"description": "no valid API key (Authorization: Bearer <key>)",
                                             "headers": {"WWW-Authenticate": _HEADER}})
            if "requestBody" in operation and max_request_bytes is not None:
                responses.setdefault("413", {"description": f"the body is over {max_request_bytes} bytes "
                                                            "(refused before it is read)"})
            responses.setdefault("405", {"description": "another method on this path",
                                         "headers": {"Allow": {**_HEADER, "description": ", ".join(methods)}}})
            for status, response in responses.items():
                if status.startswith(("4", "5")):
                    response.setdefault("content", {"application/json": {
                        "schema": {"$ref": f"#/components/schemas/{ERROR_SCHEMA_NAME}"}}})
                if status == "503":
                    response.setdefault("headers", {})["Retry-After"] = {
                        **_HEADER, "description": "seconds to wait before trying again"}
    if any_protected:
        components.setdefault("securitySchemes", {})[BEARER_SCHEME] = {"type": "http", "scheme": "bearer"}
    return spec
