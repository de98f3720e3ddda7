"""The OpenAI-compatible HTTP API over an ``Engine``, as a plain FastAPI app.

Why plain FastAPI and not routes on the Serve class: the same app runs inside the Ray Serve
replica (``llm_deployment.py`` builds it there) and under uvicorn in tests and benchmarks that
must not need Ray. Routes:

- ``POST /v1/completions``, ``POST /v1/chat/completions``: non-streaming JSON or server-sent
  events (``data: {chunk}`` ... ``data: [DONE]``); ``n`` > 1 and several prompts run as separate
  engine requests batched together.
- ``GET /v1/models``, ``GET /health`` and ``GET /metrics`` (Prometheus text, see
  ``prometheus_metrics.py``; no token needed for these two: probes and scrapers have none).
- Logprobs: ``/v1/completions`` ``logprobs: k`` (+ ``echo``, ``max_tokens: 0`` to score a prompt)
  and chat ``logprobs`` / ``top_logprobs``, in OpenAI's shapes; they are the model's log-softmax at
  temperature 1 (its raw distribution), not the distribution a request sampled from.
- ``GET /raypress/v1/engine`` and ``GET /raypress/v1/steps?after=K``: the model config and the
  engine's per-step records (batch, latencies, distinct experts), which the MoE-CAP benchmark
  turns into S-MBU / S-MFU of the live server; ``POST /raypress/v1/tokenize`` (``{"prompts":
  [...]}``): each prompt's token count as ``/v1/completions`` counts it, and the context length.

Errors use OpenAI's body (``{"error": {message, type, param, code}}``): 400 for invalid requests
(schema, malformed JSON, a prompt that does not fit the context), 401 without the bearer token,
404 for an unknown model or route, 413 for a body over ``max_request_bytes``, 503 (with
``Retry-After``) when the engine's queue is full or it stops, 500 if a forward fails. Once a
stream has started (status and headers sent) an error is one ``data: {"error": ...}`` event,
then ``data: [DONE]``.

Why tokenising and chat templates run in threads: one 10 MB prompt tokenises for seconds, and on
the event loop it held ``/health`` and every small request for as long. A request whose text is
over ``BIG_PROMPT_CHARS`` goes to a small pool of its own (big prompts wait for each other, never for
the small ones' threads), the rest to the loop's default executor; ``encode_batch`` is used where
the tokenizer has it, because ``tokenizers`` releases the GIL there and not in ``encode``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from collections.abc import AsyncIterator, Callable, Sequence, Sized
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from typing import Any, TypeVar

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from raypress.inference.engine import Engine
from raypress.inference.requests import (
    Completion,
    EngineStopped,
    GenerationEvent,
    PromptTooLong,
    QueueFull,
    RequestFailed,
    RequestHandle,
    TokenLogprob,
)
from raypress.inference.sampling import SamplingParams
from raypress.serving import openai_protocol as oa
from raypress.serving.stream_coalesce import coalesced
from raypress.serving.prometheus_metrics import PROMETHEUS_CONTENT_TYPE, PrometheusMetrics, prometheus_available
from raypress.serving.http_guards import APIError, error_body, install_guards
from raypress.serving.http_limits import LLM_MAX_REQUEST_BYTES, retry_after

log = logging.getLogger(__name__)
BIG_PROMPT_CHARS = 16_384  # above this much text a request's tokenising uses the big-prompt pool
BIG_PROMPT_THREADS = 2
INLINE_PROMPT_CHARS = 2_048  # up to this much text is tokenised on the loop: ~0.1 ms, less than a thread hop
T = TypeVar("T")
SSE_EVENT = {"type": "object", "required": ["data"], "description": "one server-sent event: its data a JSON chunk, "
              "an error body, or ``[DONE]`` last", "properties": {"data": {"type": "string"}, "event": {"type": "string"}}}
GENERATE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "the completion as JSON, or with ``stream: true`` server-sent events ending in "
                         "``data: [DONE]``", "content": {"text/event-stream": {"schema": SSE_EVENT}}},
    404: {"description": "the model is not the one this server serves"},
    500: {"description": "a forward pass failed"},
    503: {"description": "the engine's queue is full or it is shutting down"},
}


def _sse(payload: dict[str, Any] | str) -> str:
    data = payload if isinstance(payload, str) else json.dumps(payload, separators=(",", ":"))
    return f"data: {data}\n\n"


class OpenAIServer:
    """Turns validated requests into engine requests and engine events into OpenAI responses."""

    def __init__(self, engine: Engine, model_name: str, stream_interval: int = 1) -> None:
        self.engine = engine
        self.model_name = model_name
        self.stream_interval = stream_interval  # tokens per streamed chunk after the first
        self._big = ThreadPoolExecutor(BIG_PROMPT_THREADS, thread_name_prefix="raypress-big-prompt")
        self._token_texts: dict[int, str] = {}

    # ---- logprobs -------------------------------------------------------------------------------

    def token_text(self, token_id: int) -> str:
        """One token decoded on its own (cached: the vocabulary is fixed)."""
        text = self._token_texts.get(token_id)
        if text is None:
            text = self._token_texts[token_id] = self.engine.decode([token_id])
        return text

    def completion_logprobs(self, entries: list[TokenLogprob | None], pieces: list[str],
                            text_offset: int) -> dict[str, Any]:
        """Legacy completions logprobs. ``pieces``: each token's share of the text (``_TokenPieces``),
        so tokens join to the text and ``text_offset`` points into it; a ``None`` entry is a
        prompt's first token (nothing predicts it). In ``top_logprobs`` the token itself is keyed
        by its piece (a client comparing the token with the top key sees a match), the others by
        their own decoding."""
        values: list[float | None] = []
        tops: list[dict[str, float] | None] = []
        for entry, piece in zip(entries, pieces, strict=True):
            if entry is None:
                values.append(None)
                tops.append(None)
                continue
            values.append(entry.logprob)
            top: dict[str, float] = {}
            for token_id, logprob in entry.top:  # best first: two ids, one text keeps the likelier
                top.setdefault(piece if token_id == entry.token_id else self.token_text(token_id), logprob)
            tops.append(top)
        return oa.completion_logprobs(list(pieces), values, tops, text_offset)

    def chat_logprobs(self, entries: list[TokenLogprob]) -> list[dict[str, Any]]:
        return [oa.chat_token_logprob(self.token_text(e.token_id), e.logprob,
                                      [(self.token_text(t), lp) for t, lp in e.top]) for e in entries]

    async def off_loop(self, chars: int, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` in a thread: the big-prompt pool when ``chars`` of text are over
        ``BIG_PROMPT_CHARS``, else the loop's default executor."""
        pool = self._big if chars > BIG_PROMPT_CHARS else None
        return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(fn, *args))

    # ---- checks and submission ------------------------------------------------------------------

    def check_model(self, model: str) -> None:
        if model != self.model_name:
            raise APIError(404, f"the model {model!r} does not exist; this server serves {self.model_name!r}",
                           param="model", code="model_not_found")

    @staticmethod
    def sampling(request: oa.CompletionRequest | oa.ChatCompletionRequest, max_tokens: int,
                 count: int) -> list[SamplingParams]:
        """Each of ``count`` choices' engine settings; a 400 naming the field the engine refuses."""
        try:
            return [request.sampling(max_tokens, k) for k in range(count)]
        except oa.InvalidSampling as error:
            raise APIError(400, str(error), param=error.param) from error

    def encode(self, prompt: str | list[int], special_tokens: bool = True) -> list[int]:
        """One prompt's ids (blocking: call it through ``off_loop`` from a route)."""
        return self.encode_all([prompt], special_tokens)[0]

    def encode_all(self, prompts: Sequence[str | list[int]], special_tokens: bool = True) -> list[list[int]]:
        """Every prompt's ids; texts in one ``encode_batch`` call where the tokenizer has one."""
        texts = [p for p in prompts if isinstance(p, str)]
        encoded = iter(_encode_texts(self.engine.tokenizer, texts, special_tokens) if texts else [])
        return [p if isinstance(p, list) else next(encoded) for p in prompts]

    async def encode_async(self, prompts: Sequence[str | list[int]], special_tokens: bool = True) -> list[list[int]]:
        chars = _chars(prompts)
        if chars <= INLINE_PROMPT_CHARS:  # a hop to a thread (and back) costs more than the work, under load far more
            return self.encode_all(prompts, special_tokens)
        return await self.off_loop(chars, self.encode_all, prompts, special_tokens)

    def chat_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """The chat template applied and tokenised (blocking: Jinja and the tokenizer)."""
        apply = getattr(self.engine.tokenizer, "apply_chat_template", None)
        if apply is None:
            raise APIError(400, "this model's tokenizer has no chat template; use /v1/completions", param="messages")
        try:
            text = apply(messages, add_generation_prompt=True)
        except Exception as error:  # jinja raises on a template's own checks (e.g. role order)
            raise APIError(400, f"the messages do not fit the chat template: {error}", param="messages") from error
        return self.encode(text, special_tokens=False)

    def budget(self, prompt_ids: Sized, max_tokens: int | None, param: str) -> int:
        """Completion tokens this prompt may ask for; 400 when it cannot fit the context."""
        context = self.engine.max_len
        room = context - len(prompt_ids)
        if room < 1:
            raise APIError(400, f"the prompt has {len(prompt_ids)} tokens but the context holds {context} "
                           "(prompt + completion); shorten it", param=param, code="context_length_exceeded")
        if max_tokens is None:
            return room
        if max_tokens > room:
            raise APIError(400, f"this model's context is {context} tokens; you asked for {len(prompt_ids)} "
                           f"prompt + {max_tokens} completion tokens", param="max_tokens",
                           code="context_length_exceeded")
        return max_tokens

    def submit(self, jobs: Sequence[tuple[list[int], SamplingParams]], rid: str) -> list[RequestHandle]:
        """Queue every choice or none (one full queue cancels those already queued)."""
        self.engine.start()
        handles: list[RequestHandle] = []
        try:
            for index, (ids, params) in enumerate(jobs):
                handles.append(self.engine.add_request(ids, params, request_id=f"{rid}-{index}"))
        except BaseException as error:
            for handle in handles:
                handle.cancel()
            raise _engine_error(error, "prompt") from error
        return handles

    # ---- endpoints ------------------------------------------------------------------------------

    async def completions(self, request: oa.CompletionRequest) -> Any:
        self.check_model(request.model)
        jobs = []
        prompt_tokens = 0
        prompts = request.prompts()
        all_ids = await self.encode_async(prompts)
        for ids in all_ids:
            if not ids:
                raise APIError(400, "the prompt is empty", param="prompt")
            max_tokens = self.budget(ids, request.max_tokens, "prompt")
            prompt_tokens += len(ids) * request.n
            jobs += [(ids, params) for params in self.sampling(request, max_tokens, request.n)]
        rid = oa.new_id("cmpl")
        handles = self.submit(jobs, rid)  # the engine checks token ids against the vocabulary first
        # per choice (prompt-major, like the jobs): the prompt's text and ids, for echo
        echoes = [(p if isinstance(p, str) else self.engine.decode(ids), ids)
                  for p, ids in zip(prompts, all_ids) for _ in range(request.n)]
        if request.stream:
            return _stream(self._completion_events(handles, rid, prompt_tokens, request, echoes))
        done = await _gather(handles)
        choices = []
        for index, (completion, (prompt_text, prompt_ids)) in enumerate(zip(done, echoes)):
            text = prompt_text + completion.text if request.echo else completion.text
            logprobs = None
            if request.logprobs is not None:
                entries: list[TokenLogprob | None] = list(completion.prompt_logprobs or []) if request.echo else []
                entries += completion.logprobs or []
                pieces = _TokenPieces(self.engine.decode, [] if request.echo else prompt_ids)
                ids = (prompt_ids if request.echo else []) + completion.token_ids
                logprobs = self.completion_logprobs(entries, pieces.push(ids), 0)
            choices.append(oa.completion_choice(index, text, completion.finish_reason, logprobs))
        return oa.completion_body(rid, self.model_name, choices, _usage(prompt_tokens, done))

    async def chat(self, request: oa.ChatCompletionRequest) -> Any:
        self.check_model(request.model)
        messages = request.chat_messages()
        ids = await self.off_loop(sum(len(m["content"]) for m in messages), self.chat_ids, messages)
        max_tokens = self.budget(ids, request.completion_limit, "messages")
        rid = oa.new_id("chatcmpl")
        handles = self.submit([(ids, params) for params in self.sampling(request, max_tokens, request.n)], rid)
        prompt_tokens = len(ids) * request.n
        if request.stream:
            return _stream(self._chat_events(handles, rid, prompt_tokens, request.include_usage,
                                             request.token_logprobs is not None, self.interval(request)))
        done = await _gather(handles)
        choices = [oa.chat_choice(i, c.text, c.finish_reason,
                                  None if c.logprobs is None else self.chat_logprobs(c.logprobs))
                   for i, c in enumerate(done)]
        return oa.chat_body(rid, self.model_name, choices, _usage(prompt_tokens, done))

    # ---- streams --------------------------------------------------------------------------------

    async def _completion_events(self, handles: list[RequestHandle], rid: str, prompt_tokens: int,
                                 request: oa.CompletionRequest,
                                 echoes: list[tuple[str, list[int]]]) -> AsyncIterator[str]:
        """Chunks as text becomes safe to show; logprobs of tokens whose text is held back wait for
        the next chunk of their choice, so every token's logprob is sent once. With ``echo`` a
        choice's first chunk starts with the prompt (and its logprobs)."""
        completion_tokens = 0
        want_logprobs = request.logprobs is not None
        count = len(handles)
        pending: list[list[TokenLogprob | None]] = [[] for _ in range(count)]
        pending_ids: list[list[int]] = [[] for _ in range(count)]
        pending_text = [""] * count
        offsets = [0] * count  # chars of token pieces already sent: the next chunk's text_offset
        pieces = [_TokenPieces(self.engine.decode, [] if request.echo else ids) for _, ids in echoes]
        echoed: set[int] = set()
        async for index, event in _merged(handles, self.interval(request)):
            prompt_text, prompt_ids = echoes[index]
            if request.echo and index not in echoed:
                echoed.add(index)
                pending_text[index] += prompt_text
                pending[index] += event.prompt_logprobs or []
                pending_ids[index] += prompt_ids
            pending_text[index] += event.text
            pending[index] += event.logprobs or []
            pending_ids[index] += event.token_ids
            if event.finish_reason is None and not pending_text[index]:
                continue  # text held back (a possible stop string, half a character)
            completion_tokens += event.usage.completion_tokens if event.usage else 0
            logprobs = None
            if want_logprobs:
                texts = pieces[index].push(pending_ids[index])
                logprobs = self.completion_logprobs(pending[index], texts, offsets[index])
                offsets[index] += sum(len(t) for t in texts)
            choice = oa.completion_choice(index, pending_text[index], event.finish_reason, logprobs)
            pending_text[index], pending[index], pending_ids[index] = "", [], []
            yield _sse(oa.completion_chunk(rid, self.model_name, [choice]))
        if request.include_usage:
            yield _sse(oa.completion_chunk(rid, self.model_name, [], oa.usage_body(prompt_tokens, completion_tokens)))

    def interval(self, request: oa.CompletionRequest | oa.ChatCompletionRequest) -> int:
        """Tokens per streamed chunk after the first: the request's ``stream_interval``, else the server's."""
        return request.stream_interval or self.stream_interval

    async def _chat_events(self, handles: list[RequestHandle], rid: str, prompt_tokens: int,
                           include_usage: bool, want_logprobs: bool = False, interval: int = 1) -> AsyncIterator[str]:
        """Role chunk, content chunks (with the logprobs of the tokens they carry; those of held-back
        tokens wait for the next content chunk, or go with the finish chunk), a finish chunk."""
        for index in range(len(handles)):
            yield _sse(oa.chat_chunk(rid, self.model_name, [oa.chat_delta(index, {"role": "assistant", "content": ""})]))
        completion_tokens = 0
        pending: dict[int, list[TokenLogprob]] = {i: [] for i in range(len(handles))}
        async for index, event in _merged(handles, interval):
            pending[index] += event.logprobs or []
            if event.text:
                logprobs = self.chat_logprobs(pending[index]) if want_logprobs else None
                pending[index] = []
                yield _sse(oa.chat_chunk(rid, self.model_name,
                                         [oa.chat_delta(index, {"content": event.text}, logprobs=logprobs)]))
            if event.finish_reason is not None:
                completion_tokens += event.usage.completion_tokens if event.usage else 0
                logprobs = self.chat_logprobs(pending[index]) if want_logprobs and pending[index] else None
                pending[index] = []
                yield _sse(oa.chat_chunk(rid, self.model_name, [oa.chat_delta(index, {}, event.finish_reason,
                                                                              logprobs)]))
        if include_usage:
            yield _sse(oa.chat_chunk(rid, self.model_name, [], oa.usage_body(prompt_tokens, completion_tokens)))

    # ---- raypress extensions ----------------------------------------------------------------------

    def engine_info(self) -> dict[str, Any]:
        import torch

        engine = self.engine
        return {"model": self.model_name, "config": engine.model.config.to_dict(),
                "dtype": str(engine.dtype).removeprefix("torch."), "device": str(engine.device),
                "max_batch_size": engine.max_batch_size, "max_len": engine.max_len, "max_queue": engine.max_queue,
                "running": engine.num_running, "waiting": engine.num_waiting,
                "tokens_per_second": engine.stats.tokens_per_second(), "total_steps": engine.stats.total_steps,
                "threads": torch.get_num_threads()}  # the replica's torch threads: MoE-CAP measures peaks with as many

    async def count_tokens(self, prompts: Sequence[str]) -> dict[str, Any]:
        """Each prompt's tokens as ``/v1/completions`` encodes it, and the context they must fit."""
        return {"counts": [len(ids) for ids in await self.encode_async(prompts)], "max_len": self.engine.max_len}

    def steps(self, after: int) -> dict[str, Any]:
        records = [asdict(r) for r in self.engine.stats.steps if r.step > after]
        return {"steps": records, "last": records[-1]["step"] if records else after}


class _TokenPieces:
    """Each token's share of the decoded text, as vLLM's incremental detokeniser cuts it: the pieces
    join to the text, and a token that ends half a UTF-8 character gets ``""`` while the one that
    completes it gets the character (decoding tokens one by one would give U+FFFD twice, and text
    offsets that no longer point into the text). Decodes a short window, not the whole sequence."""

    CONTEXT = 5  # tokens of context kept before the first piece (a prompt ahead of a completion)

    def __init__(self, decode: Callable[[list[int]], str], context: Sequence[int] = ()) -> None:
        self._decode = decode
        self._ids = list(context)[-self.CONTEXT:]
        self._prefix = 0  # the window decoded to know what was already shown: ids[_prefix:_read]
        self._read = len(self._ids)

    def push(self, token_ids: Sequence[int]) -> list[str]:
        out = []
        for token_id in token_ids:
            self._ids.append(token_id)
            shown = self._decode(self._ids[self._prefix:self._read])
            text = self._decode(self._ids[self._prefix:])
            if len(text) > len(shown) and not text.endswith("\ufffd"):
                out.append(text[len(shown):])
                self._prefix, self._read = self._read, len(self._ids)
            else:
                out.append("")
        return out


def _chars(prompts: Sequence[str | list[int]]) -> int:
    return sum(len(p) for p in prompts if isinstance(p, str))


def _encode_texts(tokenizer: Any, texts: list[str], special_tokens: bool) -> list[list[int]]:
    """Token ids of ``texts``: ``encode_batch`` when there is one (``tokenizers`` releases the GIL in
    it, so the event loop keeps running while a long text tokenises), else ``encode`` per text."""
    batch = getattr(tokenizer, "encode_batch", None)
    if batch is not None:
        try:
            encoded = batch(texts, add_special_tokens=special_tokens)
        except TypeError:  # a tokenizer without the keyword
            encoded = batch(texts)
        return [e if isinstance(e, list) else list(getattr(e, "ids", e)) for e in encoded]
    return [_encode_one(tokenizer, text, special_tokens) for text in texts]


def _encode_one(tokenizer: Any, text: str, special_tokens: bool) -> list[int]:
    try:
        encoded = tokenizer.encode(text, add_special_tokens=special_tokens)
    except TypeError:  # a tokenizer without the keyword
        encoded = tokenizer.encode(text)
    return list(getattr(encoded, "ids", encoded))


def _engine_error(error: BaseException, param: str) -> BaseException:
    if isinstance(error, QueueFull):
        return APIError(503, f"the server is busy: {error}; retry later", "server_overloaded")
    if isinstance(error, EngineStopped):
        return APIError(503, f"the server is shutting down: {error}", "server_unavailable")
    if isinstance(error, PromptTooLong):
        return APIError(400, str(error), param=param, code="context_length_exceeded")
    if isinstance(error, ValueError):  # empty prompt, token ids outside the vocabulary
        return APIError(400, str(error), param=param)
    return error


async def _gather(handles: list[RequestHandle]) -> list[Completion]:
    """Every choice's completion; leaving early (client gone) cancels them all."""
    try:
        return list(await asyncio.gather(*(h.aresult() for h in handles)))
    except RequestFailed as error:
        raise APIError(500, f"generation failed: {error}", "server_error") from error
    except EngineStopped as error:
        raise APIError(503, f"the server is shutting down: {error}", "server_unavailable") from error
    finally:
        for handle in handles:
            handle.cancel()


async def _merged(handles: list[RequestHandle], interval: int) -> AsyncIterator[tuple[int, GenerationEvent]]:
    """Events of several requests as they come, tagged with the choice index; each choice's events
    joined into fewer, larger ones (``stream_coalesce``): its first at once, then every ``interval``
    tokens, and whatever was already waiting."""
    async for item in coalesced(_batches(handles, interval), interval):
        yield item


async def _batches(handles: list[RequestHandle], every: int = 1) -> AsyncIterator[tuple[int, list[GenerationEvent]]]:
    """Each handle's waiting events, a list at a time (woken every ``every`` tokens), tagged with the
    choice index."""
    if len(handles) == 1:
        try:
            async for batch in handles[0].batches(every):
                yield 0, batch
        finally:
            handles[0].cancel()
        return
    queue: asyncio.Queue[tuple[int, list[GenerationEvent] | BaseException | None]] = asyncio.Queue()

    async def pump(index: int, handle: RequestHandle) -> None:
        try:
            async for batch in handle.batches(every):
                queue.put_nowait((index, batch))
        except Exception as error:  # re-raised in the consumer
            queue.put_nowait((index, error))
        finally:
            queue.put_nowait((index, None))

    tasks = [asyncio.create_task(pump(i, h)) for i, h in enumerate(handles)]
    open_ = len(handles)
    try:
        while open_:
            index, item = await queue.get()
            if item is None:
                open_ -= 1
            elif isinstance(item, BaseException):
                raise item
            else:
                yield index, item
    finally:
        for task in tasks:
            task.cancel()
        for handle in handles:
            handle.cancel()


def _usage(prompt_tokens: int, done: list[Completion]) -> dict[str, int]:
    return oa.usage_body(prompt_tokens, sum(c.usage.completion_tokens for c in done))


def _stream(events: AsyncIterator[str]) -> StreamingResponse:
    async def body() -> AsyncIterator[str]:
        try:
            async for chunk in events:
                yield chunk
        except Exception as error:  # headers are sent: report in-band, then end the stream as usual
            if isinstance(error, APIError):
                body = error_body(error.message, error.type, error.param, error.code)
            elif isinstance(error, EngineStopped):
                body = error_body(f"the server is shutting down: {error}", "server_unavailable")
            else:
                if not isinstance(error, RequestFailed):
                    log.exception("a stream failed")
                body = error_body(f"generation failed: {error}", "server_error")
            yield _sse(body)
        yield _sse("[DONE]")

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def create_app(engine: Engine, model_name: str, api_key: str | None = None,
               max_request_bytes: int | None = LLM_MAX_REQUEST_BYTES, stream_interval: int = 1) -> FastAPI:
    """The API over ``engine`` (started on first use); ``api_key``: require ``Authorization: Bearer``;
    ``max_request_bytes``: larger bodies get 413 (``None``: no limit); ``stream_interval``: streamed
    tokens per chunk after the first, unless a request sets its own (``stream_coalesce``)."""
    server = OpenAIServer(engine, model_name, stream_interval)
    app = FastAPI(title="raypress LLM", version="1")
    app.state.server = server
    metrics = PrometheusMetrics(engine, model_name) if prometheus_available() else None
    if metrics is not None:
        metrics.attach()
    app.state.metrics = metrics

    install_guards(app, api_key, max_request_bytes)

    @app.post("/v1/completions", responses=GENERATE_RESPONSES)
    async def completions(request: oa.CompletionRequest) -> Any:
        answer = await server.completions(request)
        if metrics is not None:
            metrics.count_user(request.user)
        return answer

    @app.post("/v1/chat/completions", responses=GENERATE_RESPONSES)
    async def chat_completions(request: oa.ChatCompletionRequest) -> Any:
        answer = await server.chat(request)
        if metrics is not None:
            metrics.count_user(request.user)
        return answer

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": model_name, "object": "model", "created": 0,
                                            "owned_by": "raypress", "max_model_len": engine.max_len}]}

    @app.get("/health", responses={503: {"description": "the engine has stopped"}})
    async def health() -> JSONResponse:
        ok = engine.is_running
        status = 200 if ok else 503
        return JSONResponse({"status": "ok" if ok else "engine stopped", "model": model_name,
                             "running": engine.num_running, "waiting": engine.num_waiting}, status,
                            headers=retry_after(status))

    @app.get("/metrics", response_class=PlainTextResponse, responses={
        200: {"description": "Prometheus text exposition", "content": {"text/plain": {"schema": {"type": "string"}}}},
        501: {"description": "prometheus_client is not installed"}})
    async def prometheus() -> Response:
        if metrics is None:
            raise APIError(501, "metrics need the prometheus_client package (pip install prometheus_client)",
                           "server_error", code="metrics_unavailable")
        return Response(metrics.exposition(), media_type=PROMETHEUS_CONTENT_TYPE)

    @app.get("/raypress/v1/engine")
    async def engine_info() -> dict[str, Any]:
        return server.engine_info()

    @app.get("/raypress/v1/steps")
    async def steps(after: int = Query(-1, description="only steps numbered above this")) -> dict[str, Any]:
        return server.steps(after)

    @app.post("/raypress/v1/tokenize", responses={503: {"description": "the engine has stopped"}})
    async def tokenize(request: oa.TokenizeRequest) -> dict[str, Any]:
        return await server.count_tokens(request.prompts)

    engine.start()
    return app
