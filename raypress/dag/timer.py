"""A tiny actor that sums per-op processing time reported by workers (fire-and-forget calls) and
per-op counters (waited for: the run reads them as soon as the segment ends)."""

from __future__ import annotations

import ray


@ray.remote(num_cpus=0)
class OpTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.rows: dict[str, int] = {}
        self.counters: dict[str, dict[str, int]] = {}

    def add(self, node: str, seconds: float, rows: int) -> None:
        self.seconds[node] = self.seconds.get(node, 0.0) + seconds
        self.rows[node] = self.rows.get(node, 0) + rows

    def snapshot(self) -> dict[str, float]:
        return dict(self.seconds)

    def count(self, node: str, counts: dict[str, int]) -> None:
        """Add an op's per-batch counters (``Operator.batch_counts``) to its node's totals."""
        totals = self.counters.setdefault(node, {})
        for key, value in counts.items():
            totals[key] = totals.get(key, 0) + int(value)

    def counts(self) -> dict[str, dict[str, int]]:
        return {node: dict(c) for node, c in self.counters.items()}
