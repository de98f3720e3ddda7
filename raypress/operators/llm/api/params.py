"""The parameters every LLM-backed op takes: Data-Juicer's ``api_endpoint``, ``response_path``,
``try_num``, ``model_params``, ``sampling_params``, plus raypress's ``api_key_env`` and
``concurrency``.  What can be checked before a run is checked here: a URL is an http(s) URL, the
endpoint is a chat path, and no secret is written in the pipeline file."""

from __future__ import annotations

import re
from typing import Any, ClassVar
from urllib.parse import urlsplit

from pydantic import Field, PositiveInt, field_validator, model_validator

from raypress.operators.base import TextParams

MODEL_PARAMS = ("base_url", "timeout", "max_retries", "default_headers")
SECRET_HEADERS = ("authorization", "api-key", "x-api-key")
RESERVED_SAMPLING = ("model", "messages")


def is_http_url(text: str) -> bool:
    parts = urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


class ApiParams(TextParams):
    """Where and how to ask; the model's name is each op's own field (``api_model`` mostly)."""

    api_endpoint: str | None = Field(
        None, description="the chat path appended to the base URL (default /chat/completions), or a whole "
        "http(s) URL")
    response_path: str | None = Field(
        None, description="dot path of the answer in the response JSON (default choices.0.message.content)")
    try_num: PositiveInt = Field(
        3, description="requests per row to get an answer that parses (an unparseable answer or a request "
        "that kept failing asks again); after the last, the row is quarantined with the raw answer")
    model_params: dict[str, Any] = Field(
        default_factory=dict, description="the client, as Data-Juicer's openai.OpenAI takes it: base_url "
        "(else the `endpoint` input, else $OPENAI_BASE_URL), timeout (s, default 600), max_retries (of a "
        "request answered 408/409/429/5xx or cut off, with backoff; default 2), default_headers. Never "
        "api_key: name its environment variable in api_key_env")
    sampling_params: dict[str, Any] = Field(
        default_factory=dict, description="extra fields of every request, e.g. {temperature: 0, max_tokens: "
        "256}; Hugging Face's max_new_tokens is sent as max_tokens")
    api_key_env: str = Field(
        "OPENAI_API_KEY", min_length=1, description="environment variable holding the API key (read where the "
        "run starts; the key is never written in a pipeline or run file). A serve_llm `endpoint` input names "
        "its own")
    concurrency: PositiveInt = Field(8, description="requests in flight at once in each task of the node")

    # the flags the op compiles its ``*pattern`` params with (checked here, before a run)
    PATTERN_FLAGS: ClassVar[int] = 0

    @model_validator(mode="after")
    def _patterns_compile(self) -> "ApiParams":
        for name in type(self).model_fields:
            value = getattr(self, name)
            if name.endswith("pattern") and isinstance(value, str):
                try:
                    re.compile(value, self.PATTERN_FLAGS)
                except re.error as exc:
                    raise ValueError(f"{name} is not a regular expression: {exc}") from None
        return self

    @model_validator(mode="before")
    @classmethod
    def _redact_secrets(cls, data: Any) -> Any:
        """A key written in the file is refused (``_model_params``), and never echoed in the message."""
        mp = data.get("model_params") if isinstance(data, dict) else None
        if isinstance(mp, dict) and ("api_key" in mp or isinstance(mp.get("default_headers"), dict)):
            mp = dict(mp)
            if "api_key" in mp:
                mp["api_key"] = "<redacted>"
            if isinstance(mp.get("default_headers"), dict):
                mp["default_headers"] = {k: "<redacted>" if str(k).lower() in SECRET_HEADERS else v
                                         for k, v in mp["default_headers"].items()}
            data = {**data, "model_params": mp}
        return data

    @field_validator("model_params", "sampling_params", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return {} if value is None else value  # Data-Juicer's HF-side ops default them to None

    @field_validator("api_endpoint")
    @classmethod
    def _chat_endpoint(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if "chat" not in value.lower():
            raise ValueError("these ops ask chat completions: api_endpoint must be a chat path such as "
                             "/chat/completions, or a whole URL ending in one")
        if "://" in value and not is_http_url(value):
            raise ValueError("a whole api_endpoint must be an http(s) URL with a host")
        if "://" not in value and not value.startswith("/"):
            raise ValueError("a relative api_endpoint starts with '/' (e.g. /chat/completions)")
        return value

    @field_validator("response_path")
    @classmethod
    def _dotted(cls, value: str | None) -> str | None:
        if value is not None and (not value or any(not part for part in value.split("."))):
            raise ValueError("response_path is dot-separated keys and list indexes, e.g. choices.0.message.content")
        return value

    @field_validator("model_params")
    @classmethod
    def _model_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        if "api_key" in value:
            raise ValueError("an API key is never written in a pipeline: export it and name the variable in "
                             "api_key_env (default OPENAI_API_KEY)")
        unknown = sorted(set(value) - set(MODEL_PARAMS))
        if unknown:
            raise ValueError(f"unknown model_params {unknown}; raypress's client takes {', '.join(MODEL_PARAMS)}")
        base = value.get("base_url")
        if base is not None and not (isinstance(base, str) and is_http_url(base)):
            raise ValueError(f"model_params.base_url must be an http(s) URL with a host (got {base!r})")
        timeout = value.get("timeout")
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
            raise ValueError(f"model_params.timeout is seconds > 0 (got {timeout!r})")
        retries = value.get("max_retries")
        if retries is not None and (isinstance(retries, bool) or not isinstance(retries, int) or retries < 0):
            raise ValueError(f"model_params.max_retries is an integer >= 0 (got {retries!r})")
        headers = value.get("default_headers")
        if headers is not None:
            if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                        for k, v in headers.items()):
                raise ValueError("model_params.default_headers maps header names to strings")
            if any(k.lower() in SECRET_HEADERS for k in headers):
                raise ValueError("a credential header is never written in a pipeline: name the key's environment "
                                 "variable in api_key_env")
        return value

    @field_validator("sampling_params")
    @classmethod
    def _sampling_params(cls, value: dict[str, Any]) -> dict[str, Any]:
        reserved = [k for k in RESERVED_SAMPLING if k in value]
        if reserved:
            raise ValueError(f"sampling_params cannot set {reserved}: the op sends them")
        if value.get("stream"):
            raise ValueError("sampling_params.stream: the ops read whole answers, not streams")
        if "max_new_tokens" in value:  # Data-Juicer's Hugging Face ops name it so
            if "max_tokens" in value:
                raise ValueError("sampling_params gives both max_new_tokens and max_tokens")
            value = {("max_tokens" if k == "max_new_tokens" else k): v for k, v in value.items()}
        return value


class QAParams(ApiParams):
    """An op over question-answer rows (Data-Juicer's ``query_key`` / ``response_key``)."""

    query_key: str = Field("query", description="column holding the question")
    response_key: str = Field("response", description="column holding the answer")


class HFModelParams(ApiParams):
    """An op that Data-Juicer runs on a Hugging Face model in process (or vLLM): raypress asks an
    endpoint that serves that model under the name given (``raypress serve --model DIR --model-name
    NAME``, vLLM's OpenAI server), so the in-process switches are accepted and change nothing."""

    enable_vllm: bool = Field(False, description="accepted for Data-Juicer recipes: the endpoint runs the model")


def api_model_field(default: str | None = "gpt-4o") -> Any:
    """The model name a request sends (Data-Juicer's ``api_model``, ``hf_model``, ``api_or_hf_model``)."""
    return Field(default, description="the model name sent with each request, as the endpoint serves it (None: "
                 "the first model it lists; an `endpoint` input sends the model it serves)")


class ExtractionParams(ApiParams):
    """Data-Juicer's extraction ops that tag a text: a system prompt, the user message from the text,
    the answer parsed with a verbose pattern, the text dropped on request."""

    api_model: str | None = api_model_field()
    system_prompt: str | None = Field(None, description="system prompt (default: Data-Juicer's)")
    input_template: str | None = Field(None, description="user message, with {text}")
    drop_text: bool = Field(False, description="remove the text column from the output")

    PATTERN_FLAGS = re.VERBOSE | re.DOTALL
