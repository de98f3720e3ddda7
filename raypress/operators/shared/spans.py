"""Files cut into spans (byte ranges of line-based files, row groups of Parquet files), so every
CPU reads, whatever the file count.

Why: a reader's work went out one task per file, so one large JSON Lines file (or four files on a
16-core node) left cores idle for the whole segment: Ray fuses the ops after a reader into the
reader's task.  A file of at least ``MIN_SPAN_BYTES`` is cut into spans of about ``total bytes /
(CPUs x SPANS_PER_CPU)``, and never more than ``MAX_SPAN_BYTES`` (a span is one block in a
worker's memory, its copies too: a cap keeps a worker's memory the same for 250 MB and for 4 GB
of input); each span reads the lines that *start* inside it (Hadoop's rule), so
every line is read once whatever the cut.  Row ids keep ``{path}:{line}``: line numbers are
counted first, in parallel (a newline count per span, ~GB/s), and each span is told its first
line.  Compressed files cannot be cut and stay one span.
"""

from __future__ import annotations

import os
from typing import Any, Iterator

SPANS_PER_CPU = 2  # a little slack so uneven spans (or CPUs) still finish together
MIN_SPAN_BYTES = 4 << 20  # below this a task's start-up is not worth it
MAX_SPAN_BYTES = 32 << 20  # above this a block costs more memory than a task start-up saves
COUNT_CHUNK = 8 << 20


def span_target(total: int, cpus: int, min_span: int) -> int:
    """Bytes per span: the input shared out over ``cpus x SPANS_PER_CPU``, within the two bounds."""
    return max(min_span, min(MAX_SPAN_BYTES, -(-total // max(1, cpus * SPANS_PER_CPU))))


def plan_spans(files: list[tuple[str, str]], cpus: int, compressed: set[str] | None = None,
               min_span: int | None = None) -> list[dict[str, Any]]:
    """Items ``{path, abs_path, start, end}`` (``end`` None: to the end of the file) for ``files`` given
    as (id path, absolute path), in file order: large uncompressed files cut into spans."""
    min_span = MIN_SPAN_BYTES if min_span is None else min_span
    sizes = {a: os.path.getsize(a) for _, a in files}
    target = span_target(sum(sizes.values()), cpus, min_span)
    items: list[dict[str, Any]] = []
    for path, abs_path in files:
        size = sizes[abs_path]
        n = 1 if (compressed and abs_path in compressed) or size < 2 * min_span else max(1, round(size / target))
        cuts = [size * k // n for k in range(n)] + [size]
        for k in range(n):
            items.append({"path": path, "abs_path": abs_path, "start": cuts[k], "end": cuts[k + 1] if n > 1 else None})
    return items


def count_newlines(abs_path: str, start: int, end: int) -> int:
    """b'\\n' bytes in ``[start, end)`` of the file."""
    count = 0
    with open(abs_path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            chunk = f.read(min(COUNT_CHUNK, left))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count


def number_spans(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each cut span with ``newlines_before`` (b'\\n' bytes before its start), counted in parallel Ray
    tasks; spans of uncut files get 0."""
    import ray

    cut = [i for i, it in enumerate(items) if it["end"] is not None and it["start"] > 0]
    if not cut:
        return [{**it, "newlines_before": 0} for it in items]
    counter = ray.remote(num_cpus=1)(count_newlines)
    # the newlines of each span's own range: a file's prefix sums give each span's count before it
    own = ray.get([counter.remote(it["abs_path"], it["start"], it["end"]) for it in items
                   if it["end"] is not None])
    out, running, last_file, k = [], 0, None, 0
    for it in items:
        if it["end"] is None:
            out.append({**it, "newlines_before": 0})
            continue
        if it["abs_path"] != last_file:
            running, last_file = 0, it["abs_path"]
        out.append({**it, "newlines_before": running})
        running += own[k]
        k += 1
    return out


def span_lines(f, start: int, end: int | None, newlines_before: int) -> Iterator[tuple[int, bytes]]:
    """(1-based line number, raw line) of every line starting in ``[start, end)`` of the binary file
    ``f`` (positioned anywhere); ``end`` None reads to the end."""
    line_no = newlines_before
    if start > 0:
        f.seek(start - 1)
        if f.read(1) != b"\n":  # mid-line: that line belongs to the span before
            skipped = f.readline()
            if skipped.endswith(b"\n"):
                line_no += 1
            start += len(skipped)
    pos = start
    while end is None or pos < end:
        raw = f.readline()
        if not raw:
            return
        line_no += 1
        yield line_no, raw
        pos += len(raw)


def parquet_spans(files: list[tuple[str, str]], cpus: int, min_span: int | None = None) -> list[dict[str, Any]]:
    """Items ``{path, abs_path, row_groups, first_row}`` for Parquet files: a large file's row groups
    shared out over spans of about ``span_target`` bytes (``row_groups`` None: the
    whole file).  ``first_row`` keeps ``{path}:{row}`` ids what they are when the file is read whole."""
    import pyarrow.parquet as pq

    min_span = MIN_SPAN_BYTES if min_span is None else min_span
    sizes = {a: os.path.getsize(a) for _, a in files}
    target = span_target(sum(sizes.values()), cpus, min_span)
    items: list[dict[str, Any]] = []
    for path, abs_path in files:
        whole = {"path": path, "abs_path": abs_path, "row_groups": None, "first_row": 0}
        if sizes[abs_path] < 2 * min_span:
            items.append(whole)
            continue
        meta = pq.ParquetFile(abs_path).metadata
        groups = meta.num_row_groups
        n = min(groups, max(1, round(sizes[abs_path] / target)))
        if n < 2:
            items.append(whole)
            continue
        rows = [meta.row_group(g).num_rows for g in range(groups)]
        first = 0
        for k in range(n):
            chosen = list(range(groups * k // n, groups * (k + 1) // n))
            items.append({"path": path, "abs_path": abs_path, "row_groups": chosen, "first_row": first})
            first += sum(rows[g] for g in chosen)
    return items
