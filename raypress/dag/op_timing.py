"""Per-op processing time, summed by the run's OpTimer actor.

Used by the streaming op wrappers (batch_exec), the sink, and the readers, which get a
:class:`TimeReporter` in their ``RunContext`` (operators never import the engine).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from raypress.dag.ray_compat import runs_fused_with_sink

# -- per-op timing -------------------------------------------------------------------------------
# Each batch's time goes to the run's OpTimer actor.  One actor call per op per batch (~1 ms of
# the worker's time, plus the actor's) made a 6-op, 200k-row run ~20% slower on 2 cores
# (bench/engine_overhead.py).  When the op runs in the same Ray Data task as the segment's sink
# (Ray fused the chain), the times are summed here and the sink reports them once per block,
# still before the task ends; otherwise (an actor pool, an unfused task) each batch is reported
# at once.
_pending: dict[tuple[Any, str], list] = {}  # (timer, node) -> [seconds, rows]
_pending_lock = threading.Lock()


def report_time(timer: Any, node_id: str, seconds: float, rows: int) -> None:
    """Add one batch's time to `node_id` in the run's OpTimer (now, or via the fused sink)."""
    if not runs_fused_with_sink():
        timer.add.remote(node_id, seconds, rows)
        return
    with _pending_lock:
        acc = _pending.setdefault((timer, node_id), [0.0, 0])
        acc[0] += seconds
        acc[1] += rows


def flush_times() -> None:
    """Send the summed times held in this process (the sink calls this after each block)."""
    with _pending_lock:
        items = list(_pending.items())
        _pending.clear()
    for (timer, node_id), (seconds, rows) in items:
        timer.add.remote(node_id, seconds, rows)


TIMER = "op_timer"


def new_timer() -> Any:
    """The run's handle on this driver's OpTimer actor (made on the first run, checked alive on
    the next ones: one killed under an earlier run is made again)."""
    import uuid

    import ray

    from raypress.dag.timer import OpTimer, RunTimer
    from raypress.operators.shared.driver_actors import driver_actor, forget, kept

    earlier = kept(TIMER)  # a fresh one is not waited for: its start-up overlaps the run's
    actor = driver_actor(TIMER, OpTimer.remote)
    if earlier:
        try:
            ray.get(actor.snapshot.remote(""), timeout=30)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            forget(TIMER)
            actor = driver_actor(TIMER, OpTimer.remote)
    return RunTimer(actor, uuid.uuid4().hex)


@dataclass(frozen=True)
class TimeReporter:
    """What a run hands its ops as ``ctx.timer``: ``report`` adds time to a node (a reader's time)."""

    actor: Any

    def report(self, node_id: str, seconds: float, rows: int) -> None:
        report_time(self.actor, node_id, seconds, rows)
