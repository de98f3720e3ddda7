"""A tiny actor that sums per-op processing time reported by workers (fire-and-forget calls)."""

from __future__ import annotations

import ray


@ray.remote(num_cpus=0)
class OpTimer:
    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.rows: dict[str, int] = {}

    def add(self, node: str, seconds: float, rows: int) -> None:
        self.seconds[node] = self.seconds.get(node, 0.0) + seconds
        self.rows[node] = self.rows.get(node, 0) + rows

    def snapshot(self) -> dict[str, float]:
        return dict(self.seconds)
