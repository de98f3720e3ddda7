"""Writers whose `path` names a file (`out/result.jsonl`, Data-Juicer's `export_path`) rather than
a folder: parts are written beside it in `<path>.parts/` and joined into the one file at the end."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq

from raypress.operators.io._atomic import atomic_path

PARTS_SUFFIX = ".parts"


def is_file_path(path: str, suffix: str) -> bool:
    return str(path).lower().endswith(suffix)


def parts_dir(path: str) -> str:
    return str(path) + PARTS_SUFFIX


def join_jsonl(parts: str, final: str) -> None:
    """Concatenate JSON Lines parts (byte copy, streaming) into `final`, then drop the parts."""
    files = sorted(Path(parts).glob("part-*.jsonl"))
    with atomic_path(Path(final)) as tmp, open(tmp, "wb") as out:
        for f in files:
            with open(f, "rb") as src:
                shutil.copyfileobj(src, out)
    shutil.rmtree(parts, ignore_errors=True)


def join_parquet(parts: str, final: str, compression: str) -> None:
    """Stream every part's row groups into one parquet file (memory: one row group at a time)."""
    files = sorted(Path(parts).glob("part-*.parquet"))
    schemas = [pq.read_schema(f) for f in files]
    if not files:
        shutil.rmtree(parts, ignore_errors=True)
        return
    import pyarrow as pa

    schema = pa.unify_schemas(schemas, promote_options="permissive")
    with atomic_path(Path(final)) as tmp:
        with pq.ParquetWriter(tmp, schema, compression=compression) as writer:
            for f in files:
                pf = pq.ParquetFile(f)
                for i in range(pf.num_row_groups):
                    writer.write_table(pf.read_row_group(i).cast(schema) if pf.schema_arrow != schema
                                       else pf.read_row_group(i))
    shutil.rmtree(parts, ignore_errors=True)
