"""Where a global op's streamed passes read its input: a Ray Dataset, or tables in this process.

A near-dedup op reads its input twice, never holding it: a key pass (each batch -> slim rows:
band keys and ids) whose output blocks feed the task shuffle (``tasks.run_step``) as they are
produced, and a mark pass (each batch -> the same rows, duplicates tombstoned).  The input itself
(materialized by the runner, as a global op's input is) is re-read by each pass, so the object
store never holds it whole.  ``LocalBlocks`` runs the same callables on tables in this process,
for the unit tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import pyarrow as pa

if TYPE_CHECKING:  # pragma: no cover
    import ray.data
    from ray import ObjectRef


class DatasetBlocks:
    """A Ray Dataset: passes are ``map_batches`` over it, streamed and backpressured by Ray Data."""

    def __init__(self, ds: "ray.data.Dataset"):
        self.ds = ds

    def map_blocks(self, fn: Callable[..., pa.Table], *, num_gpus: float = 0, **kwargs: Any) -> Iterator["ObjectRef"]:
        """Refs of ``fn(batch, **kwargs)``'s outputs (each task asking for ``num_gpus``), yielded as
        Ray Data produces them (a consumer that starts a task on each keeps only the slim outputs
        alive, never the input)."""
        gpus = {"num_gpus": num_gpus} if num_gpus else {}
        out = self.ds.map_batches(fn, batch_size=None, batch_format="pyarrow", fn_kwargs=kwargs, **gpus)
        for bundle in out.iter_internal_ref_bundles():
            yield from bundle.block_refs

    def mark(self, marker: Callable[[pa.Table], pa.Table]) -> "ray.data.Dataset":
        """The input with ``marker`` applied to every block: lazy, streamed by the segment's sink.
        Whole blocks (no batch size): the input is read one file per row, and a batch size would
        have Ray bundle that many files into one task."""
        return self.ds.map_batches(marker, batch_size=None, batch_format="pyarrow")


class LocalBlocks:
    """Tables in this process (tests): the same callables, no Ray."""

    def __init__(self, tables: Sequence[pa.Table]):
        self.tables = list(tables)

    def map_blocks(self, fn: Callable[..., pa.Table], *, num_gpus: float = 0, **kwargs: Any) -> Iterator[pa.Table]:
        for table in self.tables:
            yield fn(table, **kwargs)

    def mark(self, marker: Callable[[pa.Table], pa.Table]) -> list[pa.Table]:
        return [marker(table) for table in self.tables]
