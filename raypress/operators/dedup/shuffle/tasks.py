"""Keyed hash shuffles of Arrow tables with plain Ray tasks, for iterative algorithms.

Why not Ray Data's ``repartition(keys=...)``: the near-dedup runs a shuffle per step of an
iterative algorithm (connected components), and each Ray Data hash shuffle starts its own
aggregator actors (seconds each here), while a round of tasks costs milliseconds.  Each step is
``n`` stateless tasks: task ``p`` concatenates the pieces routed to it, runs a pure function on
them (the Ray-free functions that the unit tests call directly) and returns its output already
split into the pieces of the next step (``num_returns``), plus one small integer.  Tables move
between tasks as object references; the driver holds references and those integers only.  (Ray
itself returns a piece under 100 KB inline to the task's caller, as it does for any small result;
larger ones stay in the object store, spilling to disk.)  Stateless tasks also mean a lost worker
is recovered by lineage: nothing lives in an actor.

Routing uses :func:`stable_hash`, the same in every process (Python's ``hash`` of a str is salted
per process, so it cannot route).
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa

from raypress.operators.dedup.hashing import GOLDEN, fmix64
from raypress.operators.dedup.shuffle.files import is_file_piece, read_piece, to_file

if TYPE_CHECKING:  # pragma: no cover
    from ray import ObjectRef

StepFn = Callable[..., tuple[list[pa.Table], int]]

_BASE = np.uint64(0x100000001B3)



@functools.lru_cache(maxsize=8)
def _powers(n: int) -> np.ndarray:
    p = np.full(n, _BASE, dtype=np.uint64)
    p[0] = 1
    with np.errstate(over="ignore"):
        np.multiply.accumulate(p, out=p)
    return p


def stable_hash(values: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """uint64 per value, identical in every process: integers are mixed directly; anything else
    is hashed over its bytes (strings as UTF-8) with a vectorised polynomial hash."""
    arr = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    if arr.null_count:
        raise ValueError("cannot route a null key")
    with np.errstate(over="ignore"):
        if pa.types.is_integer(arr.type):
            h = arr.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.uint64)
            return fmix64(h + GOLDEN)
        if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)):
            arr = arr.cast(pa.large_string())
        arr = arr.cast(pa.large_binary())
        n = len(arr)
        if n == 0:
            return np.zeros(0, dtype=np.uint64)
        bufs = arr.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset: arr.offset + n + 1]
        lo, hi = int(offs[0]), int(offs[-1])
        data = np.frombuffer(bufs[2], dtype=np.uint8)[lo:hi] if bufs[2] is not None else np.zeros(0, np.uint8)
        starts = offs[:-1] - lo
        lengths = np.diff(offs)
        h = lengths.astype(np.uint64) * GOLDEN
        if hi > lo:
            pos = np.arange(hi - lo, dtype=np.int64) - np.repeat(starts, lengths)
            contrib = (data.astype(np.uint64) + np.uint64(1)) * _powers(1 << int(lengths.max()).bit_length())[pos]
            nonempty = np.flatnonzero(lengths > 0)
            h[nonempty] += np.add.reduceat(contrib, starts[nonempty])
        return fmix64(h)


def split_by(table: pa.Table, part: np.ndarray, n: int) -> list[pa.Table]:
    """``n`` tables: row i of ``table`` goes to table ``part[i]`` (order kept within a table)."""
    if n == 1:
        return [table]
    part = np.asarray(part, dtype=np.int64)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(n + 1))
    grouped = table.take(pa.array(order))
    return [grouped.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])) for i in range(n)]


def route_by_hash(table: pa.Table, column: str, n: int) -> list[pa.Table]:
    return split_by(table, stable_hash(table.column(column)) % np.uint64(n), n)


def route_by_value(table: pa.Table, column: str, n: int) -> list[pa.Table]:
    """Route by a non-negative integer column (already a hash, or a block number) modulo ``n``."""
    values = table.column(column).to_numpy(zero_copy_only=False).astype(np.uint64)
    return split_by(table, values % np.uint64(n), n)


def concat(tables: Sequence[pa.Table]) -> pa.Table:
    """One table of ``tables`` (file pieces read back: see ``shuffle.files``)."""
    tables = [read_piece(t) if is_file_piece(t) else t for t in tables if t is not None]
    nonempty = [t for t in tables if t.num_rows] or tables[:1]
    if len(nonempty) == 1:
        return nonempty[0]
    return pa.concat_tables(nonempty, promote_options="permissive")


def kept_in(parts: list[pa.Table], folder: str | None) -> list[pa.Table]:
    """A step's output pieces as they travel on: each written to a file in ``folder`` when given
    (see ``shuffle.files``), else the tables themselves (the object store)."""
    return parts if folder is None else [to_file(p, folder) for p in parts]


def release_freed_memory() -> None:
    """Give the C heap's free pages back to the system (glibc ``malloc_trim``).

    Why: a step's numpy and Arrow temporaries are freed when it returns, but glibc keeps the pages
    (its mmap threshold grows with the large arrays freed, so later ones come from the heap), and the
    worker process is reused by the next pass: at 4 GB of MinHash input, the mark pass's workers
    carried ~0.1 GB that the shuffle steps before them had freed.  No-op where there is no glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.lru_cache(maxsize=1)
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, loaded once per process; None without glibc."""
    try:
        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


def _step_task(fn: StepFn, n_out: int, kwargs: dict[str, Any], folder: str | None, *tables: pa.Table):
    try:
        parts, stat = fn(list(tables), **kwargs)
        if len(parts) != n_out:
            raise RuntimeError(f"{fn.__name__} returned {len(parts)} parts, expected {n_out}")
        return (*kept_in(parts, folder), stat)
    finally:
        release_freed_memory()


@functools.lru_cache(maxsize=1)
def _remote_step():
    import ray

    return ray.remote(_step_task)


def route_step(tables: list[pa.Table], key: str, n: int) -> tuple[list[pa.Table], int]:
    """The first step of a shuffle: rows routed by an integer ``key`` column; counts the rows."""
    table = concat(tables)
    return route_by_value(table, key, n), table.num_rows


def in_flight(cpus: float) -> int:
    """Unfinished tasks a streamed step may have: enough to keep every CPU busy, twice over."""
    return 2 * max(1, int(cpus)) + 2


def run_step(
    fn: StepFn,
    inputs: Iterable[Sequence["ObjectRef | pa.Table"]],
    n_out: int,
    per_task: Sequence[dict[str, Any]] | None = None,
    num_gpus: float = 0,
    folder: str | None = None,
    **kwargs: Any,
) -> tuple[list[list["ObjectRef"]], list["ObjectRef"]]:
    """One task per entry of ``inputs`` (each a list of table refs), calling ``fn(tables, **kwargs)``
    (plus ``per_task[t]`` for task t); each task asks Ray for ``num_gpus``, and with a ``folder``
    writes its output pieces to files there (``kept_in``).  An iterator's entries
    start their tasks as they come, at most ``in_flight`` unfinished at once: the iterator (a
    streamed pass, see ``sources``) is not drawn further until one finishes, so its outputs wait in
    the object store only that long.

    Returns ``(pieces, stats)``: ``pieces[q]`` lists the refs routed to output partition ``q`` by
    every task (the next step's input ``q``), ``stats[t]`` task t's integer."""
    import ray

    step = _remote_step().options(num_returns=n_out + 1, num_gpus=num_gpus)
    extra = per_task or itertools.repeat({})
    limit = None if isinstance(inputs, Sequence) else in_flight(ray.cluster_resources().get("CPU", 1))
    outs: list = []
    pending: list = []
    for refs, more in zip(inputs, extra):
        out = step.remote(fn, n_out, {**kwargs, **more}, folder, *refs)
        outs.append(out)
        if limit is not None:
            pending.append(out[n_out])
            if len(pending) > limit:
                _, pending = ray.wait(pending, num_returns=len(pending) - limit)
    pieces = [[out[q] for out in outs] for q in range(n_out)]
    return pieces, [out[n_out] for out in outs]


def local_step(
    fn: StepFn,
    inputs: Iterable[Sequence[pa.Table]],
    n_out: int,
    per_task: Sequence[dict[str, Any]] | None = None,
    num_gpus: float = 0,
    folder: str | None = None,
    **kwargs: Any,
) -> tuple[list[list[pa.Table]], list[int]]:
    """:func:`run_step` in this process, on tables: the same steps, same wiring, no Ray (tests)."""
    extra = per_task or itertools.repeat({})
    outs = [fn(list(tables), **{**kwargs, **more}) for tables, more in zip(inputs, extra)]
    pieces = [kept_in(out[0], folder) for out in outs]
    return [[p[q] for p in pieces] for q in range(n_out)], [out[1] for out in outs]


def total(stats: Sequence["ObjectRef"]) -> int:
    import ray

    return int(sum(ray.get(list(stats))))
