"""Write one output part so that readers never see half a file: temp name, then rename.

Every io writer stages its parts through here (``write_jsonl``, ``write_parquet``,
``write_hf_dataset``, ``write_webdataset``, and the joins of ``parts.single_file``), so the rule lives
in one place rather than in one writer that the others would have to import."""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pyarrow.parquet as pq


def part_path(dest: str, part: str, suffix: str) -> Path:
    """``dest/part-{part}{suffix}``; ``part`` must be a plain name, not a path."""
    if not part or "/" in part or os.sep in part or part in (".", ".."):
        raise ValueError(f"part must be a plain file name fragment, got {part!r}")
    return Path(dest) / f"part-{part}{suffix}"


@contextmanager
def atomic_path(final: Path) -> Iterator[Path]:
    """Yield a hidden temp path beside ``final``; rename it into place only if the block succeeds."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_parquet_part(table: pa.Table, final: Path, compression: str) -> None:
    """Atomically write one part; empty tables are written too, so the schema survives."""
    with atomic_path(final) as tmp:
        pq.write_table(table, tmp, compression=compression)
