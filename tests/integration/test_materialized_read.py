"""A materialized node output read back for its consumers: small ones once into the object store by
Ray tasks (never through the driver), joined into blocks in file order; large ones -- measured in
memory, not on disk, since text compresses several times -- left lazy, one block per part file."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import ray
from ray.data.dataset import MaterializedDataset

from raypress.dag.run_artifacts import read_materialized
from raypress.dag.sink import write_parquet_atomic

pytestmark = pytest.mark.integration


def write_parts(folder: Path, sizes: list[int], text: str = "x") -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    ids: list[str] = []
    for k, n in enumerate(sizes):
        part_ids = [f"p{k}-{i}" for i in range(n)]
        write_parquet_atomic(pa.table({"id": part_ids, "text": [text] * n}), folder / f"part-{k:05d}.parquet")
        ids += part_ids
    return ids


def test_small_parts_are_joined_into_blocks_in_file_order(ray_session, tmp_path):
    ids = write_parts(tmp_path / "out", [3, 2, 4, 1, 1])
    art = read_materialized(tmp_path / "out", rows=len(ids), in_memory_mb=64, block_rows=5)
    assert isinstance(art.ds, MaterializedDataset)  # in the object store already
    assert [t.num_rows for t in ray.get(art.ds.to_arrow_refs())] == [5, 5, 1]
    assert [r["id"] for r in art.ds.take_all()] == ids


def test_an_output_small_on_disk_but_large_in_memory_stays_lazy(ray_session, tmp_path):
    text = "the same sentence again. " * 4000  # 100 kB a row, a few hundred bytes compressed
    ids = write_parts(tmp_path / "out", [12, 12], text)
    on_disk = sum(p.stat().st_size for p in (tmp_path / "out").glob("*.parquet"))
    assert on_disk < 2**20 / 4
    art = read_materialized(tmp_path / "out", rows=len(ids), in_memory_mb=1, block_rows=5)
    assert not isinstance(art.ds, MaterializedDataset)  # 2.4 MB in memory: read by each consumer
    assert [r["id"] for r in art.ds.take_all()] == ids
