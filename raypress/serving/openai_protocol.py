"""OpenAI-compatible request and response shapes for ``/v1/completions`` and ``/v1/chat/completions``.

Why strict models (``extra="forbid"``): a misspelt field (``max_token``) or one we cannot honour
(penalties, ``tools``, ``suffix``) must come back as a 400 that names it, not be silently
ignored. Common fields that clients send with neutral values (``n=1``, penalties 0, ``user``)
are accepted. ``top_k``, ``min_p``, ``ignore_eos`` and ``stop_token_ids`` are extensions vLLM also
takes.

Logprobs (``/v1/completions`` ``logprobs: k``, chat ``logprobs`` + ``top_logprobs``) are the
model's log-softmax over the vocabulary at temperature 1 (its raw distribution), not the
distribution a request's temperature / top-k / top-p / min-p sampled from: what lm-evaluation-harness
and vLLM mean by them. ``echo`` + ``max_tokens: 0`` + ``logprobs`` scores a prompt without
generating (lm-eval's loglikelihood).
"""

from __future__ import annotations

import time
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, ValidationError, field_validator, model_validator

from raypress.inference.sampling import MAX_LOGPROBS, SamplingParams

MAX_CHOICES = 8  # n × prompts a single request may ask for
MAX_TOKENIZE_PROMPTS = 4096  # prompts one tokenize request may count
MAX_STOP = 4  # stop sequences, as OpenAI
# What the schema says of a field the server takes only at its neutral value (the validators
# below answer anything else with a 400 that says so): generated clients and contract testers read it.
_UNSUPPORTED_NUMBER = {"enum": [0], "description": "not supported: 0 or left out"}
StopString = Annotated[str, Field(min_length=1)]


class InvalidSampling(ValueError):
    """A request's settings the engine cannot take; ``param`` names the field."""

    def __init__(self, message: str, param: str | None) -> None:
        super().__init__(message)
        self.param = param


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_usage: bool = False


class _Request(BaseModel):
    """Fields shared by both endpoints; the validators reject what the engine cannot do."""

    model_config = ConfigDict(extra="forbid")

    model: str
    temperature: float = Field(1.0, ge=0.0, le=2.0)
    top_p: float = Field(1.0, gt=0.0, le=1.0)
    top_k: int = Field(0, ge=0)
    min_p: float = Field(0.0, ge=0.0, le=1.0)
    n: int = Field(1, ge=1, le=MAX_CHOICES)
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: StopString | list[StopString] | None = Field(None, json_schema_extra={"maxItems": MAX_STOP})
    stop_token_ids: list[NonNegativeInt] = Field(default_factory=list)
    seed: int | None = Field(None, ge=0, lt=2**63)
    ignore_eos: bool = False
    stream_interval: int | None = Field(None, ge=1, le=1024, description=(
        "streamed tokens per chunk after the first (raypress extension; default: the server's)"))
    presence_penalty: float = Field(0.0, json_schema_extra=_UNSUPPORTED_NUMBER)
    frequency_penalty: float = Field(0.0, json_schema_extra=_UNSUPPORTED_NUMBER)
    logit_bias: dict[str, float] | None = Field(None, json_schema_extra={"maxProperties": 0})
    user: str | None = None

    @field_validator("presence_penalty", "frequency_penalty")
    @classmethod
    def _no_penalty(cls, value: float) -> float:
        if value != 0.0:
            raise ValueError("penalties are not supported; send 0 or leave the field out")
        return value

    @field_validator("logit_bias")
    @classmethod
    def _no_bias(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value:
            raise ValueError("logit_bias is not supported")
        return value

    @field_validator("stop")
    @classmethod
    def _stop_list(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and len(value) > MAX_STOP:
            raise ValueError(f"at most {MAX_STOP} stop sequences")
        return value

    def sampling(self, max_tokens: int, seed_offset: int = 0) -> SamplingParams:
        """Engine settings for choice ``seed_offset`` (n > 1 with a seed: seed, seed+1, ...).
        Raises ``InvalidSampling`` (a 400) where the engine refuses what this request's schema let
        through: the request's fields should hold every rule of ``SamplingParams``, this is the net."""
        seed = None if self.seed is None else (self.seed + seed_offset) % 2**63
        try:
            return SamplingParams(
                max_tokens=max_tokens, temperature=self.temperature, top_p=self.top_p, top_k=self.top_k,
                min_p=self.min_p, seed=seed, stop=self.stop, stop_token_ids=self.stop_token_ids,
                ignore_eos=self.ignore_eos, logprobs=self.token_logprobs, prompt_logprobs=self.scored_prompt_logprobs,
            )
        except ValidationError as error:
            first = error.errors()[0]
            param = ".".join(str(part) for part in first["loc"]) or None
            raise InvalidSampling(f"{param}: {first['msg']}", param) from error

    @property
    def token_logprobs(self) -> int | None:
        """Top-k alternatives per generated token (None: no logprobs)."""
        return None

    @property
    def scored_prompt_logprobs(self) -> int | None:
        """Top-k alternatives per prompt token (None: the prompt is not scored)."""
        return None

    @property
    def include_usage(self) -> bool:
        return bool(self.stream_options and self.stream_options.include_usage)


class TokenizeRequest(BaseModel):
    """``POST /raypress/v1/tokenize``: prompt token counts, so a client (the MoE-CAP benchmark) can
    leave out prompts that cannot fit the context before it times anything."""

    model_config = ConfigDict(extra="forbid")

    prompts: list[str] = Field(min_length=1, max_length=MAX_TOKENIZE_PROMPTS)


class CompletionRequest(_Request):
    """``POST /v1/completions``: prompt is text, a list of texts, token ids or a list of those."""

    prompt: str | list[str] | list[NonNegativeInt] | list[list[NonNegativeInt]]
    max_tokens: int = Field(16, ge=0, description="0 with echo: score the prompt, generate nothing")
    echo: bool = False
    logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS)
    best_of: int | None = None
    suffix: str | None = Field(None, json_schema_extra={"maxLength": 0})

    @property
    def token_logprobs(self) -> int | None:
        return self.logprobs

    @property
    def scored_prompt_logprobs(self) -> int | None:
        return self.logprobs if self.echo else None

    @field_validator("suffix")
    @classmethod
    def _no_suffix(cls, value: str | None) -> str | None:
        if value:
            raise ValueError("suffix (insertion) is not supported")
        return value

    @field_validator("prompt")
    @classmethod
    def _non_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("prompt must not be an empty list")
        return value

    @model_validator(mode="after")
    def _best_of_is_n(self) -> "CompletionRequest":
        if self.max_tokens == 0 and not (self.echo and self.logprobs is not None):
            raise ValueError("max_tokens 0 scores the prompt: it needs echo: true and logprobs")
        if self.best_of is not None and self.best_of != self.n:
            raise ValueError("best_of other than n is not supported")
        if len(self.prompts()) * self.n > MAX_CHOICES:
            raise ValueError(f"prompts × n must be at most {MAX_CHOICES}")
        return self

    def prompts(self) -> list[str | list[int]]:
        """One entry per prompt: a text or a list of token ids."""
        p = self.prompt
        if isinstance(p, str):
            return [p]
        if all(isinstance(x, int) for x in p):
            return [list(p)]  # type: ignore[arg-type]
        return list(p)  # type: ignore[arg-type]


class TextPart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart]
    name: str | None = None

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(_Request):
    """``POST /v1/chat/completions``; ``max_tokens`` unset = whatever the context leaves."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS)
    response_format: dict[str, Any] | None = Field(None, json_schema_extra={
        "required": ["type"], "properties": {"type": {"const": "text"}}})
    tools: list[dict[str, Any]] | None = Field(None, json_schema_extra={"maxItems": 0})
    tool_choice: Any = None

    @model_validator(mode="after")
    def _top_needs_logprobs(self) -> "ChatCompletionRequest":
        if self.top_logprobs and not self.logprobs:
            raise ValueError("top_logprobs needs logprobs: true")
        return self

    @property
    def token_logprobs(self) -> int | None:
        return (self.top_logprobs or 0) if self.logprobs else None

    @field_validator("tools")
    @classmethod
    def _no_tools(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        if value:
            raise ValueError("tools are not supported")
        return value

    @field_validator("response_format")
    @classmethod
    def _text_only(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value and value.get("type") != "text":
            raise ValueError("only response_format {'type': 'text'} is supported")
        return value

    @property
    def completion_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def chat_messages(self) -> list[dict[str, str]]:
        """Messages as a chat template wants them (``developer`` is the newer name of ``system``)."""
        return [{"role": "system" if m.role == "developer" else m.role, "content": m.text()} for m in self.messages]


# ---- responses -----------------------------------------------------------------------------------


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def usage_body(prompt_tokens: int, completion_tokens: int) -> dict[str, int]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_body(rid: str, model: str, choices: list[dict[str, Any]], usage: dict[str, int]) -> dict[str, Any]:
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": usage}


def completion_choice(index: int, text: str, finish_reason: str | None,
                      logprobs: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}


def completion_logprobs(tokens: list[str], logprobs: list[float | None],
                        top: list[dict[str, float] | None], text_offset: int = 0) -> dict[str, Any]:
    """The legacy completions shape: parallel lists, ``text_offset`` each token's start in the
    choice's text (counted from ``text_offset`` for a stream's later chunks)."""
    offsets = []
    for token in tokens:
        offsets.append(text_offset)
        text_offset += len(token)
    return {"tokens": tokens, "token_logprobs": logprobs, "top_logprobs": top, "text_offset": offsets}


def chat_token_logprob(token: str, logprob: float, top: list[tuple[str, float]]) -> dict[str, Any]:
    """One entry of chat ``logprobs.content``: the token, its logprob and UTF-8 bytes, its alternatives."""
    return {"token": token, "logprob": logprob, "bytes": list(token.encode()),
            "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]}


def completion_chunk(rid: str, model: str, choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {"id": rid, "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": usage}


def chat_body(rid: str, model: str, choices: list[dict[str, Any]], usage: dict[str, int]) -> dict[str, Any]:
    return {"id": rid, "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": choices, "usage": usage}


def chat_choice(index: int, text: str, finish_reason: str | None,
                logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"index": index, "message": {"role": "assistant", "content": text},
            "logprobs": None if logprobs is None else {"content": logprobs, "refusal": None},
            "finish_reason": finish_reason}


def chat_chunk(rid: str, model: str, choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> dict[str, Any]:
    return {"id": rid, "object": "chat.completion.chunk", "created": int(time.time()), "model": model,
            "choices": choices, "usage": usage}


def chat_delta(index: int, delta: dict[str, str], finish_reason: str | None = None,
               logprobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"index": index, "delta": delta,
            "logprobs": None if logprobs is None else {"content": logprobs, "refusal": None},
            "finish_reason": finish_reason}
