"""Hugging Face ``datasets`` out, local files only.

Writing stores Parquet parts, then builds a real dataset from them with ``save_to_disk`` so that
``datasets.load_from_disk`` opens the result.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field

from raypress.operators.base import RunContext, Writer, WriterParams
from raypress.operators.io.hf.offline import offline_datasets
from raypress.operators.io.parts.atomic import part_path, write_parquet_part
from raypress.operators.registry import register
from raypress.schema import ID_COL


class WriteHfDatasetParams(WriterParams):
    path: str = Field(description="output directory ('{run_dir}' expands to the run directory)")


@register("write_hf_dataset", requires={"datasets": "hf", "huggingface_hub": "hf"})
class WriteHfDataset(Writer[WriteHfDatasetParams]):
    """Write a Hugging Face dataset directory (save_to_disk) that datasets.load_from_disk opens."""

    PARTS = "_parts"

    def write_batch(self, table: pa.Table, dest: str, part: str) -> None:
        write_parquet_part(table, part_path(str(Path(dest) / self.PARTS), part, ".parquet"), "zstd")

    def finalize(self, dest: str, ctx: RunContext) -> None:
        """Build the dataset from the parts (through a cache beside them), save it, remove both."""
        datasets = offline_datasets()
        parts_dir = Path(dest) / self.PARTS
        parts = sorted(str(p) for p in parts_dir.glob("part-*.parquet"))
        if parts:  # parts may disagree (a column all-null in one, typed in another): unify them
            schema = pa.unify_schemas([pq.read_schema(p) for p in parts], promote_options="permissive")
        else:  # nothing reached this writer: still an openable dataset, with the column every row has
            schema = pa.schema([(ID_COL, pa.string())])
        features = datasets.Features.from_arrow_schema(schema)
        filled = [p for p in parts if pq.ParquetFile(p).metadata.num_rows > 0]  # HF cannot read empty ones
        if filled:
            hf = datasets.Dataset.from_parquet(filled, features=features, cache_dir=str(parts_dir / "_cache"))
        else:
            hf = datasets.Dataset.from_dict({name: [] for name in schema.names}, features=features)
        # an empty dataset would be saved as zero shards, which load_from_disk cannot open
        hf.save_to_disk(dest, num_shards=1 if len(hf) == 0 else None)
        del hf  # it memory-maps the cache we are about to delete
        shutil.rmtree(parts_dir, ignore_errors=True)
