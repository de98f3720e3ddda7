"""Writers whose `path` names a file (`out/result.jsonl`, Data-Juicer's `export_path`) rather than
a folder: parts are written to the staging folder and joined there into the one file, which the
runner then commits to `path` (see `raypress.dag.destination`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq

from raypress.operators.io.parts.atomic import atomic_path


def is_file_path(path: str, suffix: str) -> bool:
    """``.json`` counts as JSON Lines: Data-Juicer's `export_path: out.json` writes JSON Lines too."""
    return str(path).lower().endswith((suffix, ".json") if suffix == ".jsonl" else suffix)


def joined_path(parts: str, target: str) -> Path:
    """Where the joined file goes inside the staging folder ``parts``: the target's own name."""
    return Path(parts) / Path(target).name


def _remove_parts(files: list[Path]) -> None:
    for f in files:
        f.unlink(missing_ok=True)


def join_jsonl(parts: str, final: str | Path) -> None:
    """Concatenate JSON Lines parts (byte copy, streaming) into `final`, then drop the parts."""
    files = sorted(Path(parts).glob("part-*.jsonl"))
    with atomic_path(Path(final)) as tmp, open(tmp, "wb") as out:
        for f in files:
            with open(f, "rb") as src:
                shutil.copyfileobj(src, out)
    _remove_parts(files)


def join_parquet(parts: str, final: str | Path, compression: str) -> None:
    """Stream every part's row groups into one parquet file (memory: one row group at a time)."""
    files = sorted(Path(parts).glob("part-*.parquet"))
    schemas = [pq.read_schema(f) for f in files]
    if not files:
        import pyarrow as pa

        from raypress.schema import ID_COL

        pq.write_table(pa.table({ID_COL: pa.array([], pa.string())}), final)  # an empty, readable file
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
    _remove_parts(files)
