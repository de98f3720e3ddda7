"""Stateful CPU ops as Ray tasks: the op (its model, its image table) is built once per worker
process and kept there for the next task.

Why not an actor pool: Ray Data never fuses actor pools with the ops around them, so every pool is
a hop through the object store, and each pool holds its CPUs while idle; on a small machine (2 CPUs,
three pools in MINT-1T's main segment) the pools held every CPU and the reader waited, and without
the cut into blocks the chain ran one operator at a time on one core.  As tasks, the op fuses with
its neighbours, one task per block runs the whole chain, and Ray's worker processes, which live as
long as the driver, keep the loaded op.  Bounded twice, so a long-lived worker (a service running
pipeline after pipeline) does not hoard memory: at most ``MAX_OPS_PER_WORKER`` ops, least recently
used out first, and an op unused for ``IDLE_SECONDS`` is dropped by a background sweep.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pyarrow as pa

from raypress.dag.batch_exec import StreamingOpRunner

MAX_OPS_PER_WORKER = 16
IDLE_SECONDS = 120.0
SWEEP_SECONDS = 15.0

# token -> (runner, last use), least recently used first
_ops: dict[str, tuple[StreamingOpRunner, float]] = {}
_lock = threading.Lock()
_sweeper: threading.Thread | None = None


class PerWorkerOpRunner:
    """Callable for `map_batches` as tasks, wrapping a `StreamingOpRunner` built once per process."""

    def __init__(self, **runner_kwargs: Any):
        self.runner_kwargs = runner_kwargs
        self.token = uuid.uuid4().hex  # pickled with the callable: the same in every task of this node

    def __call__(self, table: pa.Table) -> pa.Table:
        with _lock:
            entry = _ops.pop(self.token, None)
            if entry is not None:
                _ops[self.token] = (entry[0], time.monotonic())  # most recently used goes last
        if entry is None:
            runner = StreamingOpRunner(**self.runner_kwargs)  # outside the lock: it may load a model
            with _lock:
                _ops[self.token] = (runner, time.monotonic())
                while len(_ops) > MAX_OPS_PER_WORKER:
                    _ops.pop(next(iter(_ops)))  # the least recently used: dicts keep insertion order
            _start_sweeper()
        else:
            runner = entry[0]
        out = runner(table)
        with _lock:  # a long batch is use too: the sweep must not count it as idle time
            if self.token in _ops:
                _ops[self.token] = (runner, time.monotonic())
        return out


def cached_tokens() -> list[str]:
    """The tokens of the ops this process keeps, least recently used first (for tests)."""
    with _lock:
        return list(_ops)


def drop_idle(now: float | None = None, idle_seconds: float | None = None) -> int:
    """Drop the ops unused for ``idle_seconds``; return how many went."""
    now = time.monotonic() if now is None else now
    limit = IDLE_SECONDS if idle_seconds is None else idle_seconds
    with _lock:
        stale = [token for token, (_, used) in _ops.items() if now - used > limit]
        for token in stale:
            del _ops[token]
    return len(stale)


def _start_sweeper() -> None:
    global _sweeper
    with _lock:
        if _sweeper is not None and _sweeper.is_alive():
            return
        _sweeper = threading.Thread(target=_sweep_forever, name="raypress-op-sweeper", daemon=True)
        _sweeper.start()


def _sweep_forever() -> None:
    while True:
        time.sleep(SWEEP_SECONDS)
        drop_idle()
