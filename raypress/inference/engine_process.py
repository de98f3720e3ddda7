"""The engine in a process of its own, behind the interface the HTTP app uses of ``Engine``.

Why: in one process the engine's step thread and the server's event loop (HTTP, Ray Serve's
request path, server-sent events) share one GIL. Under load each slows the other: on 2 cores,
32 streams through Serve took the engine's steps from 12 to 16 ms and kept requests ~150 ms
longer on their way to the engine than in process (``bench/serve_path.py``). vLLM (its EngineCore
behind ZMQ) and SGLang (its scheduler process) keep the engine's loop out of the API server's
process for the same reason.

What crosses the process boundary: requests and cancels one way; the other way one message per
engine step, carrying every event of that step (token ids, text, logprobs, finish and usage),
its ``StepRecord``, the metrics of the requests it finished and the engine's counters. The
parent's handles are ordinary ``RequestHandle``s, so the routes, coalescing and cancellation work
unchanged; tokenizing and detokenizing for the routes stay in the parent (the tokenizer is loaded
in both). Checks a caller needs answered before a response starts (a prompt too long, ids outside
the vocabulary, a full queue, a stopped engine) are answered in the parent, synchronously.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from multiprocessing.connection import Connection
from typing import Any

import torch

from raypress.inference.engine import Engine, TokenizerText, call_callback
from raypress.inference.requests import (
    EngineStopped,
    Failure,
    GenerationEvent,
    QueueFull,
    RequestFailed,
    RequestHandle,
)
from raypress.inference.sampling import SamplingParams
from raypress.inference.stats import EngineStats, RequestMetrics, StepRecord

log = logging.getLogger(__name__)
FLUSH_S = 0.02  # the child sends events delivered outside a step (a cancel, a stop) within this


class EngineProcess(TokenizerText):
    """An ``Engine`` started in a child process (``spawn``); same constructor arguments as
    ``Engine.from_pretrained``. ``stop()`` ends the child; a child that dies fails every request
    it held with ``RequestFailed`` and ``is_running`` turns false (a health check's answer)."""

    def __init__(self, path: str | Path, *, dtype: torch.dtype | None = None, device: str = "cpu",
                 max_batch_size: int = 8, max_queue: int = 64, startup_timeout: float = 600.0,
                 **engine_kwargs: Any) -> None:
        from raypress.models.bpe_tokenizer import load_tokenizer

        self.tokenizer = load_tokenizer(path)
        self.max_batch_size = max_batch_size
        self.max_queue = max_queue
        self.stats = EngineStats(engine_kwargs.get("stats_history", 1024))
        self.on_step: Callable[[StepRecord], None] | None = None
        self.on_request_finished: Callable[[RequestMetrics], None] | None = None
        self._handles: dict[str, RequestHandle] = {}
        self._lock = threading.Lock()  # the handles
        self._send_lock = threading.Lock()  # the pipe's sending end (never held with ``_lock``: the reader needs that)
        self._ids = itertools.count()
        self._running = self._waiting = 0
        self._stopped = False
        # the child takes at most max_batch_size + max_queue requests: the parent refuses the rest
        options = dict(engine_kwargs, dtype=dtype, device=device, max_batch_size=max_batch_size,
                       max_queue=max_batch_size + max_queue)
        self._conn, self._process = _start_child(str(path), options)
        if not self._conn.poll(startup_timeout):
            self._process.kill()
            raise RuntimeError(f"the engine process did not start within {startup_timeout:.0f} s")
        kind, info = self._conn.recv()
        if kind != "ready":
            self._process.wait(10)
            raise RuntimeError(f"the engine process failed to start: {info}")
        self.model = _ModelSummary(info["config"])
        self.max_len: int = info["max_len"]
        self.device = torch.device(info["device"])
        self.dtype: torch.dtype = info["dtype"]
        self._free = max_batch_size
        self._reader = threading.Thread(target=self._read, name="raypress-engine-reader", daemon=True)
        self._reader.start()

    # ---- what the server asks ---------------------------------------------------------------

    @property
    def num_running(self) -> int:
        return self._running

    @property
    def num_waiting(self) -> int:
        return self._waiting

    @property
    def free_slots(self) -> int:
        return self._free

    @property
    def is_running(self) -> bool:
        return not self._stopped and self._process.poll() is None and self._reader.is_alive()

    def start(self) -> None:
        """The child's step loop runs from the start; here for ``Engine``'s interface."""

    def add_request(self, prompt: str | Sequence[int], params: SamplingParams | dict[str, Any] | None = None,
                    request_id: str | None = None) -> RequestHandle:
        """Queue a request in the child; raises as ``Engine.add_request`` does, before anything is sent."""
        prompt_ids, params = self.checked_request(prompt, params)
        handle = RequestHandle(self, request_id or f"req-{next(self._ids)}", prompt_ids, params)
        with self._lock:
            if not self.is_running:
                raise EngineStopped("the engine is stopping" if self._stopped else "the engine process has died")
            if len(self._handles) >= self.max_batch_size + self.max_queue:
                waiting = len(self._handles) - self.max_batch_size
                raise QueueFull(f"{waiting} requests are already waiting (max_queue={self.max_queue})")
            if handle.request_id in self._handles:
                raise ValueError(f"request id {handle.request_id!r} is already in use")
            self._handles[handle.request_id] = handle
        try:
            self._send(("add", handle.request_id, prompt_ids, params))
        except EngineStopped:
            with self._lock:
                self._handles.pop(handle.request_id, None)
            raise
        return handle

    def _cancel(self, handle: RequestHandle) -> None:
        with self._lock:
            known = handle.request_id in self._handles
        if known:
            self._send(("cancel", handle.request_id))

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop the child's engine (its requests fail with ``EngineStopped``) and end the child."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        if self._process.poll() is None:
            with contextlib.suppress(EngineStopped):  # gone meanwhile: nothing left to stop
                self._send(("stop",))
        self._reader.join(timeout)
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._conn.close()
        self._fail_all(EngineStopped("the engine stopped"))

    def _send(self, message: tuple[Any, ...]) -> None:
        try:
            with self._send_lock:
                self._conn.send(message)
        except (BrokenPipeError, OSError) as error:
            raise EngineStopped(f"the engine process is gone: {error}") from error

    # ---- what the child says ----------------------------------------------------------------

    def _read(self) -> None:
        while True:
            try:
                message = self._conn.recv()
            except (EOFError, OSError):
                break
            if message[0] == "stopped":
                break
            _, items, record, finished, counters = message
            self._running, self._waiting, self._free = counters
            for request_id, item in items:
                self._hand_over(request_id, item)
            if record is not None:
                self.stats.add_step(record)
                call_callback(self.on_step, record)
            for metrics in finished:
                self.stats.add_request(metrics)
                call_callback(self.on_request_finished, metrics)
        if not self._stopped:
            code = self._process.wait()
            log.error("the engine process ended (exit code %s)", code)
            self._fail_all(RequestFailed(f"the engine process ended (exit code {code})"))

    def _hand_over(self, request_id: str, item: GenerationEvent | Failure) -> None:
        last = isinstance(item, Failure) or item.finish_reason is not None
        with self._lock:
            handle = self._handles.pop(request_id, None) if last else self._handles.get(request_id)
        if handle is not None:
            handle._deliver(item)

    def _fail_all(self, error: BaseException) -> None:
        with self._lock:
            left, self._handles = list(self._handles.values()), {}
        for handle in left:
            handle._deliver(Failure(error))
        self._running = self._waiting = 0


class _ModelSummary:
    """``engine.model`` where the server only reads the config."""

    def __init__(self, config: Any) -> None:
        self.config = config


# ---- the child --------------------------------------------------------------------------------

def _start_child(path: str, options: dict[str, Any]) -> tuple[Connection, subprocess.Popen[bytes]]:
    """``python -m raypress.inference.engine_process FD`` over one end of a socket pair.

    Why not ``multiprocessing.Process``: its ``spawn`` re-runs the parent's ``__main__`` in the
    child, and inside a Ray worker that is Ray's own worker script."""
    parent_end, child_end = socket.socketpair()
    try:
        process = subprocess.Popen([sys.executable, "-m", "raypress.inference.engine_process",
                                    str(child_end.fileno())], pass_fds=[child_end.fileno()])
    finally:
        child_end.close()
    conn = Connection(parent_end.detach())
    conn.send((path, options))
    return conn, process


def _child(fd: int) -> None:
    conn = Connection(fd)
    path, options = conn.recv()
    _child_main(conn, path, options)

class _Outbox:
    """Events, finished requests' metrics and the step record, sent as one message per step."""

    def __init__(self, conn: Any, engine: Engine) -> None:
        self.conn, self.engine = conn, engine
        self.lock = threading.Lock()
        self.items: list[tuple[str, GenerationEvent | Failure]] = []
        self.finished: list[RequestMetrics] = []
        self.started: set[str] = set()  # requests whose first event has gone out

    def event(self, handle: RequestHandle, item: GenerationEvent | Failure) -> None:
        """A request's first event goes out at once (its prefill's token must not wait for the
        step's decode forward: time to first token); the rest with their step."""
        request_id = handle.request_id
        self.add(request_id, item)
        if isinstance(item, Failure) or item.finish_reason is not None:
            self.started.discard(request_id)
        elif request_id not in self.started:
            self.started.add(request_id)
            self.flush()

    def add(self, request_id: str, item: GenerationEvent | Failure) -> None:
        with self.lock:
            self.items.append((request_id, item))

    def request_finished(self, metrics: RequestMetrics) -> None:
        with self.lock:
            self.finished.append(metrics)

    def flush(self, record: StepRecord | None = None) -> None:
        with self.lock:
            if record is None and not self.items and not self.finished:
                return
            items, finished, self.items, self.finished = self.items, self.finished, [], []
            engine = self.engine
            self.conn.send(("step", items, record, finished,
                            (engine.num_running, engine.num_waiting, engine.free_slots)))


def _child_main(conn: Any, path: str, options: dict[str, Any]) -> None:
    """Load the engine, say ready, then take requests until told to stop or the parent is gone."""
    try:
        engine = Engine.from_pretrained(path, **options)
    except BaseException as error:  # noqa: BLE001 - said to the parent, which raises it
        conn.send(("error", f"{type(error).__name__}: {error}"))
        return
    # Everything loaded so far (torch, the model, the tokenizer: millions of objects) lives as long
    # as the process; frozen, the cyclic collector stops scanning it. Its full collections had
    # taken ~5% of the step thread's time at batch 32 (py-spy). vLLM's engine core does the same.
    gc.freeze()
    outbox = _Outbox(conn, engine)
    engine.on_step = outbox.flush
    engine.on_request_finished = outbox.request_finished
    engine.start()
    conn.send(("ready", {"config": engine.model.config, "max_len": engine.max_len,
                         "device": str(engine.device), "dtype": engine.dtype}))
    try:
        with contextlib.suppress(EOFError, OSError):  # the parent is gone: stop as if told to
            _serve_requests(conn, engine, outbox)
    finally:
        engine.stop(timeout=10)
        with contextlib.suppress(BrokenPipeError, OSError):  # the parent may be gone
            outbox.flush()
            conn.send(("stopped",))


def _serve_requests(conn: Any, engine: Engine, outbox: _Outbox) -> None:
    """Take the parent's messages until it says stop; send what the step thread left between steps."""
    handles: dict[str, RequestHandle] = {}
    while True:
        if conn.poll(FLUSH_S):
            message = conn.recv()
            if message[0] == "stop":
                return
            _obey(engine, outbox, handles, message)
        outbox.flush()
        if handles:
            for request_id in [r for r, h in handles.items() if h.finished]:
                del handles[request_id]


def _obey(engine: Engine, outbox: _Outbox, handles: dict[str, RequestHandle], message: tuple[Any, ...]) -> None:
    if message[0] == "add":
        _, request_id, prompt_ids, params = message
        try:
            handles[request_id] = engine.add_request(prompt_ids, params, request_id, listener=outbox.event)
        except Exception as error:  # the parent checked first: only a race (e.g. stopping) lands here
            outbox.add(request_id, Failure(error))
    elif message[0] == "cancel":
        handle = handles.get(message[1])
        if handle is not None:
            handle.cancel()


if __name__ == "__main__":
    _child(int(sys.argv[1]))
