"""Where an LLM op's requests go: the params, a ``serve_llm`` node's Report, or the environment.

The order is Data-Juicer's, with the DAG in it: the chat URL is ``api_endpoint`` when it is a
whole URL, else the base URL + ``api_endpoint`` (default ``/chat/completions``); the base URL is
``model_params.base_url``, or the ``endpoint`` input (the Report of a ``serve_llm`` node in the
same pipeline: its ``base_url``, the model it serves and the variable of its key), or
``$OPENAI_BASE_URL``.  The key is read from the environment variable ``api_key_env`` names (the
Report's, for an ``endpoint`` input) on the machine that starts the run, never from the pipeline.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from raypress.operators.llm.api.client import DEFAULT_RESPONSE_PATH, ChatClient
from raypress.operators.llm.api.params import ApiParams, is_http_url
from raypress.operators.shared.served_endpoint import served_endpoint

ENV_BASE_URL = "OPENAI_BASE_URL"
DEFAULT_CHAT_PATH = "/chat/completions"


def chat_client(op: str, params: ApiParams, model_field: str, report: Any | None,
                environ: Mapping[str, str] = os.environ) -> ChatClient:
    """The client of op ``op`` (its name, for messages); ValueError saying what to set when the
    endpoint cannot be found or the inputs contradict each other."""
    metrics = _report_metrics(op, report)
    mp = params.model_params
    model = _model(op, params, model_field, metrics)
    base = mp.get("base_url")
    if metrics is not None:
        if base is not None:
            raise ValueError(f"{op}: both model_params.base_url and an `endpoint` input name the server; give one")
        base = metrics["base_url"]
    endpoint = params.api_endpoint or DEFAULT_CHAT_PATH
    if base is None and "://" not in endpoint:
        base = environ.get(ENV_BASE_URL) or None
        if base is None:
            raise ValueError(f"{op}: no endpoint to ask: set model_params.base_url (or a whole api_endpoint URL), "
                             f"export {ENV_BASE_URL}, or give the node an `endpoint` input from a serve_llm node")
        if not is_http_url(base):
            raise ValueError(f"{op}: ${ENV_BASE_URL} must be an http(s) URL (got {base!r})")
    url = endpoint if "://" in endpoint else base.rstrip("/") + "/" + endpoint.lstrip("/")
    key_env = (metrics or {}).get("api_key_env") or params.api_key_env
    key = environ.get(key_env) or None
    if key is None and (metrics or {}).get("api_key_env"):
        raise ValueError(f"{op}: the endpoint input requires the key in ${key_env}, which is not set here")
    if key is None and key_env != ApiParams.model_fields["api_key_env"].default:
        raise ValueError(f"{op}: api_key_env names ${key_env}, which is not set here")
    return ChatClient(url=url, model=model, api_key=key, timeout=float(mp.get("timeout", 600.0)),
                      max_retries=int(mp.get("max_retries", 2)), default_headers=dict(mp.get("default_headers") or {}),
                      response_path=params.response_path or DEFAULT_RESPONSE_PATH,
                      models_url=None if base is None else base.rstrip("/") + "/models",
                      max_connections=params.concurrency)


def _report_metrics(op: str, report: Any | None) -> dict[str, Any] | None:
    if report is None:
        return None
    served_endpoint(op, report)  # a serve_llm Report, or a ValueError that says so
    return report.metrics


def _model(op: str, params: ApiParams, model_field: str, metrics: dict[str, Any] | None) -> str | None:
    """The model to name: the op's own unless an ``endpoint`` input serves one; the op's field may
    then only repeat it or keep its default (a resolved pipeline writes every default out)."""
    own = getattr(params, model_field)
    if metrics is None:
        return own
    served = str(metrics["model"])
    default = type(params).model_fields[model_field].default
    if own not in (None, default, served):
        raise ValueError(f"{op}: {model_field} is {own!r} but the `endpoint` input serves {served!r}")
    return served
