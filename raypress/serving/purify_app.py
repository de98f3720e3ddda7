"""The ``purify`` Ray Serve application: protected images in, BridgePure-purified images out.

Why a plain FastAPI app built by ``create_purify_app``: the same routes run inside the Serve
replica (``build_purify_app`` builds them there, after the replica has loaded the bridge once)
and under ``fastapi.testclient.TestClient`` in tests that must not start Ray. The model side (loading
the bridge, sampling) is ``raypress.inference.purifier.Purifier``; this module is HTTP and Serve glue.

Routes:
- ``POST /v1/purify`` with JSON ``{"images": [base64 PNG, ...], "steps"?, "churn_step_ratio"?,
  "guidance"?, "seed"?}`` (a ``data:image/png;base64,`` prefix is accepted), or one image as the
  raw body (``Content-Type: image/png`` or ``application/octet-stream``) or as the first file of
  a ``multipart/form-data`` body, with the options as query parameters. Answer:
  ``{"images": [base64 PNG, ...], "model", "objective", "steps", "nfe", "seed", "seconds"}``;
  every image comes back at its own size (the model's).
- ``GET /health`` (no token needed: for probes), ``GET /v1/model`` (the saved config + defaults).

A bridge trained with ``objective: one_step`` (the supervised baseline) answers with one network
call (``VEBridge.one_step_inverse``); a DDBM bridge runs the hybrid sampler (``VEBridge.sample``).
Errors use the OpenAI error body of ``openai_app``: 400 names the field or ``images[i]`` (bad
base64, a corrupt image, a wrong size), 401 without the bearer token when one is set, 413 for a
body over ``max_request_bytes``; a request that fails leaves the server serving. Decoding,
sampling and PNG encoding run in worker threads (sampling one request at a time per replica: a
lock): ``/health`` keeps answering while a long request works, and Serve's
``max_ongoing_requests`` bounds the queue (its 503 carries ``Retry-After``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import time
from email.parser import BytesParser
from email.policy import HTTP
from pathlib import Path
from typing import Any

import numpy as np
import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.concurrency import run_in_threadpool

from raypress.image_codecs import decode_image, encode_png
from raypress.inference.purifier import ONE_STEP, Purifier
from raypress.models.device import choose_device
from raypress.serving.http_limits import PURIFY_MAX_REQUEST_BYTES, serve_backpressure
from raypress.serving.http_guards import APIError, install_guards, validation_error

_ROW_PREFIX = re.compile(r"^row '[^']*': ")


class PurifyOptions(BaseModel):
    """Sampler options a request may set; unset ones take the app's defaults."""

    model_config = ConfigDict(extra="forbid")

    steps: int | None = Field(None, ge=1, le=1000, description="sampler steps (paper: 40)")
    churn_step_ratio: float | None = Field(None, ge=0.0, lt=1.0, description="stochastic step fraction")
    guidance: float | None = Field(None, ge=0.0, le=10.0, description="h-transform guidance w")
    seed: int | None = Field(None, ge=0, le=2**63 - 1, description="noise seed (default: a random one, returned)")


class PurifyRequest(PurifyOptions):
    images: list[str] = Field(min_length=1, description="base64-encoded PNG (or any Pillow format) images")


class PurifyAppArgs(BaseModel):
    """What the app needs; invalid args fail the deploy with a message naming the field."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="a bridge Model directory (config.json of kind bridgepure_ddbm + model.pt)")
    model_name: str | None = Field(None, description="the name answers carry (default: the directory name)")
    steps: int = Field(10, ge=1, le=1000, description="default sampler steps: the purify op's default, so the "
                                                      "server answers what the pipeline's purify node writes")
    churn_step_ratio: float = Field(0.33, ge=0.0, lt=1.0)
    guidance: float = Field(0.5, ge=0.0, le=10.0)
    max_images: int = Field(256, ge=1, description="most images per request (400 above it)")
    max_request_bytes: int = Field(PURIFY_MAX_REQUEST_BYTES, ge=1, description="larger request bodies get 413 "
                                   "(default 64 MiB: max_images base64 PNGs of up to 256x256 RGB)")
    api_key: str | None = Field(None, description="require `Authorization: Bearer <key>`")
    device: str | None = Field(None, description="cpu | cuda (default: cuda when the replica has a GPU)")
    num_cpus: float = Field(1.0, ge=0, description="CPUs the replica reserves (also its torch threads)")
    num_gpus: float = Field(0.0, ge=0)
    num_replicas: int = Field(1, ge=1)
    max_ongoing_requests: int = Field(16, ge=1, description="requests a replica holds before Serve answers 503")

    @field_validator("model")
    @classmethod
    def _model_dir(cls, value: str) -> str:
        path = Path(value).expanduser()
        if not (path / "config.json").is_file():
            raise ValueError(f"{value} is not a model directory (no config.json)")
        return str(path.resolve())

    @property
    def served_name(self) -> str:
        return self.model_name or Path(self.model).name


def _b64decode(text: str, index: int) -> bytes:
    payload = text.split(",", 1)[1] if text.startswith("data:") and "," in text else text
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as error:
        raise APIError(400, f"images[{index}]: not valid base64 ({error})", param=f"images[{index}]") from error
    if not data:
        raise APIError(400, f"images[{index}]: empty image", param=f"images[{index}]")
    return data


def _b64decode_all(texts: list[str]) -> list[bytes]:
    return [_b64decode(text, i) for i, text in enumerate(texts)]


def _b64encode_all(images: np.ndarray) -> list[str]:
    return [base64.b64encode(encode_png(img)).decode("ascii") for img in images]


def decode_request_images(blobs: list[bytes], purifier: Purifier) -> np.ndarray:
    """Decode every image or answer 400 naming the first bad one (corrupt bytes, wrong size)."""
    arrays = []
    for index, blob in enumerate(blobs):
        try:
            arrays.append(decode_image(blob, f"images[{index}]", purifier.image_size, purifier.mode))
        except ValueError as error:
            reason = _ROW_PREFIX.sub("", str(error)).replace("this op expects", "the model expects")
            raise APIError(400, f"images[{index}]: {reason}", param=f"images[{index}]") from error
    return np.stack(arrays)


def _multipart_file(body: bytes, content_type: str) -> bytes:
    """The first part of a ``multipart/form-data`` body (the stdlib MIME parser: no extra package)."""
    header = b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
    message = BytesParser(policy=HTTP).parsebytes(header + body)
    if not message.is_multipart():
        raise APIError(400, "the multipart body could not be parsed (is the boundary right?)", param="images[0]")
    for part in message.iter_parts():
        payload = part.get_payload(decode=True)
        if payload:
            return payload
    raise APIError(400, "the multipart body holds no file", param="images[0]")


def _invalid(error: ValidationError) -> APIError:
    return validation_error(RequestValidationError(error.errors()))


def create_purify_app(model: str | Path | Purifier, args: PurifyAppArgs | None = None) -> FastAPI:
    """The FastAPI app over a bridge Model directory (loaded here) or an already loaded ``Purifier``."""
    if isinstance(model, Purifier):
        purifier = model
        settings = args or PurifyAppArgs(model=str(model.model_dir))
    else:
        settings = args or PurifyAppArgs(model=str(model))
        purifier = Purifier(settings.model, settings.device or "cpu")
    name = settings.served_name
    app = FastAPI(title="raypress purify", version="1")

    install_guards(app, settings.api_key, settings.max_request_bytes)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "model": name, "objective": purifier.objective}

    @app.get("/v1/model")
    async def model_info() -> dict[str, Any]:
        return {"model": name, "objective": purifier.objective, "image_size": list(purifier.image_size),
                "channels": purifier.channels, "device": str(purifier.device),
                "defaults": {"steps": settings.steps, "churn_step_ratio": settings.churn_step_ratio,
                             "guidance": settings.guidance},
                "max_images": settings.max_images, "config": purifier.config}

    async def parse(request: Request) -> tuple[list[bytes], PurifyOptions]:
        content_type = request.headers.get("content-type", "").lower()
        if content_type.startswith("application/json") or not content_type:
            try:
                raw = await run_in_threadpool(json.loads, await request.body())  # up to 64 MiB: not on the loop
            except ValueError as error:
                raise APIError(400, f"the request body is not valid JSON: {error}") from error
            try:
                body = PurifyRequest.model_validate(raw)
            except ValidationError as error:
                raise _invalid(error) from error
            if len(body.images) > settings.max_images:
                raise APIError(400, f"images: {len(body.images)} images, at most {settings.max_images} per request",
                               param="images")
            return await run_in_threadpool(_b64decode_all, body.images), body
        try:
            options = PurifyOptions.model_validate(dict(request.query_params))
        except ValidationError as error:
            raise _invalid(error) from error
        body_bytes = await request.body()
        if content_type.startswith("multipart/form-data"):
            return [await run_in_threadpool(_multipart_file, body_bytes, request.headers["content-type"])], options
        if content_type.startswith(("image/", "application/octet-stream")):
            if not body_bytes:
                raise APIError(400, "images[0]: empty body", param="images[0]")
            return [body_bytes], options
        raise APIError(415 if content_type else 400, f"unsupported content type {content_type!r}: send JSON, "
                       "an image body (image/png) or multipart/form-data")

    @app.post("/v1/purify")
    async def purify(request: Request) -> dict[str, Any]:
        blobs, options = await parse(request)
        images = await run_in_threadpool(decode_request_images, blobs, purifier)
        steps = options.steps or settings.steps
        churn = settings.churn_step_ratio if options.churn_step_ratio is None else options.churn_step_ratio
        guidance = settings.guidance if options.guidance is None else options.guidance
        seed = options.seed if options.seed is not None else int(np.random.default_rng().integers(2**31))
        start = time.perf_counter()
        out = await run_in_threadpool(purifier.purify, images, steps, churn, guidance, seed)
        return {"images": await run_in_threadpool(_b64encode_all, out), "model": name,
                "objective": purifier.objective, "steps": 1 if purifier.objective == ONE_STEP else steps,
                "nfe": purifier.nfe(steps, churn), "seed": seed, "seconds": time.perf_counter() - start}

    return app


def build_purify_app(args: dict[str, Any]) -> Any:
    """The Serve application (``import_path: raypress.serving.purify_app:build_purify_app``)."""
    from ray import serve

    parsed = PurifyAppArgs.model_validate(args)

    @serve.deployment(name="PurifyServer", health_check_period_s=10, health_check_timeout_s=30)
    @serve.ingress()
    class PurifyServer:
        """Loads the bridge once per replica; the routes are ``create_purify_app``'s."""

        def __init__(self, app_args: dict[str, Any]) -> None:
            self.args = PurifyAppArgs.model_validate(app_args)
            a = self.args
            device = choose_device(a.device, gpu=a.num_gpus > 0)
            if device == "cpu":
                torch.set_num_threads(max(1, int(a.num_cpus)))
            self.purifier = Purifier(a.model, device)

        def __serve_build_asgi_app__(self) -> Any:
            return create_purify_app(self.purifier, self.args)

    return PurifyServer.options(
        num_replicas=parsed.num_replicas, max_ongoing_requests=parsed.max_ongoing_requests,
        ray_actor_options={"num_cpus": parsed.num_cpus, "num_gpus": parsed.num_gpus},
        backpressure_config=serve_backpressure(),
    ).bind(parsed.model_dump())
