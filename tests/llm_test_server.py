"""A flaky OpenAI-compatible server for tests: answers 429 and 500 on a schedule, forwards the rest.

Run as its own process (``python tests/llm_test_server.py --port P --upstream URL --schedule
429,500,ok``): the n-th ``POST /v1/chat/completions`` gets the schedule's n-th entry — ``429``
(with ``retry-after-ms``), ``500``, ``503`` or ``ok`` — and every request past the schedule, or
``ok``, goes to ``UPSTREAM/chat/completions`` (a real raypress server) with its body and
``Authorization``; the upstream's answer comes back as it is.  ``GET /stats`` says what happened:
requests received, errors served, answers forwarded and the usage those answers reported.
"""

from __future__ import annotations

import argparse
import asyncio
import json

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

RETRY_AFTER_MS = "30"


def make_app(upstream: str, schedule: list[str]) -> Starlette:
    lock = asyncio.Lock()
    stats = {"received": 0, "errors": {}, "forwarded": 0, "prompt_tokens": 0, "completion_tokens": 0}
    client = httpx.AsyncClient(timeout=120.0)

    async def chat(request: Request) -> Response:
        async with lock:
            turn = stats["received"]
            stats["received"] += 1
        planned = schedule[turn] if turn < len(schedule) else "ok"
        if planned != "ok":
            status = int(planned)
            stats["errors"][planned] = stats["errors"].get(planned, 0) + 1
            headers = {"retry-after-ms": RETRY_AFTER_MS} if status == 429 else {}
            body = {"error": {"message": f"scheduled {status} (request {turn})", "type": "server_error",
                              "code": None, "param": None}}
            return JSONResponse(body, status_code=status, headers=headers)
        auth = {"Authorization": request.headers["authorization"]} if "authorization" in request.headers else {}
        answer = await client.post(f"{upstream}/chat/completions", content=await request.body(),
                                   headers={"Content-Type": "application/json", **auth})
        if answer.status_code == 200:
            usage = answer.json().get("usage") or {}
            async with lock:
                stats["forwarded"] += 1
                stats["prompt_tokens"] += int(usage.get("prompt_tokens", 0))
                stats["completion_tokens"] += int(usage.get("completion_tokens", 0))
        return Response(answer.content, status_code=answer.status_code, media_type="application/json")

    async def models(request: Request) -> Response:
        answer = await client.get(f"{upstream}/models")
        return Response(answer.content, status_code=answer.status_code, media_type="application/json")

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def report(request: Request) -> Response:
        return JSONResponse(stats)

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                             Route("/v1/models", models), Route("/health", health), Route("/stats", report)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="base URL of the real server, e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--schedule", default="", help="comma-separated: 429, 500, 503 or ok, one per request")
    args = parser.parse_args()
    schedule = [s.strip() for s in args.schedule.split(",") if s.strip()]
    bad = [s for s in schedule if s not in ("ok", "429", "500", "503")]
    if bad:
        parser.error(f"unknown schedule entries {bad}")
    print(json.dumps({"port": args.port, "schedule": schedule}), flush=True)
    uvicorn.run(make_app(args.upstream.rstrip("/"), schedule), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
