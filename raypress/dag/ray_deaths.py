"""Which of the run's own Ray processes died under it, said first in a failed run's error.

Why: when an embedded raylet or GCS dies (the OOM killer, a `kill`), the run usually sees only the
consequence, an actor or a task lost, and its ledger said that alone.  The run process itself
knows its Ray processes (it started them), so it checks before it writes its ledger; a watcher
outside could not tell such a death from the run's own orderly shutdown after its ledger."""

from __future__ import annotations

import time

from raypress.dag.ray_compat import dead_ray_processes

WATCHED = {"raylet": "Raylet is terminated", "gcs_server": "GCS died"}
# A SIGKILLed raylet closes its sockets (and the driver sees the loss) before the kernel has ended
# it, so a loss that looks like Ray's own waits this long for the death to show.
SETTLE_S = 1.0


def death_line(name: str, pid: int) -> str:
    return f"{WATCHED[name]}: Ray's {name} process (pid {pid}) ended while the run was still running"


def ray_process_deaths(exc: BaseException | None) -> list[str]:
    """One line per watched Ray process of this run that has died; waits up to ``SETTLE_S`` for one
    when ``exc`` (or its cause) is a Ray system error, else looks once."""
    deadline = time.monotonic() + (SETTLE_S if _ray_system_error(exc) else 0.0)
    while True:
        dead = [death_line(kind, pid) for kind, pid in dead_ray_processes() if kind in WATCHED]
        if dead or time.monotonic() >= deadline:
            return dead
        time.sleep(0.05)


def _ray_system_error(exc: BaseException | None) -> bool:
    """Any error in the chain that Ray raises for a lost process, object or node (not a task's own)."""
    try:
        from ray import exceptions
    except ImportError:
        return False
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, (exceptions.RaySystemError, exceptions.ActorDiedError, exceptions.WorkerCrashedError,
                            exceptions.ObjectLostError, exceptions.LocalRayletDiedError, exceptions.NodeDiedError,
                            exceptions.ActorUnavailableError)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
