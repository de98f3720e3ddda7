"""An inference engine for ``MoEForCausalLM`` with a KV cache per sequence and continuous batching.

Why its own step loop: Ray Serve's ``@serve.batch`` forms a batch once and runs it to the end, so a
request arriving mid-generation would wait for the whole batch. Here a background thread repeats
one *step*: drop cancelled sequences, admit waiting requests into free KV-cache slots, then run ONE
forward over every running sequence's next token and the new prompts together (a packed forward:
the new prompts get their first token, the others their next), sample a token for each, stream it
out and retire the finished ones. New requests therefore join between two steps. With nothing
decoding yet, or with ``fuse_prefill=False``, or when a new request asks for its prompt's logprobs,
the new prompts get a right-padded prefill forward of their own before the decode forward.
A thread and not an asyncio task, because a forward pass blocks: in a task it
would stall the replica's event loop (and its HTTP handling) for the whole step.

Requests come in through ``add_request`` (a ``RequestHandle``; iterate it) or ``generate`` (an
async generator of ``GenerationEvent``; the last one carries ``finish_reason`` and ``usage``).
Waiting requests are bounded (``QueueFull``, a server's 503); a prompt that leaves no room in the
context raises ``PromptTooLong`` (a 400). ``stats`` and the ``on_step`` / ``on_request_finished``
callbacks expose what a server exports as metrics (no Ray here): per-request TTFT and TPOT, per-step
batch size, queue depth, tokens/s, and the distinct experts each layer activated.

This module is the scheduler and its forward passes; what callers hold (handles, events, errors) is
``requests.py``, the records it reports ``stats.py``, and detokenisation ``text_stream.py``.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import Tensor

from raypress.inference.requests import (
    EngineStopped,
    Failure,
    FinishReason,
    GenerationEvent,
    PromptTooLong,
    QueueFull,
    RequestHandle,
    TokenLogprob,
    Usage,
)
from raypress.inference.sampling import SamplingParams, position_logprobs, sample
from raypress.inference.stats import EngineStats, RequestMetrics, StepRecord
from raypress.inference.text_stream import TextStream
from raypress.models.kv_cache import KVCache
from raypress.models.moe import MoEForCausalLM, PackedBlock

log = logging.getLogger(__name__)

DEFAULT_MAX_LEN = 2048  # context when neither the caller nor a smaller model limit says otherwise


class Tokenizer(Protocol):
    """What the engine needs from a tokenizer: ``decode`` (and ``encode`` for text prompts).

    ``encode`` may return a list of ids or an object with ``.ids`` (``tokenizers.Tokenizer``).
    """

    def encode(self, text: str) -> Any: ...

    def decode(self, ids: list[int]) -> str: ...


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
        self.prompt_logprobs: list[TokenLogprob | None] | None = None  # set by the prefill when asked

    def take_prompt_logprobs(self) -> list[TokenLogprob | None] | None:
        """The prompt's logprobs for the first event that goes out (``None`` after that)."""
        taken, self.prompt_logprobs = self.prompt_logprobs, None
        return taken

    @property
    def prompt_len(self) -> int:
        return len(self.handle.prompt_ids)


def _distinct_experts(counts: list[Tensor]) -> list[int]:
    """Per layer, how many experts got at least one token (one device sync for all layers)."""
    if not counts:
        return []
    return torch.stack(counts).gt(0).sum(dim=1).tolist()


class TokenizerText:
    """``encode`` / ``decode`` over ``self.tokenizer``: what an engine and ``EngineProcess`` share."""

    tokenizer: Tokenizer
    max_len: int
    model: Any  # ``.config.vocab_size``

    def encode(self, text: str) -> list[int]:
        encoded = self.tokenizer.encode(text)
        return list(getattr(encoded, "ids", encoded))

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def checked_request(self, prompt: str | Sequence[int],
                        params: SamplingParams | dict[str, Any] | None) -> tuple[list[int], SamplingParams]:
        """The prompt's ids and the settings, or what ``add_request`` raises for them."""
        if params is None:
            params = SamplingParams()
        elif isinstance(params, dict):
            params = SamplingParams(**params)
        prompt_ids = self.encode(prompt) if isinstance(prompt, str) else [int(t) for t in prompt]
        check_prompt(prompt_ids, self.max_len, self.model.config.vocab_size)
        return prompt_ids, params


class Engine(TokenizerText):
    """Continuous-batching generation over a ``MoEForCausalLM`` (see the module docstring).

    max_batch_size: KV-cache slots = most sequences decoding at once. max_len: the context
    (prompt + completion tokens); default the model's ``max_position_embeddings`` capped at
    2048. max_queue: most requests waiting for a slot. max_prefill_tokens: padded prompt tokens
    one step may prefill (at least one request is always admitted), which bounds how long running
    sequences wait for a step. eos_token_ids: None takes the model config's ``eos_token_id`` and
    the tokenizer's ``stop_token_ids`` when it has that attribute.
    num_threads: calls ``torch.set_num_threads`` (process-wide) when given. fuse_prefill: new prompts
    join the running sequences' decode forward (one packed forward per step) instead of a prefill
    forward of their own before it.
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
        fuse_prefill: bool = True,
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
        self.fuse_prefill = fuse_prefill
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

    # ---- requests -----------------------------------------------------------------------------

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def free_slots(self) -> int:
        """KV-cache slots no sequence holds."""
        return self.cache.num_free

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def add_request(
        self,
        prompt: str | Sequence[int],
        params: SamplingParams | dict[str, Any] | None = None,
        request_id: str | None = None,
        listener: Callable[[RequestHandle, GenerationEvent | Failure], None] | None = None,
    ) -> RequestHandle:
        """Queue a request; it is admitted at the next step with a free slot. ``listener``: called
        (on the step thread) with each event instead of queueing it in the handle.

        Raises ``PromptTooLong`` (no room left for a completion), ``QueueFull``, ``EngineStopped``,
        ``ValueError`` for an empty prompt or ids outside the vocabulary, and pydantic's
        ``ValidationError`` (a ValueError) for bad params given as a dict.
        """
        prompt_ids, params = self.checked_request(prompt, params)
        handle = RequestHandle(self, request_id or f"req-{next(self._ids)}", prompt_ids, params, listener)
        sequence = _Sequence(handle, self.decode)
        with self._cond:
            if self._stopping:
                raise EngineStopped("the engine is stopping")
            if len(self._waiting) >= self.max_queue:
                raise QueueFull(f"{len(self._waiting)} requests are already waiting (max_queue={self.max_queue})")
            self._waiting.append(sequence)
            self._cond.notify()
        return handle

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
        decoding = list(self._running)  # admitted before this step: they decode in it
        admitted = self._admit()
        if admitted and decoding and self._fuses(admitted):
            passes = self._fused_pass(sorted(decoding, key=lambda s: s.slot), admitted)
        else:
            passes = self._separate_passes(admitted)
        now = time.monotonic()
        record = StepRecord(
            step=self._step_no,
            started=started,
            seconds=now - started,
            admitted=len(admitted),
            prefill_tokens=sum(s.prompt_len for s in admitted),
            queue_depth=len(self._waiting),
            running=len(self._running),
            prefill_lengths=[s.prompt_len for s in admitted],
            **passes,
        )
        self._step_no += 1
        self.stats.add_step(record)
        call_callback(self.on_step, record)
        return record

    def _fuses(self, admitted: list[_Sequence]) -> bool:
        """New prompts join the decode forward unless a request wants its prompt's logprobs (the
        LM head then runs over every prompt position: a separate prefill)."""
        return self.fuse_prefill and all(s.params.prompt_logprobs is None for s in admitted)

    def _separate_passes(self, admitted: list[_Sequence]) -> dict[str, Any]:
        """A prefill forward for the new prompts, then one decode forward over every running
        sequence (the new ones included: their second token)."""
        new_tokens = finished = 0
        prefill_experts: list[int] = []
        prefill_start = time.monotonic()
        prefill_forward = decode_forward = 0.0
        if admitted:
            logits = self._forward_or_fail(admitted, self._prefill)
            prefill_forward = self._since(prefill_start)
            if logits is not None:
                prefill_experts = _distinct_experts(self.model.last_expert_counts)
                sampled, done = self._append(admitted, logits)
                new_tokens += sampled
                finished += done
        decode_start = time.monotonic()
        batch = sorted(self._running, key=lambda s: s.slot)  # slot order: attention reads a range of slots
        decode_experts: list[int] = []
        decode_contexts = [s.prompt_len + len(s.output_ids) - 1 for s in batch]  # cached before this token
        if batch:
            logits = self._forward_or_fail(batch, self._decode)
            decode_forward = self._since(decode_start)
            if logits is not None:
                decode_experts = _distinct_experts(self.model.last_expert_counts)
                sampled, done = self._append(batch, logits)
                new_tokens += sampled
                finished += done
        return _pass_fields(batch, decode_contexts, decode_start, (new_tokens, finished),
                            (prefill_experts, decode_experts), prefill_seconds=decode_start - prefill_start,
                            prefill_forward_seconds=prefill_forward, decode_forward_seconds=decode_forward)

    def _fused_pass(self, batch: list[_Sequence], admitted: list[_Sequence]) -> dict[str, Any]:
        """One forward over the running sequences' next tokens and the new prompts
        (``MoEForCausalLM.forward_packed``): the weights are read, and the per-forward overhead
        paid, once per step instead of twice. The new sequences get their first token only."""
        start = time.monotonic()
        decode_contexts = [s.prompt_len + len(s.output_ids) - 1 for s in batch]
        new_tokens = finished = 0
        prefill_experts: list[int] = []
        decode_experts: list[int] = []
        forward = 0.0
        logits = self._forward_or_fail(batch + admitted, lambda _: self._packed(batch, admitted))
        if logits is not None:
            forward = self._since(start)
            decode_counts, prefill_counts = self.model.last_block_expert_counts
            decode_experts, prefill_experts = _distinct_experts(decode_counts), _distinct_experts(prefill_counts)
            for rows, block in ((batch, logits[: len(batch)]), (admitted, logits[len(batch):])):
                sampled, done = self._append(rows, block)
                new_tokens += sampled
                finished += done
        return _pass_fields(batch, decode_contexts, start, (new_tokens, finished), (prefill_experts, decode_experts),
                            prefill_seconds=0.0, decode_forward_seconds=forward, fused=True)

    def _since(self, start: float) -> float:
        """Seconds since ``start`` once the device has finished the work queued so far (a GPU runs
        the forward's kernels after the call returns; the sampling right after waits for them anyway)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.monotonic() - start

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
        """One right-padded forward over the new prompts; the logits of each prompt's last token.

        Only when a request asks for ``prompt_logprobs`` does the LM head run over every position
        (T times the cost of the last one); those requests get their prompt's logprobs here.
        """
        ids, lengths = _padded_prompts(batch)
        last = lengths.to(self.device) - 1
        scoring = any(s.params.prompt_logprobs is not None for s in batch)
        logits = self.model(
            ids.to(self.device),
            kv_cache=self.cache,
            slots=self._slots(batch),
            input_lengths=lengths.to(self.device),
            logits_at=None if scoring else last,
        )
        if not scoring:
            return logits
        for row, sequence in enumerate(batch):
            k = sequence.params.prompt_logprobs
            if k is not None:  # position t's logits predict token t + 1
                n = sequence.prompt_len
                sequence.prompt_logprobs = [None, *position_logprobs(logits[row, : n - 1], ids[row, 1:n], k)]
        return logits[torch.arange(len(batch), device=self.device), last]

    def _packed(self, batch: list[_Sequence], admitted: list[_Sequence]) -> Tensor:
        """The decode rows' logits, then the new prompts' last-token logits, from one forward."""
        decode = PackedBlock(_next_inputs(batch), self._slots(batch))
        ids, lengths = _padded_prompts(admitted)
        prefill = PackedBlock(ids, self._slots(admitted), lengths)
        return torch.cat(self.model.forward_packed([decode, prefill], self.cache))

    def _decode(self, batch: list[_Sequence]) -> Tensor:
        """One token per running sequence (its last output) at the next position of its slot."""
        return self.model(_next_inputs(batch).to(self.device), kv_cache=self.cache, slots=self._slots(batch))[:, 0]

    def _slots(self, batch: list[_Sequence]) -> Tensor:
        return torch.tensor([s.slot for s in batch], dtype=torch.long, device=self.device)

    def _append(self, batch: list[_Sequence], logits: Tensor) -> tuple[int, int]:
        """Sample one token per sequence, stream it, retire the finished; returns (tokens sampled,
        sequences finished). ``max_tokens`` 0 (prompt scoring) finishes right after the prefill."""
        finished = 0
        if any(s.params.max_tokens == 0 for s in batch):
            keep = [row for row, s in enumerate(batch) if s.params.max_tokens > 0]
            for sequence in batch:
                if sequence.params.max_tokens == 0:
                    self._finish(sequence, "length", [], "")
                    finished += 1
            if not keep:
                return 0, finished
            batch = [batch[row] for row in keep]
            logits = logits[torch.tensor(keep, device=logits.device)]
        token_ids = self._sample(batch, logits)
        logprobs = self._logprobs(batch, logits, token_ids)
        now = time.monotonic()
        for sequence, token, token_logprobs in zip(batch, token_ids, logprobs):
            sequence.output_ids.append(token)
            if sequence.first_token is None:
                sequence.first_token = now
            sequence.last_token = now
            reason, text = self._advance(sequence, token)
            if reason is None:
                sequence.handle._deliver(GenerationEvent([token], text, logprobs=token_logprobs,
                                                         prompt_logprobs=sequence.take_prompt_logprobs()))
            else:
                self._finish(sequence, reason, [token], text, token_logprobs)
                finished += 1
        return len(batch), finished

    def _logprobs(self, batch: list[_Sequence], logits: Tensor, token_ids: list[int]) -> list[list[TokenLogprob] | None]:
        """Each sampled token's logprob (+ top k) for the sequences that asked; nothing is computed
        for a batch where none did, so plain decoding pays nothing for the feature."""
        rows = [row for row, s in enumerate(batch) if s.params.logprobs is not None]
        out: list[list[TokenLogprob] | None] = [None] * len(batch)
        if not rows:
            return out
        k = max(batch[row].params.logprobs or 0 for row in rows)
        picked = logits[torch.tensor(rows, device=logits.device)]
        computed = position_logprobs(picked, torch.tensor([token_ids[row] for row in rows]), k)
        for row, entry in zip(rows, computed):
            wanted = batch[row].params.logprobs or 0
            out[row] = [TokenLogprob(entry.token_id, entry.logprob, entry.top[:wanted])]
        return out

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
            min_p=torch.tensor([p.min_p for p in params]),
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

    def _finish(self, sequence: _Sequence, reason: FinishReason, token_ids: list[int], text: str,
                logprobs: list[TokenLogprob] | None = None) -> None:
        self._release(sequence)
        usage = Usage(sequence.prompt_len, len(sequence.output_ids))
        if logprobs is None and sequence.params.logprobs is not None:
            logprobs = []  # asked for: an empty list (a cancel or EOS flush adds no token)
        sequence.handle._deliver(GenerationEvent(token_ids, text, reason, usage, logprobs,
                                                 sequence.take_prompt_logprobs()))
        self._record(sequence, reason)

    def _fail(self, sequence: _Sequence, error: BaseException) -> None:
        self._release(sequence)
        sequence.handle._deliver(Failure(error))

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
        call_callback(self.on_request_finished, metrics)


def _padded_prompts(batch: list[_Sequence]) -> tuple[Tensor, Tensor]:
    """The prompts right-padded with 0 ``(B, T)``, and their lengths ``(B,)`` (on the CPU)."""
    lengths = torch.tensor([s.prompt_len for s in batch])
    ids = torch.zeros(len(batch), int(lengths.max()), dtype=torch.long)
    for row, sequence in enumerate(batch):
        ids[row, : sequence.prompt_len] = torch.tensor(sequence.handle.prompt_ids)
    return ids, lengths


def _next_inputs(batch: list[_Sequence]) -> Tensor:
    """Each running sequence's last output token, the input of its next decode step ``(B, 1)``."""
    return torch.tensor([[s.output_ids[-1]] for s in batch], dtype=torch.long)


def _pass_fields(batch: list[_Sequence], decode_contexts: list[int], decode_start: float,
                 tokens: tuple[int, int], experts: tuple[list[int], list[int]], **timings: Any) -> dict[str, Any]:
    """A step's ``StepRecord`` fields about its forwards: ``batch`` the decode rows, ``tokens``
    (sampled, finished), ``experts`` (prefill, decode) distinct per layer, ``timings`` the rest."""
    return dict(
        batch_size=len(batch),
        decode_context_tokens=sum(decode_contexts) + len(batch),
        decode_seconds=time.monotonic() - decode_start,
        new_tokens=tokens[0],
        finished=tokens[1],
        prefill_experts=experts[0],
        decode_experts=experts[1],
        decode_contexts=decode_contexts,
        **timings,
    )


def check_prompt(prompt_ids: list[int], max_len: int, vocab_size: int) -> None:
    """Raise what ``add_request`` raises for a prompt it cannot take (shared with ``engine_process``)."""
    if not prompt_ids:
        raise ValueError("the prompt is empty")
    if len(prompt_ids) >= max_len:
        raise PromptTooLong(
            f"the prompt has {len(prompt_ids)} tokens; the context holds {max_len} tokens "
            "(prompt + completion), so it leaves no room for a completion"
        )
    if min(prompt_ids) < 0 or max(prompt_ids) >= vocab_size:
        raise ValueError(f"prompt token ids must be in [0, {vocab_size})")


def call_callback(callback: Callable[[Any], None] | None, value: Any) -> None:
    """Run a metrics callback; its errors are logged, never allowed to stop the engine."""
    if callback is None:
        return
    try:
        callback(value)
    except Exception:
        log.exception("engine metrics callback failed")
