"""Turn glob patterns into a lazy Ray Dataset whose workers open and parse the files.

Readers list the files on the driver (names only, no data) and let Ray workers open them, so
many files are read in parallel and nothing passes through the driver.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import lzma
import os
import re
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, Callable, Iterator

import pyarrow as pa
from pydantic import AfterValidator, BeforeValidator


if TYPE_CHECKING:  # pragma: no cover
    import ray.data

    from raypress.operators.base import RunContext

# Files are grouped into a few tasks per CPU: enough to balance uneven files, few enough that
# task start-up does not dominate when there are many small files.
TASKS_PER_CPU = 4
MAX_FILE_BLOCKS = 1024

# A list of glob patterns; a single pattern written as a plain string is accepted too.
_ONE_OR_MANY = BeforeValidator(lambda v: [v] if isinstance(v, str) else v)
Globs = Annotated[list[str], _ONE_OR_MANY]


def glob_fields(params_cls: type) -> list[str]:
    """The parameters of ``params_cls`` typed :data:`Globs`: the input patterns a run checks first."""
    return [name for name, field in params_cls.model_fields.items() if _ONE_OR_MANY in field.metadata]


def _existing_file(value: str) -> str:
    if not Path(value).expanduser().is_file():
        raise ValueError(f"{value!r} is not a file")
    return value


# A param naming a local file (a model, a tokenizer) that must exist when the pipeline is validated.
LocalFile = Annotated[str, AfterValidator(_existing_file)]


def expand_globs(patterns: list[str]) -> list[str]:
    """Sorted, de-duplicated matches of every pattern; a pattern matching no file is an error.

    Paths keep the form of their pattern (relative patterns give relative paths), because that
    form goes into row ids and must not depend on where the workers run."""
    found: list[str] = []
    seen: set[str] = set()
    for pattern in patterns:
        matches = sorted(p for p in glob.glob(os.path.expanduser(pattern), recursive=True) if os.path.isfile(p))
        if not matches:
            raise FileNotFoundError(f"no file matches {pattern!r} (relative to {os.getcwd()})")
        for path in matches:
            if path not in seen:
                seen.add(path)
                found.append(path)
    return found


def map_items(
    items: list[dict[str, Any]], read_one: Callable[[dict[str, Any]], Iterator[pa.Table]],
    ctx: "RunContext | None" = None,
) -> "ray.data.Dataset":
    """Lazily run ``read_one(item)`` on Ray workers, one item (a file) at a time; it yields tables.

    ``items`` are small descriptors (paths, offsets), the only thing the driver handles.  With a
    ``ctx`` whose run has a timer, the time spent inside ``read_one`` is reported for the reader's
    node: only that time, not the downstream ops Ray fuses into the same task (they run while the
    generator is suspended)."""
    import ray
    import ray.data

    timer, node = (ctx.timer, ctx.node_id) if ctx is not None and ctx.timer is not None else (None, "")

    def read_files(batch: pa.Table) -> Iterator[pa.Table]:  # the name Ray's progress bars show
        for item in batch.to_pylist():
            if timer is None:
                yield from read_one(item)
                continue
            tables = iter(read_one(item))
            while True:
                start = time.perf_counter()
                table = next(tables, None)
                timer.report(node, time.perf_counter() - start, 0 if table is None else table.num_rows)
                if table is None:
                    break
                yield table

    cpus = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else 1
    # whole files are grouped, TASKS_PER_CPU blocks per CPU; a cut file's spans (at most
    # MAX_SPAN_BYTES each) get a block each, so a task's output stays one span's size for any input
    spans = sum(1 for it in items if it.get("end") is not None or it.get("row_groups") is not None)
    blocks = max(1, min(len(items), max(TASKS_PER_CPU * max(cpus, 1), spans), MAX_FILE_BLOCKS))
    ds = ray.data.from_items(items, override_num_blocks=blocks)
    extra: dict[str, Any] = {}
    np_ = ctx.settings.get("np") if ctx is not None else None
    if np_:  # the ops after a reader run `np` tasks at once (Data-Juicer's np): the same here, so they fuse
        extra["compute"] = np_task_pool(int(np_))
    return ds.map_batches(read_files, batch_size=1, batch_format="pyarrow", **extra)


def np_tasks_submitted(np_: int, cpus: int) -> int:
    """Tasks a reader's segment keeps submitted under Data-Juicer's ``np`` on ``cpus`` CPUs.

    Where ``np`` takes every CPU, one more than can run: it waits at the raylet and starts on the
    worker a finished task frees, instead of after Ray Data's scheduling loop has seen the task end
    and submitted the next (~0.05 s a task here: 0.5 s tasks kept 90% of the CPUs busy, 97% with
    the queued one).  Ray's CPU resource keeps ``np`` of them running.  Below every CPU, ``np``
    itself is what bounds the running tasks, so it stays the cap."""
    return max(np_, cpus + 1) if np_ >= cpus else np_


def np_task_pool(np_: int) -> "ray.data.TaskPoolStrategy":
    """The compute strategy of a reader's segment under ``np`` (``np_tasks_submitted``): the reader,
    the streaming ops and the sink all take it, so that Ray fuses them into one task."""
    import ray
    import ray.data

    cpus = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else 1
    return ray.data.TaskPoolStrategy(size=np_tasks_submitted(np_, cpus))


def id_path(path: str, base_dir: str | None) -> str:
    """The form of ``path`` that goes into row ids: relative to the run's base directory when the
    file lies below it (a resolved pipeline holds absolute paths, but ids stay what a relative path
    in the user's file gave, wherever the run executes), otherwise as it is."""
    if not base_dir or not os.path.isabs(path):
        return path
    rel = os.path.relpath(path, base_dir)
    return path if rel == ".." or rel.startswith("../") else rel


def line_spans(paths: list[str], ctx: "RunContext | None" = None) -> list[dict[str, Any]]:
    """Items for ``map_items`` over line-based files: ``{path, abs_path, start, end, newlines_before}``,
    large uncompressed files cut into spans (``spans.py`` says why and how)."""
    import ray

    from raypress.operators.shared.spans import number_spans, plan_spans

    base = ctx.base_dir if ctx is not None and ctx.base_dir else None
    files = [(id_path(p, base), os.path.abspath(p)) for p in paths]
    cpus = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else 1
    compressed = {a for _, a in files if compression_of(a) is not None}
    return number_spans(plan_spans(files, cpus, compressed))


def parquet_items(paths: list[str], ctx: "RunContext | None" = None) -> list[dict[str, Any]]:
    """Items for ``map_items`` over Parquet files: large files' row groups shared out (``spans.py``)."""
    import ray

    from raypress.operators.shared.spans import parquet_spans

    base = ctx.base_dir if ctx is not None and ctx.base_dir else None
    cpus = int(ray.cluster_resources().get("CPU", 1)) if ray.is_initialized() else 1
    return parquet_spans([(id_path(p, base), os.path.abspath(p)) for p in paths], cpus)


def map_files(paths: list[str], read_one: Callable[[str, str], Iterator[pa.Table]],
              ctx: "RunContext | None" = None) -> "ray.data.Dataset":
    """``map_items`` over files: ``read_one(path, abs_path)`` gets the path for ids (``id_path``)
    and the absolute path (what a worker opens, whatever its working directory)."""
    base = ctx.base_dir if ctx is not None and ctx.base_dir else None
    items = [{"path": id_path(p, base), "abs_path": os.path.abspath(p)} for p in paths]
    return map_items(items, lambda item: read_one(item["path"], item["abs_path"]), ctx)


# magic numbers of the compressions read; bzip2's "BZh" + level + block (or end-of-stream) magic,
# so that a text file starting "BZh" is not taken for one
_COMPRESSION_MAGIC = re.compile(rb"(\x1f\x8b)|(BZh[1-9](?:1AY&SY|\x17rE8P\x90))|(\xfd7zXZ\x00)")


def compression_of(abs_path: str) -> str | None:
    """``"gz"``/``"bz2"``/``"xz"`` from the file's first bytes, None for anything else: the name
    can lie (a browser that un-gzipped a download keeps the ``.gz``), the content cannot."""
    try:
        with open(abs_path, "rb") as f:
            head = f.read(10)
    except OSError:
        return None  # opening it again raises the error where the caller handles it
    m = _COMPRESSION_MAGIC.match(head)
    return None if m is None else ("gz", "bz2", "xz")[m.lastindex - 1]


def open_maybe_compressed(abs_path: str) -> IO[bytes]:
    """Open for binary reading, decompressing gzip/bzip2/xz recognised by content, not by suffix."""
    kind = compression_of(abs_path)
    if kind == "gz":
        return gzip.open(abs_path, "rb")
    if kind == "bz2":
        return bz2.open(abs_path, "rb")
    if kind == "xz":
        return lzma.open(abs_path, "rb")
    return open(abs_path, "rb")
