"""A tiny actor that sums per-op processing time reported by workers (fire-and-forget calls) and
per-op counters (waited for: the run reads them as soon as the segment ends).

One actor serves every run of a driver process (``operators.shared.driver_actors``: starting one
per run was ~0.6 s of a small run), each run's figures under its own key; :class:`RunTimer` is a
run's handle on it, called as the actor was (``timer.add.remote(node, seconds, rows)``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray


@ray.remote(num_cpus=0)
class OpTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, dict[str, float]] = {}
        self.rows: dict[str, dict[str, int]] = {}
        self.counters: dict[str, dict[str, dict[str, int]]] = {}

    def add(self, run: str, node: str, seconds: float, rows: int) -> None:
        per_run, per_run_rows = self.seconds.setdefault(run, {}), self.rows.setdefault(run, {})
        per_run[node] = per_run.get(node, 0.0) + seconds
        per_run_rows[node] = per_run_rows.get(node, 0) + rows

    def snapshot(self, run: str) -> dict[str, float]:
        return dict(self.seconds.get(run, {}))

    def count(self, run: str, node: str, counts: dict[str, int]) -> None:
        """Add an op's per-batch counters (``Operator.batch_counts``) to its node's totals."""
        totals = self.counters.setdefault(run, {}).setdefault(node, {})
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + int(value)

    def counts(self, run: str) -> dict[str, dict[str, int]]:
        return {node: dict(c) for node, c in self.counters.get(run, {}).items()}

    def end(self, run: str) -> None:
        """Forget a finished run's figures (a service's driver runs many)."""
        for table in (self.seconds, self.rows, self.counters):
            table.pop(run, None)


@dataclass(frozen=True)
class _RunMethod:
    method: Any
    run: str

    def remote(self, *args: Any) -> Any:
        return self.method.remote(self.run, *args)


@dataclass(frozen=True)
class RunTimer:
    """One run's view of the shared :class:`OpTimer` (hashable and picklable: workers hold it)."""

    actor: Any
    run: str

    def __getattr__(self, name: str) -> _RunMethod:
        if name in ("add", "snapshot", "count", "counts", "end"):
            return _RunMethod(getattr(self.actor, name), self.run)
        raise AttributeError(name)
