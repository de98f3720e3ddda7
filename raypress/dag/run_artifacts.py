"""What the run's finished nodes produced, and what each node gets from them as its inputs.

Why a module: both the runner (stages) and a segment (its head's inputs, the side inputs of its
streaming ops) ask the same questions of the same artifacts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from raypress.artifacts import Artifact, DatasetArtifact
from raypress.dag.blocks import joined, plan_joins
from raypress.dag.validate import VNode

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa


class RunArtifacts(dict):
    """node id -> the Artifact it produced (a Dataset, a Model, a Report)."""

    def __init__(self) -> None:
        super().__init__()
        self._deferred: dict[str, Callable[[], Artifact]] = {}

    def defer(self, node_id: str, load: Callable[[], Artifact]) -> None:
        """``load()`` gives the node's artifact when a step first reads it: a resumed node's output on
        disk becomes a Ray dataset only if a step that still has work reads it."""
        self._deferred[node_id] = load

    def __missing__(self, node_id: str) -> Artifact:
        if node_id not in self._deferred:
            raise KeyError(node_id)
        self[node_id] = self._deferred.pop(node_id)()
        return self[node_id]

    def inputs(self, node: VNode, side_only: bool = False) -> dict[str, Any]:
        """Artifacts for each input slot (a list of Datasets becomes their union; a list slot of
        Models/Reports stays a list, in the YAML's order); ``side_only``: all but ``data``."""
        out: dict[str, Any] = {}
        for slot, producers in node.slots.items():
            if side_only and slot == "data":
                continue
            arts = [self[p] for p in producers]
            if slot in node.op_cls.list_inputs:
                out[slot] = arts
            elif len(arts) == 1:
                out[slot] = arts[0]
            else:
                ds = arts[0].ds.union(*[a.ds for a in arts[1:]])
                out[slot] = DatasetArtifact(ds, rows=sum(a.rows or 0 for a in arts))
        return out

    def side(self, node: VNode) -> dict[str, Artifact]:
        return self.inputs(node, side_only=True)

    def rows_in(self, node: VNode) -> int:
        """Rows of every Dataset the node reads (as counted when they were produced)."""
        return sum(a.rows or 0 for a in self.inputs(node).values() if isinstance(a, DatasetArtifact))


def read_materialized(out_dir: Path, rows: int, in_memory_mb: float, block_rows: int) -> DatasetArtifact:
    """A materialized node output (``part-*.parquet`` under ``out_dir``) as a Dataset artifact."""
    import pyarrow as pa
    import ray.data

    files = sorted(out_dir.glob("part-*.parquet")) if out_dir.exists() else []
    if not files:
        return DatasetArtifact(ray.data.from_arrow(pa.table({"id": pa.array([], pa.string())})),
                               path=str(out_dir), rows=rows)
    metas = [_footer(f) for f in files]
    if sum(m.size for m in metas) <= in_memory_mb * 2**20:
        # A small output goes into the object store once, read there by Ray tasks (never through
        # the driver, whose memory would hold a copy for the rest of the run): each consumer then
        # starts from its blocks instead of running its own read job, and no read job runs at all
        # (`read_parquet(...).materialize()` took 2-3 s for a few kB here, most of it Ray Data's
        # start-up; a node may have many consumers).  Files written one per block of a cut segment
        # are small: joined again as they are read (blocks.py).
        groups = plan_joins([m.rows for m in metas], [m.size for m in metas], [m.schema for m in metas],
                            block_rows)
        refs = [_load_parts.remote([str(files[i]) for i in group]) for group in groups]
        ds = ray.data.from_arrow_refs(refs)
    else:  # a large one stays lazy, read per consumer, so memory never holds it all; a task and a
        # block per file (each a block of the segment that wrote it, a span at most): Ray's
        # read_parquet merges files into blocks of up to 128 MB whatever override_num_blocks says,
        # so a worker's memory would grow with the input up to that size
        paths = ray.data.from_items([{"path": str(f)} for f in files], override_num_blocks=len(files))
        ds = paths.map_batches(_read_parts, batch_size=1, batch_format="pyarrow")
    return DatasetArtifact(ds, path=str(out_dir), rows=rows)


@dataclass(frozen=True)
class _Footer:
    rows: int
    size: int  # bytes in memory, not on disk (text compresses 5-10x)
    schema: Any


def _footer(path: Path) -> _Footer:
    import pyarrow.parquet as pq

    from raypress.dag.sink import NBYTES_KEY

    meta = pq.read_metadata(path)
    recorded = (meta.metadata or {}).get(NBYTES_KEY)
    # a part written before the size was recorded: its decoded pages' size, a lower bound
    size = int(recorded) if recorded else sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    return _Footer(meta.num_rows, size, meta.schema.to_arrow_schema())


def _load_parts_fn(paths: list[str]) -> "pa.Table":
    """Files of one planned group, read and joined into one block (their schemas unify)."""
    import pyarrow.parquet as pq

    return joined([pq.read_table(p) for p in paths])


def _remote_loader() -> Any:
    import ray

    return ray.remote(_load_parts_fn)


class _LazyRemote:
    """``ray.remote`` applied on first use: importing this module must not import Ray."""

    def __init__(self) -> None:
        self._fn: Any = None

    def remote(self, *args: Any) -> Any:
        if self._fn is None:
            self._fn = _remote_loader()
        return self._fn.remote(*args)


_load_parts = _LazyRemote()


def _read_parts(batch: "pa.Table") -> "Iterator[pa.Table]":
    """The materialized part files a batch of ``{path}`` rows names, one table each."""
    import pyarrow.parquet as pq

    for path in batch.column("path").to_pylist():
        yield pq.read_table(path)
