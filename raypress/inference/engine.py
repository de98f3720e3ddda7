"""An inference engine for ``MoEForCausalLM`` with a KV cache per sequence and continuous batching.

Why its own step loop: Ray Serve's ``@serve.batch`` forms a batch once and runs it to the end, so a
request arriving mid-generation would wait for the whole batch. Here a background thread repeats
one *step*: drop cancelled sequences, admit waiting requests into free KV-cache slots and prefill
them (one right-padded forward), then run ONE decode forward over every running sequence, sample a
token for each, stream it out and retire the finished ones. New requests therefore join between
two decode steps. A thread and not an asyncio task, because a forward pass blocks: in a task it
would stall the replica's event loop (and its HTTP handling) for the whole step.

Requests come in through ``add_request`` (a ``RequestHandle``; iterate it) or ``generate`` (an
async generator of ``GenerationEvent``; the last one carries ``finish_reason`` and ``usage``).
Waiting requests are bounded (``QueueFull``, a server's 503); a prompt that leaves no room in the
context raises ``PromptTooLong`` (a 400). ``stats`` and the ``on_step`` / ``on_request_finished``
callbacks expose what a server exports as metrics (no Ray here): per-request TTFT and TPOT, per-step
batch size, queue depth, tokens/s, and the distinct experts each layer activated.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import dataclass
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

import torch
from torch import Tensor

from raypress.models.kv_cache import KVCache
from raypress.models.moe import MoEForCausalLM
from raypress.inference.sampling import SamplingParams, sample

log = logging.getLogger(__name__)

FinishReason = Literal["stop", "length", "cancelled"]
DEFAULT_MAX_LEN = 2048  # context when neither the caller nor a smaller model limit says otherwise


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


class Tokenizer(Protocol):
    """What the engine needs from a tokenizer: ``decode`` (and ``encode`` for text prompts).

    ``encode`` may return a list of ids or an object with ``.ids`` (``tokenizers.Tokenizer``).
    """

    def encode(self, text: str) -> Any: ...

    def decode(self, ids: list[int]) -> str: ...


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class GenerationEvent:
    """One streamed piece: the new token id(s) and the text now safe to show.

    ``text`` can be empty while it might still become a stop string (or is half a UTF-8 character).
    The last event of a request has ``finish_reason`` ("stop": EOS / stop token / stop string,
    "length": max_tokens or the context is full, "cancelled") and ``usage``.
    """

    token_ids: list[int]
    text: str
    finish_reason: FinishReason | None = None
    usage: Usage | None = None


@dataclass(frozen=True)
class Completion:
    """A whole request's output: every generated id (EOS included), the text (cut at a stop string)."""

    token_ids: list[int]
    text: str
    finish_reason: FinishReason
    usage: Usage


@dataclass(frozen=True)
class RequestMetrics:
    """Timings of one finished request (seconds); TTFT counts the wait in the queue."""

    request_id: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: FinishReason
    queue_seconds: float
    ttft_seconds: float | None  # None: no token was generated (cancelled while waiting)
    tpot_seconds: float | None  # mean time between output tokens; None with fewer than 2 tokens
    e2e_seconds: float


@dataclass(frozen=True)
class StepRecord:
    """What one engine step did.

    ``batch_size``: sequences in the decode forward. ``*_experts``: distinct experts activated by
    the whole batch in each layer of that forward (empty when the forward did not run).
    ``decode_context_tokens``: cached tokens the decode forward attended over (KV-cache reads).
    ``prefill_lengths`` / ``decode_contexts``: per sequence, the prompt length prefilled and the
    tokens already cached before its decode token (what MoE-CAP's attention FLOPs need exactly).
    """

    step: int
    started: float  # time.monotonic()
    seconds: float
    admitted: int
    prefill_tokens: int
    prefill_seconds: float
    batch_size: int
    decode_context_tokens: int
    decode_seconds: float
    new_tokens: int
    finished: int
    queue_depth: int  # still waiting after admission
    running: int  # sequences holding a KV slot after the step
    prefill_experts: list[int]
    decode_experts: list[int]
    prefill_lengths: list[int]
    decode_contexts: list[int]


class EngineStats:
    """Rolling history of steps and finished requests plus running totals; safe to read from any thread."""

    def __init__(self, history: int = 1024) -> None:
        self._lock = threading.Lock()
        self._steps: deque[StepRecord] = deque(maxlen=history)
        self._requests: deque[RequestMetrics] = deque(maxlen=history)
        self.total_steps = 0
        self.total_tokens = 0
        self.total_requests = 0

    def add_step(self, record: StepRecord) -> None:
        with self._lock:
            self._steps.append(record)
            self.total_steps += 1
            self.total_tokens += record.new_tokens

    def add_request(self, metrics: RequestMetrics) -> None:
        with self._lock:
            self._requests.append(metrics)
            self.total_requests += 1

    @property
    def steps(self) -> list[StepRecord]:
        with self._lock:
            return list(self._steps)

    @property
    def requests(self) -> list[RequestMetrics]:
        with self._lock:
            return list(self._requests)

    def tokens_per_second(self, window_s: float = 10.0) -> float:
        """Generated tokens per wall-clock second over the steps of the last ``window_s`` seconds."""
        now = time.monotonic()
        recent = [s for s in self.steps if s.started >= now - window_s]
        if not recent:
            return 0.0
        elapsed = recent[-1].started + recent[-1].seconds - recent[0].started
        return sum(s.new_tokens for s in recent) / elapsed if elapsed > 0 else 0.0


class TextStream:
    """Turns a growing list of token ids into text deltas, cut before the first stop string.

    Every step decodes the whole completion (cheap next to a forward pass) and emits only what can
    no longer change: a suffix that could still grow into a stop string, or a trailing U+FFFD (half
    of a multi-byte character from a byte-level tokenizer), is held back until the next token.
    """

    def __init__(self, decode: Callable[[list[int]], str], stop: Sequence[str] = ()) -> None:
        self._decode = decode
        self._stop = list(stop)
        self.ids: list[int] = []
        self.text = ""
        self.stopped = False  # a stop string appeared; ``text`` ends right before it
        self._sent = 0

    def push(self, token_id: int) -> str:
        """Add one token; return the newly safe text."""
        self.ids.append(token_id)
        text = self._decode(self.ids)
        # emitted text never holds the start of a stop string, so search only the unsent part
        hits = [i for s in self._stop if (i := text.find(s, self._sent)) >= 0]
        if hits:
            self.text, self.stopped = text[: min(hits)], True
            return self.flush()
        self.text = text
        return self._emit(len(text) - self._held_back(text))

    def flush(self) -> str:
        """Everything not yet emitted (the stream is ending)."""
        return self._emit(len(self.text))

    def _held_back(self, text: str) -> int:
        partial = max((k for s in self._stop for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        replacement = len(text) - len(text.rstrip("\ufffd"))
        return max(partial, replacement)

    def _emit(self, end: int) -> str:
        if end <= self._sent:
            return ""
        delta, self._sent = self.text[self._sent : end], end
        return delta


@dataclass
class _Failure:
    error: BaseException


class RequestHandle:
    """A submitted request: iterate its GenerationEvents once (``async for`` when it was added
    inside a running event loop, plain ``for`` otherwise), wait for ``result()``, or ``cancel()`` it."""

    def __init__(
        self, engine: "Engine", request_id: str, prompt_ids: list[int], params: SamplingParams
    ) -> None:
        self.request_id = request_id
        self.prompt_ids = prompt_ids
        self.params = params
        self._engine = engine
        self._finished = threading.Event()
        self.cancel_requested = False
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None
        self._async_queue: asyncio.Queue[GenerationEvent | _Failure] | None = (
            asyncio.Queue() if self._loop is not None else None
        )
        self._sync_queue: queue.SimpleQueue[GenerationEvent | _Failure] = queue.SimpleQueue()
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
        if self._async_queue is None:
            raise RuntimeError("this request was added outside an event loop: iterate it with a plain for")
        self._claim()
        return self._aiter(self._async_queue)

    def _claim(self) -> None:
        if self._iterated:
            raise RuntimeError(f"the events of request {self.request_id} were already read")
        self._iterated = True

    async def _aiter(self, source: "asyncio.Queue[GenerationEvent | _Failure]") -> AsyncIterator[GenerationEvent]:
        while True:
            item = await source.get()
            if isinstance(item, _Failure):
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
            if isinstance(item, _Failure):
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
            self._completion = _collect([event async for event in self])
        return self._completion

    def _raise(self, error: BaseException) -> None:
        if isinstance(error, EngineError):
            raise error
        raise RequestFailed(f"request {self.request_id} failed: {error}") from error

    def _deliver(self, item: GenerationEvent | _Failure) -> None:
        """Called by the step thread; a closed event loop (client gone) cancels the request."""
        if isinstance(item, _Failure) or item.finish_reason is not None:
            self._finished.set()
        if self._loop is None:
            self._sync_queue.put(item)
            return
        assert self._async_queue is not None
        try:
            self._loop.call_soon_threadsafe(self._async_queue.put_nowait, item)
        except RuntimeError:
            self.cancel_requested = True


def _collect(events: list[GenerationEvent]) -> Completion:
    last = events[-1]
    assert last.finish_reason is not None and last.usage is not None
    ids = [t for e in events for t in e.token_ids]
    return Completion(ids, "".join(e.text for e in events), last.finish_reason, last.usage)


class _Sequence:
    """Engine-side state of one request."""

    def __init__(self, handle: RequestHandle, decode: Callable[[list[int]], str]) -> None:
        self.handle = handle
        self.params = handle.params
        self.generator = handle.params.make_generator()
        self.stream = TextStream(decode, handle.params.stop)
        self.slot = -1
        self.output_ids: list[int] = []
        self.arrived = time.monotonic()
        self.admitted: float | None = None
        self.first_token: float | None = None
        self.last_token: float | None = None

    @property
    def prompt_len(self) -> int:
        return len(self.handle.prompt_ids)


def _distinct_experts(counts: list[Tensor]) -> list[int]:
    """Per layer, how many experts got at least one token (one device sync for all layers)."""
    if not counts:
        return []
    return torch.stack(counts).gt(0).sum(dim=1).tolist()


class Engine:
    """Continuous-batching generation over a ``MoEForCausalLM`` (see the module docstring).

    max_batch_size: KV-cache slots = most sequences decoding at once. max_len: the context
    (prompt + completion tokens); default the model's ``max_position_embeddings`` capped at
    2048. max_queue: most requests waiting for a slot. max_prefill_tokens: padded prompt tokens
    one step may prefill (at least one request is always admitted), which bounds how long running
    sequences wait for a step. eos_token_ids: None takes the model config's ``eos_token_id`` and
    the tokenizer's ``stop_token_ids`` when it has that attribute.
    num_threads: calls ``torch.set_num_threads`` (process-wide) when given.
    """

    def __init__(
        self,
        model: MoEForCausalLM,
        tokenizer: Tokenizer,
        *,
        max_batch_size: int = 8,
        max_len: int | None = None,
        max_queue: int = 64,
        max_prefill_tokens: int = 2048,
        eos_token_ids: Sequence[int] | None = None,
        num_threads: int | None = None,
        stats_history: int = 1024,
        on_step: Callable[[StepRecord], None] | None = None,
        on_request_finished: Callable[[RequestMetrics], None] | None = None,
    ) -> None:
        config = model.config
        if max_len is None:
            max_len = min(config.max_position_embeddings, DEFAULT_MAX_LEN)
        if max_batch_size < 1 or max_queue < 1 or max_prefill_tokens < 1:
            raise ValueError("max_batch_size, max_queue and max_prefill_tokens must be at least 1")
        if not 2 <= max_len <= config.max_position_embeddings:
            raise ValueError(f"max_len must be in [2, {config.max_position_embeddings}] (the model's positions)")
        if num_threads is not None:
            torch.set_num_threads(num_threads)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.max_batch_size = max_batch_size
        self.max_len = max_len
        self.max_queue = max_queue
        self.max_prefill_tokens = max_prefill_tokens
        if eos_token_ids is None:  # the config's EOS plus the tokenizer's (e.g. <|im_end|>) if it names some
            eos_token_ids = [] if config.eos_token_id is None else [config.eos_token_id]
            eos_token_ids += list(getattr(tokenizer, "stop_token_ids", []))
        self.eos_token_ids = frozenset(eos_token_ids)
        weight = next(model.parameters())
        self.device = weight.device
        self.cache = KVCache.for_config(config, max_batch_size, max_len, weight.dtype, weight.device)
        self.stats = EngineStats(stats_history)
        self.on_step = on_step
        self.on_request_finished = on_request_finished
        self._waiting: deque[_Sequence] = deque()
        self._running: list[_Sequence] = []
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._ids = itertools.count()
        self._step_no = 0
        self._step_lock = threading.Lock()  # the thread and a direct caller of step() never overlap

    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        dtype: torch.dtype | None = None,
        device: torch.device | str = "cpu",
        **kwargs: Any,
    ) -> "Engine":
        """An engine over a Model directory (ours or an HF Mixtral / Qwen2-MoE checkpoint):
        safetensors weights, ``tokenizer.json`` (+ ``tokenizer_config.json``)."""
        from raypress.models.bpe_tokenizer import load_tokenizer
        from raypress.models.moe_checkpoint import load_moe

        model, _ = load_moe(path, dtype, device)
        return cls(model, load_tokenizer(path), **kwargs)

    # ---- text ---------------------------------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        encoded = self.tokenizer.encode(text)
        return list(getattr(encoded, "ids", encoded))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    # ---- requests -----------------------------------------------------------------------------

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def num_running(self) -> int:
        return len(self._running)

    def add_request(
        self,
        prompt: str | Sequence[int],
        params: SamplingParams | dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> RequestHandle:
        """Queue a request; it is admitted at the next step with a free slot.

        Raises ``PromptTooLong`` (no room left for a completion), ``QueueFull``, ``EngineStopped``,
        ``ValueError`` for an empty prompt or ids outside the vocabulary, and pydantic's
        ``ValidationError`` (a ValueError) for bad params given as a dict.
        """
        if params is None:
            params = SamplingParams()
        elif isinstance(params, dict):
            params = SamplingParams(**params)
        prompt_ids = self.encode(prompt) if isinstance(prompt, str) else [int(t) for t in prompt]
        self._check_prompt(prompt_ids)
        handle = RequestHandle(self, request_id or f"req-{next(self._ids)}", prompt_ids, params)
        sequence = _Sequence(handle, self.decode)
        with self._cond:
            if self._stopping:
                raise EngineStopped("the engine is stopping")
            if len(self._waiting) >= self.max_queue:
                raise QueueFull(f"{len(self._waiting)} requests are already waiting (max_queue={self.max_queue})")
            self._waiting.append(sequence)
            self._cond.notify()
        return handle

    def _check_prompt(self, prompt_ids: list[int]) -> None:
        if not prompt_ids:
            raise ValueError("the prompt is empty")
        if len(prompt_ids) >= self.max_len:
            raise PromptTooLong(
                f"the prompt has {len(prompt_ids)} tokens; the context holds {self.max_len} tokens "
                "(prompt + completion), so it leaves no room for a completion"
            )
        vocab = self.model.config.vocab_size
        if min(prompt_ids) < 0 or max(prompt_ids) >= vocab:
            raise ValueError(f"prompt token ids must be in [0, {vocab})")

    async def generate(
        self,
        prompt: str | Sequence[int],
        params: SamplingParams | dict[str, Any] | None = None,
        request_id: str | None = None,
    ) -> AsyncIterator[GenerationEvent]:
        """Stream one request's events (starting the step loop if needed).

        Leaving early (client disconnect: the task is cancelled, or the generator closed) cancels
        the request and frees its slot.
        """
        self.start()
        handle = self.add_request(prompt, params, request_id)
        try:
            async for event in handle:
                yield event
        finally:
            handle.cancel()

    def _cancel(self, handle: RequestHandle) -> None:
        with self._cond:
            waiting = next((s for s in self._waiting if s.handle is handle), None)
            if waiting is None:  # running: the step thread retires it before its next forward
                handle.cancel_requested = True
                self._cond.notify()
                return
            self._waiting.remove(waiting)
        self._finish(waiting, "cancelled", [], "")

    # ---- the step loop ------------------------------------------------------------------------

    @property
    def is_running(self) -> bool:
        """The step loop's thread is alive (what a health check asks)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self) -> None:
        """Run steps on a background thread until ``stop()`` (idempotent)."""
        with self._cond:
            if self._thread is not None and self._thread.is_alive():
                return
            self._stopping = False
            self._thread = threading.Thread(target=self._loop, name="raypress-engine", daemon=True)
            self._thread.start()

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the step loop; unfinished requests fail with ``EngineStopped``."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        with self._cond:
            left, self._waiting = list(self._waiting) + self._running, deque()
            self._running = []
        for sequence in left:
            self._fail(sequence, EngineStopped("the engine stopped"))

    def __enter__(self) -> "Engine":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not (self._stopping or self._waiting or self._running):
                    self._cond.wait()
                if self._stopping:
                    return
            try:
                self.step()
            except Exception as error:  # a bug outside the forwards: fail what ran, keep serving
                log.exception("engine step failed")
                for sequence in list(self._running):
                    self._fail(sequence, error)

    @torch.inference_mode()
    def step(self) -> StepRecord:
        """One iteration: retire cancelled, admit + prefill, one batched decode, retire finished.

        The background thread calls this; tests may call it directly instead of ``start()``.
        """
        with self._step_lock:
            return self._step()

    def _step(self) -> StepRecord:
        started = time.monotonic()
        for sequence in [s for s in self._running if s.handle.cancel_requested]:
            self._finish(sequence, "cancelled", [], sequence.stream.flush())
        admitted = self._admit()
        new_tokens = finished = 0
        prefill_tokens = sum(s.prompt_len for s in admitted)
        prefill_experts: list[int] = []
        prefill_start = time.monotonic()
        if admitted:
            logits = self._forward_or_fail(admitted, self._prefill)
            if logits is not None:
                prefill_experts = _distinct_experts(self.model.last_expert_counts)
                new_tokens += len(admitted)
                finished += self._append(admitted, logits)
        decode_start = time.monotonic()
        batch = list(self._running)
        decode_experts: list[int] = []
        decode_contexts = [s.prompt_len + len(s.output_ids) - 1 for s in batch]  # cached before this token
        if batch:
            logits = self._forward_or_fail(batch, self._decode)
            if logits is not None:
                decode_experts = _distinct_experts(self.model.last_expert_counts)
                new_tokens += len(batch)
                finished += self._append(batch, logits)
        now = time.monotonic()
        record = StepRecord(
            step=self._step_no,
            started=started,
            seconds=now - started,
            admitted=len(admitted),
            prefill_tokens=prefill_tokens,
            prefill_seconds=decode_start - prefill_start,
            batch_size=len(batch),
            decode_context_tokens=sum(decode_contexts) + len(batch),
            decode_seconds=now - decode_start,
            new_tokens=new_tokens,
            finished=finished,
            queue_depth=len(self._waiting),
            running=len(self._running),
            prefill_experts=prefill_experts,
            decode_experts=decode_experts,
            prefill_lengths=[s.prompt_len for s in admitted],
            decode_contexts=decode_contexts,
        )
        self._step_no += 1
        self.stats.add_step(record)
        _call(self.on_step, record)
        return record

    def _admit(self) -> list[_Sequence]:
        """First come, first served into free slots, within the prefill token budget."""
        admitted: list[_Sequence] = []
        longest = 0
        with self._cond:
            while self._waiting and self.cache.num_free > 0:
                candidate = self._waiting[0]
                padded = (len(admitted) + 1) * max(longest, candidate.prompt_len)
                if admitted and padded > self.max_prefill_tokens:
                    break
                self._waiting.popleft()
                candidate.slot = self.cache.allocate()
                candidate.admitted = time.monotonic()
                longest = max(longest, candidate.prompt_len)
                admitted.append(candidate)
                self._running.append(candidate)
        return admitted

    def _forward_or_fail(self, batch: list[_Sequence], forward: Callable[[list[_Sequence]], Tensor]) -> Tensor | None:
        try:
            return forward(batch)
        except Exception as error:
            log.exception("forward pass failed for %d sequences", len(batch))
            for sequence in batch:
                self._fail(sequence, error)
            return None

    def _prefill(self, batch: list[_Sequence]) -> Tensor:
        """One right-padded forward over the new prompts; the logits of each prompt's last token."""
        lengths = torch.tensor([s.prompt_len for s in batch])
        ids = torch.zeros(len(batch), int(lengths.max()), dtype=torch.long)
        for row, sequence in enumerate(batch):
            ids[row, : sequence.prompt_len] = torch.tensor(sequence.handle.prompt_ids)
        return self.model(
            ids.to(self.device),
            kv_cache=self.cache,
            slots=self._slots(batch),
            input_lengths=lengths.to(self.device),
            logits_at=lengths.to(self.device) - 1,
        )

    def _decode(self, batch: list[_Sequence]) -> Tensor:
        """One token per running sequence (its last output) at the next position of its slot."""
        ids = torch.tensor([[s.output_ids[-1]] for s in batch], dtype=torch.long, device=self.device)
        return self.model(ids, kv_cache=self.cache, slots=self._slots(batch))[:, 0]

    def _slots(self, batch: list[_Sequence]) -> Tensor:
        return torch.tensor([s.slot for s in batch], dtype=torch.long, device=self.device)

    def _append(self, batch: list[_Sequence], logits: Tensor) -> int:
        """Sample one token per sequence, stream it, retire the finished; returns how many finished."""
        token_ids = self._sample(batch, logits)
        now = time.monotonic()
        finished = 0
        for sequence, token in zip(batch, token_ids):
            sequence.output_ids.append(token)
            if sequence.first_token is None:
                sequence.first_token = now
            sequence.last_token = now
            reason, text = self._advance(sequence, token)
            if reason is None:
                sequence.handle._deliver(GenerationEvent([token], text))
            else:
                self._finish(sequence, reason, [token], text)
                finished += 1
        return finished

    def _sample(self, batch: list[_Sequence], logits: Tensor) -> list[int]:
        params = [s.params for s in batch]
        if all(p.greedy for p in params):
            return logits.argmax(dim=-1).tolist()
        uniform = torch.stack(
            [torch.rand((), generator=s.generator) if not s.params.greedy else torch.zeros(()) for s in batch]
        )
        return sample(
            logits,
            temperature=torch.tensor([p.temperature for p in params]),
            top_k=torch.tensor([p.top_k for p in params]),
            top_p=torch.tensor([p.top_p for p in params]),
            uniform=uniform,
        ).tolist()

    def _advance(self, sequence: _Sequence, token: int) -> tuple[FinishReason | None, str]:
        """The text a new token adds, and why the sequence ends now (None: it goes on)."""
        params = sequence.params
        if (token in self.eos_token_ids and not params.ignore_eos) or token in params.stop_token_ids:
            return "stop", sequence.stream.flush()
        text = sequence.stream.push(token)
        if sequence.stream.stopped:
            return "stop", text
        full_context = sequence.prompt_len + len(sequence.output_ids) >= self.max_len
        if len(sequence.output_ids) >= params.max_tokens or full_context:
            return "length", text + sequence.stream.flush()
        return None, text

    def _release(self, sequence: _Sequence) -> None:
        if sequence in self._running:
            self._running.remove(sequence)
        if sequence.slot >= 0:
            self.cache.free(sequence.slot)
            sequence.slot = -1

    def _finish(self, sequence: _Sequence, reason: FinishReason, token_ids: list[int], text: str) -> None:
        self._release(sequence)
        usage = Usage(sequence.prompt_len, len(sequence.output_ids))
        sequence.handle._deliver(GenerationEvent(token_ids, text, reason, usage))
        self._record(sequence, reason)

    def _fail(self, sequence: _Sequence, error: BaseException) -> None:
        self._release(sequence)
        sequence.handle._deliver(_Failure(error))

    def _record(self, sequence: _Sequence, reason: FinishReason) -> None:
        end = time.monotonic()
        count = len(sequence.output_ids)
        first, last = sequence.first_token, sequence.last_token
        metrics = RequestMetrics(
            request_id=sequence.handle.request_id,
            prompt_tokens=sequence.prompt_len,
            completion_tokens=count,
            finish_reason=reason,
            queue_seconds=(sequence.admitted or end) - sequence.arrived,
            ttft_seconds=None if first is None else first - sequence.arrived,
            tpot_seconds=None if count < 2 or first is None or last is None else (last - first) / (count - 1),
            e2e_seconds=end - sequence.arrived,
        )
        self.stats.add_request(metrics)
        _call(self.on_request_finished, metrics)


def _call(callback: Callable[[Any], None] | None, value: Any) -> None:
    """Run a metrics callback; its errors are logged, never allowed to stop the engine."""
    if callback is None:
        return
    try:
        callback(value)
    except Exception:
        log.exception("engine metrics callback failed")
