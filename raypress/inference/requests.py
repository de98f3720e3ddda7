"""The request side of the engine: what a caller gets back and the errors it may see.

Why apart from the step loop: a caller (the OpenAI app, a policy actor, the MoE-CAP benchmark)
holds a ``RequestHandle`` and reads ``GenerationEvent``s, a ``Completion`` and ``Usage``, and
catches ``EngineError``s; none of that needs torch or the scheduler.  A handle is fed by the
engine's step thread and read either with ``async for`` (added inside an event loop: events cross
into the loop with ``call_soon_threadsafe``) or with a plain blocking ``for``.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from raypress.inference.sampling import SamplingParams

FinishReason = Literal["stop", "length", "cancelled"]


class EngineError(Exception):
    """Base of the engine's errors."""


class QueueFull(EngineError):
    """The waiting queue is at its bound; try again later (HTTP 503)."""


class PromptTooLong(EngineError, ValueError):
    """The prompt leaves no room for a completion in the context (HTTP 400)."""


class EngineStopped(EngineError):
    """The engine was stopped before the request finished."""


class RequestFailed(EngineError):
    """A forward pass running this request raised; the cause is chained."""


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class TokenLogprob:
    """One position's logprob (log-softmax of the raw logits, temperature 1) of the token that was
    there, and the ``k`` most likely tokens with theirs, best first (empty when k is 0)."""

    token_id: int
    logprob: float
    top: list[tuple[int, float]]


@dataclass(frozen=True)
class GenerationEvent:
    """One streamed piece: the new token id(s) and the text now safe to show.

    ``text`` can be empty while it might still become a stop string (or is half a UTF-8 character).
    The last event of a request has ``finish_reason`` ("stop": EOS / stop token / stop string,
    "length": max_tokens or the context is full, "cancelled") and ``usage``. ``logprobs``: one per
    id in ``token_ids`` when the request asked for them; ``prompt_logprobs`` (first event only, when
    asked): one per prompt token, the first ``None`` (nothing predicts it).
    """

    token_ids: list[int]
    text: str
    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    logprobs: list[TokenLogprob] | None = None
    prompt_logprobs: list[TokenLogprob | None] | None = None


@dataclass(frozen=True)
class Completion:
    """A whole request's output: every generated id (EOS included), the text (cut at a stop string)."""

    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    usage: Usage
    logprobs: list[TokenLogprob] | None = None  # one per generated id, when asked
    prompt_logprobs: list[TokenLogprob | None] | None = None  # one per prompt id (the first None), when asked


@dataclass
class Failure:
    """Handed to a request's handle instead of an event: the error that ended it."""

    error: BaseException


class RequestOwner(Protocol):
    """What a handle needs of the engine that made it (a protocol, so this module needs no engine)."""

    def _cancel(self, handle: "RequestHandle") -> None: ...


class RequestHandle:
    """A submitted request: iterate its GenerationEvents once (``async for`` when it was added
    inside a running event loop, plain ``for`` otherwise), wait for ``result()``, or ``cancel()`` it."""

    def __init__(
        self, engine: RequestOwner, request_id: str, prompt_ids: list[int], params: SamplingParams,
        listener: Callable[["RequestHandle", "GenerationEvent | Failure"], None] | None = None,
    ) -> None:
        self.request_id = request_id
        self._listener = listener  # takes every event instead of the handle's own queues (``engine_process``)
        self.prompt_ids = prompt_ids
        self.params = params
        self._engine = engine
        self._finished = threading.Event()
        self.cancel_requested = False
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        # Events for an event loop wait in a deque; the loop is woken once per batch of them, not once
        # per token (each wake-up costs the loop thread the GIL, which the step thread needs), and a
        # caller that wants only the result (``aresult``) is woken only by the last event.
        self._pending: deque[GenerationEvent | Failure] = deque()
        self._ready = asyncio.Event() if self._loop is not None else None
        self._wakeup_scheduled = False
        self._wake_on_last_only = False
        self._wake_every = 1  # tokens waiting before the loop is woken again (the first event wakes it at once)
        self._waiting_tokens = 0  # tokens delivered since the reader last drained (approximate: a race only delays)
        self._woken_once = False
        self._sync_queue: queue.SimpleQueue[GenerationEvent | Failure] = queue.SimpleQueue()
        self._iterated = False  # events are handed out once
        self._completion: Completion | None = None

    @property
    def finished(self) -> bool:
        """The final event (or a failure) has been handed out by the engine."""
        return self._finished.is_set()

    def cancel(self) -> None:
        """Stop generating and free the KV slot (at the next step); no-op once finished."""
        if not self.finished:
            self._engine._cancel(self)

    def __aiter__(self) -> AsyncIterator[GenerationEvent]:
        if self._ready is None:
            raise RuntimeError("this request was added outside an event loop: iterate it with a plain for")
        self._claim()
        return self._aiter(self._ready)

    def batches(self, every: int = 1) -> AsyncIterator[list[GenerationEvent]]:
        """Like ``async for``, but each step hands over every event already waiting (in order), so a
        reader that fell behind catches up in one step (the SSE routes join them into one chunk).
        ``every``: after the first event, wake the reader only once ``every`` tokens wait (or at the
        last event): the step thread then hands the event loop one wake-up per chunk, not per token."""
        if self._ready is None:
            raise RuntimeError("this request was added outside an event loop: iterate it with a plain for")
        self._claim()
        self._wake_every = max(1, every)
        return self._batches(self._ready)

    async def _batches(self, ready: asyncio.Event) -> AsyncIterator[list[GenerationEvent]]:
        while True:
            await ready.wait()
            ready.clear()
            self._wakeup_scheduled = False  # before draining: an event added from here on wakes us again
            self._waiting_tokens = 0
            batch: list[GenerationEvent] = []
            while self._pending:
                item = self._pending.popleft()
                if isinstance(item, Failure):
                    if batch:
                        yield batch
                    self._raise(item.error)
                batch.append(item)
                if item.finish_reason is not None:
                    yield batch
                    return
            if batch:
                yield batch

    def _claim(self) -> None:
        if self._iterated:
            raise RuntimeError(f"the events of request {self.request_id} were already read")
        self._iterated = True

    async def _aiter(self, ready: asyncio.Event) -> AsyncIterator[GenerationEvent]:
        while True:
            await ready.wait()
            ready.clear()
            self._wakeup_scheduled = False  # before draining: an event added from here on wakes us again
            while self._pending:
                item = self._pending.popleft()
                if isinstance(item, Failure):
                    self._raise(item.error)
                yield item
                if item.finish_reason is not None:
                    return

    def __iter__(self) -> Iterator[GenerationEvent]:
        return self.events()

    def events(self, timeout: float | None = None) -> Iterator[GenerationEvent]:
        """Blocking iteration (handles added outside an event loop); ``queue.Empty`` after ``timeout`` s idle."""
        if self._loop is not None:
            raise RuntimeError("this request was added inside an event loop: iterate it with async for")
        self._claim()
        return self._events(timeout)

    def _events(self, timeout: float | None) -> Iterator[GenerationEvent]:
        while True:
            item = self._sync_queue.get(timeout=timeout)
            if isinstance(item, Failure):
                self._raise(item.error)
            yield item
            if item.finish_reason is not None:
                return

    def result(self, timeout: float | None = None) -> Completion:
        """Wait for the whole completion (blocking; see ``events``); repeatable."""
        if self._completion is None:
            self._completion = _collect(list(self.events(timeout)))
        return self._completion

    async def aresult(self) -> Completion:
        """Wait for the whole completion inside an event loop; repeatable."""
        if self._completion is None:
            self._wake_on_last_only = True
            self._completion = _collect([event async for event in self])
        return self._completion

    def _raise(self, error: BaseException) -> None:
        if isinstance(error, EngineError):
            raise error
        raise RequestFailed(f"request {self.request_id} failed: {error}") from error

    def _deliver(self, item: GenerationEvent | Failure) -> None:
        """Called by the step thread; a closed event loop (client gone) cancels the request."""
        last = isinstance(item, Failure) or item.finish_reason is not None
        if last:
            self._finished.set()
        if self._listener is not None:
            self._listener(self, item)
            return
        if self._loop is None:
            self._sync_queue.put(item)
            return
        self._pending.append(item)
        if self._wakeup_scheduled or (self._wake_on_last_only and not last):
            return
        if not last and self._woken_once:
            self._waiting_tokens += len(item.token_ids)
            if self._waiting_tokens < self._wake_every:
                return
        self._woken_once = True
        self._wakeup_scheduled = True
        assert self._ready is not None
        try:
            self._loop.call_soon_threadsafe(self._ready.set)
        except RuntimeError:
            self.cancel_requested = True


def _collect(events: list[GenerationEvent]) -> Completion:
    last = events[-1]
    assert last.finish_reason is not None and last.usage is not None
    ids = [t for e in events for t in e.token_ids]
    logprobs = None
    if any(e.logprobs is not None for e in events):
        logprobs = [lp for e in events for lp in (e.logprobs or [])]
    prompt_logprobs = next((e.prompt_logprobs for e in events if e.prompt_logprobs is not None), None)
    return Completion(ids, "".join(e.text for e in events), last.finish_reason, last.usage, logprobs, prompt_logprobs)

