"""How one streaming node becomes Ray Data work: the callable, its ``map_batches`` arguments, and
where it runs (an actor pool, tasks keeping the op per worker process, or plain tasks).

Why a module of its own: this is the one place that decides how an op meets Ray's executor (block
cuts, batch caps, ``np``, resources), so a reader of the runner or of an op never needs it, and a
change of policy is made here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from raypress.dag.blocks import DEFAULT_ROWS_PER_BLOCK, capped_batch_size
from raypress.dag.validate import VNode
from raypress.operators.shared.files import np_task_pool


@dataclass(frozen=True)
class ExecutionPolicy:
    """The run-wide settings that shape execution (``settings`` of the pipeline)."""

    np: int | None = None  # Data-Juicer's `np`: tasks (or actors) at once per op
    rows_per_block: int | str = "auto"
    stateful_ops: str = "tasks"  # "actors": stateful CPU ops in actor pools

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any]) -> "ExecutionPolicy":
        return cls(np=settings.get("np"), rows_per_block=settings.get("rows_per_block", "auto"),
                   stateful_ops=settings.get("stateful_ops", "tasks"))

    @property
    def block_rows(self) -> int:
        """Rows per block when a segment is cut (``auto``: 256)."""
        return DEFAULT_ROWS_PER_BLOCK if self.rows_per_block == "auto" else int(self.rows_per_block)

    def in_actor_pool(self, node: VNode) -> bool:
        """A stateful op runs in an actor pool when it needs a GPU (the pool places and keeps it
        there) or ``settings.stateful_ops`` says ``actors``; otherwise as tasks that keep the loaded
        op per worker process (``PerWorkerOpRunner`` says why)."""
        return node.op_cls.stateful and bool(node.resources.num_gpus or self.stateful_ops == "actors")

    def cuts(self, streaming: list[VNode]) -> bool:
        """Whether a reader's rows are cut into blocks before ``streaming`` (``blocks.py`` says why).

        ``rows_per_block: auto`` cuts only where an op loads a model (per-row work in milliseconds:
        a block is worth a task); cheap text ops keep Ray Data's own blocks, which 256-row tasks made
        1.6x slower (``bench/engine_overhead.py``) and split into hundreds of part files.  A number
        cuts every reader-headed segment.  Never with an actor pool in the segment (not fused)."""
        if not streaming or any(self.in_actor_pool(n) for n in streaming):
            return False
        return self.rows_per_block != "auto" or any(n.op_cls.stateful for n in streaming)


class Sliced:
    """A streaming op's callable given whole blocks (``batch_size=None``), run on slices of at most
    ``rows`` rows and yielding each result: the op keeps its batch size, but Ray Data is given no
    batch size to bundle inputs to.

    Why: Ray fuses a reader's ``map_batches`` with the ops after it and bundles the reader's inputs
    (one per file or byte range) up to the largest fused batch size, so a 4-file text recipe ran as
    one task on one core; with no batch size the fused chain runs one task per reader input.  The
    same holds after a global op: its mark pass reads the materialized input one file per row, and
    a mapper after it (``drop_stats``, batch size 1024) bundled all of them into one task (MinHash's
    mark pass and export over 4 GB ran on one core)."""

    def __init__(self, fn: Any, rows: int | None):
        self.fn, self.rows = fn, rows

    def __call__(self, table: "Any") -> "Any":
        if not self.rows or table.num_rows <= self.rows:
            yield self.fn(table)
            return
        for start in range(0, table.num_rows, self.rows):
            yield self.fn(table.slice(start, self.rows))


def apply_streaming(ds: "Any", node: VNode, policy: ExecutionPolicy, artifacts: dict[str, Any], timer: Any,
                    cut: bool = False, per_input: bool = False) -> "Any":
    """``ds`` with ``node``'s op applied lazily (``map_batches`` on Arrow batches), on whole blocks
    sliced to its batch size (``Sliced``) unless the rows were ``cut`` into blocks for it.
    ``per_input``: the segment starts at a reader, whose ``np`` tasks the op's join (they fuse)."""
    import ray
    import ray.data

    from raypress.dag.batch_exec import StreamingOpRunner
    from raypress.dag.worker_ops import PerWorkerOpRunner

    res = node.resources
    batch_size = node.batch_size
    np = node.runtime.num_proc or policy.np  # a node's Data-Juicer num_proc is its own `np`
    if cut:
        batch_size = capped_batch_size(batch_size, policy.block_rows)
    kwargs: dict[str, Any] = dict(batch_format="pyarrow", batch_size=batch_size, num_cpus=res.num_cpus)
    if res.num_gpus:
        kwargs["num_gpus"] = res.num_gpus
    if res.memory:
        kwargs["memory"] = res.memory
    runner_kwargs = dict(op_cls=node.op_cls, params=node.params, artifacts=artifacts, node_id=node.id,
                         stats_only=node.stats_only, timer=timer, range_rule=node.runtime.range_rule)
    if policy.in_actor_pool(node):
        max_actors = np or max(1, int(ray.cluster_resources().get("CPU", 1) // max(res.num_cpus, 1)))
        return ds.map_batches(StreamingOpRunner, fn_constructor_kwargs=runner_kwargs,
                              compute=ray.data.ActorPoolStrategy(min_size=1, max_size=max_actors), **kwargs)
    if np and per_input:  # the reader runs `np` tasks too (files.map_items): they fuse. After a
        # global op the cap would only split its mark pass from these ops: two operators, and the
        # blocks between them buffered in the object store (4 GB of MinHash export: 2 GB per worker)
        kwargs["compute"] = np_task_pool(np)
    # as tasks; a stateful op keeps its loaded op in each worker process
    fn = PerWorkerOpRunner(**runner_kwargs) if node.op_cls.stateful else StreamingOpRunner(**runner_kwargs)
    if not cut:  # whole blocks (no batch size for Ray to bundle inputs to), sliced in the task
        return ds.map_batches(Sliced(fn, batch_size), **{**kwargs, "batch_size": None})
    return ds.map_batches(fn, **kwargs)
