"""Per-op processing time, summed by the run's OpTimer actor.

Used by the streaming op wrappers (batch_exec), the readers (operators/shared/files.py) and the sink; kept
at the ground (no raypress imports) so that readers and the engine both use it without a cycle.
"""

from __future__ import annotations

import threading
from typing import Any


# -- per-op timing -------------------------------------------------------------------------------
# Each batch's time goes to the run's OpTimer actor.  One actor call per op per batch (~1 ms of
# the worker's time, plus the actor's) made a 6-op, 200k-row run ~20% slower on 2 cores
# (bench/engine_overhead.py).  When the op runs in the same Ray Data task as the segment's sink
# (Ray fused the chain), the times are summed here and the sink reports them once per block,
# still before the task ends; otherwise (an actor pool, an unfused task) each batch is reported
# at once.
_pending: dict[tuple[Any, str], list] = {}  # (timer, node) -> [seconds, rows]
_pending_lock = threading.Lock()


# The name Ray Data gives a task that runs the segment sink (dag/sink.py's SegmentSink, which checks
# that its class name matches): a name, not an import, so this module stays at the ground.
SINK_CLASS_NAME = "SegmentSink"
_SINK_MARKER = f"MapBatches({SINK_CLASS_NAME})"


def _sink_runs_in_this_task() -> bool:
    try:
        from ray.data._internal.execution.interfaces.task_context import TaskContext
    except ImportError:  # pragma: no cover - Ray moved it: report every batch
        return False
    ctx = TaskContext.get_current()
    return ctx is not None and _SINK_MARKER in (getattr(ctx, "op_name", None) or "")


def report_time(timer: Any, node_id: str, seconds: float, rows: int) -> None:
    """Add one batch's time to `node_id` in the run's OpTimer (now, or via the fused sink)."""
    if not _sink_runs_in_this_task():
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
