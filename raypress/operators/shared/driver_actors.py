"""Small service actors a driver process starts once and keeps for every run it drives.

Why: each actor is a worker process of its own, and starting one costs ~0.7 s of a core here
(Python, Ray's imports).  A run started a reader tally per reader and CPU probes, and waited for
them: ~1.6 s of a 2-second run of a small pipeline, paid again by every run of a process that runs
many (the pipelines service, a notebook, the test suite).  Cached per Ray node and job, so a new
Ray session (``ray.shutdown`` then ``ray.init``) gets fresh ones; an actor found dead is made
again by the caller through :func:`forget`.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

_cache: dict[tuple[str, str, str], Any] = {}
_lock = threading.Lock()


def _session_key() -> tuple[str, str]:
    """This driver's node and job: node ids are random per node start, so a restarted Ray never
    matches an old entry (job ids start at 1 again in every new cluster)."""
    import ray

    context = ray.get_runtime_context()
    return context.get_node_id(), context.get_job_id()


def driver_actor(name: str, make: Callable[[], Any]) -> Any:
    """The actor this driver keeps under ``name``, made by ``make()`` the first time."""
    key = (*_session_key(), name)
    with _lock:
        if key not in _cache:
            _cache[key] = make()
        return _cache[key]


def kept(name: str) -> bool:
    """Whether this driver already keeps an actor under ``name`` (one made by an earlier run, which
    may have died since: worth a check that a fresh one is not)."""
    key = (*_session_key(), name)
    with _lock:
        return key in _cache


def forget(name: str) -> None:
    """Drop ``name``'s actor (found dead): the next :func:`driver_actor` call makes a new one."""
    key = (*_session_key(), name)
    with _lock:
        _cache.pop(key, None)
