"""``bff_dedup``'s pass 1 on Ray and the merge of its output into BFF's global processing order.

Why a module of its own: BFF's result depends on the order documents are seen in, and that
order must not depend on blocks or workers.  Pass 1 hashes every block in parallel (rows sorted
within the block); the driver then needs them in one global order, ``order_by`` then ``id``,
without holding all hashes at once.  Ray Data's sort would start shuffle workers (seconds of
fixed cost), so this does a small range sort with plain Ray tasks instead.
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raypress.operators.dedup.bff.ngrams import NgramBatch, hash_documents
from raypress.schema import ID_COL, alive_mask

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

_ORDER_COL = "_bff_order"


def hash_block(table: pa.Table, ngram_size: int, min_ngram_size: int, order_by: str) -> pa.Table:
    """Pass 1: live documents with at least one n-gram -> id, order key and their n-gram hashes."""
    if table.num_rows == 0:  # an empty block may lack columns altogether
        order_type = table.schema.field(order_by).type if order_by in table.column_names else pa.string()
        table = pa.table({ID_COL: pa.array([], pa.string()), "texts": pa.array([], pa.list_(pa.string())),
                          order_by: pa.array([], order_type)})
    alive = alive_mask(table)
    if alive is not None:
        table = table.filter(alive)
    if order_by not in table.column_names:
        raise ValueError(f"bff_dedup: order_by column {order_by!r} not in the input ({table.column_names})")
    ids = table.column(ID_COL).to_pylist()
    batch = hash_documents(table.column("texts").to_pylist(), ids, ngram_size, min_ngram_size)
    pars_per_doc = np.bincount(batch.doc_of_par, minlength=len(ids))
    has = np.flatnonzero(pars_per_doc)
    par_off = np.concatenate([[0], np.cumsum(pars_per_doc[has])]).astype(np.int64)
    key_off = np.concatenate([[0], np.cumsum(batch.par_ngrams)]).astype(np.int64)
    doc_key_off = key_off[par_off]
    take = pa.array(has, pa.int64())

    def lists(values: np.ndarray, offsets: np.ndarray, typ: pa.DataType) -> pa.Array:
        return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), pa.array(values, typ))

    order = table.column(order_by).take(take)
    if order.null_count:
        raise ValueError(f"bff_dedup: order_by column {order_by!r} has nulls: no input order for those rows")
    out = pa.table(
        {
            _ORDER_COL: order,
            ID_COL: table.column(ID_COL).take(take),
            "_bff_par_pos": lists(batch.par_pos, par_off, pa.int32()),
            "_bff_par_idx": lists(batch.par_idx, par_off, pa.int32()),
            "_bff_par_ngrams": lists(batch.par_ngrams, par_off, pa.int64()),
            "_bff_keys": lists(batch.keys, doc_key_off, pa.uint64()),
            "_bff_n": pa.array(np.diff(doc_key_off), pa.int64()),
        }
    )
    return _sorted(out)


def _sorted(table: pa.Table) -> pa.Table:
    """Rows in processing order: order key, then id."""
    return table.sort_by([(_ORDER_COL, "ascending"), (ID_COL, "ascending")])


def _order_keys(table: pa.Table) -> list[tuple]:
    return list(zip(table.column(_ORDER_COL).to_pylist(), table.column(ID_COL).to_pylist()))


def _run_stats(run: pa.Table, samples: int) -> tuple[int, list[tuple]]:
    """(n-grams in this sorted run, up to ``samples`` evenly spaced order keys)."""
    n = run.num_rows
    if n == 0:
        return 0, []
    picks = np.unique(np.linspace(0, n - 1, min(n, samples)).astype(np.int64))
    return int(pc.sum(run.column("_bff_n")).as_py() or 0), _order_keys(run.take(pa.array(picks)))


def _split_run(run: pa.Table, bounds: list[tuple]) -> list[pa.Table]:
    """A sorted run cut into ``len(bounds) + 1`` key ranges (range r: bounds[r-1] <= key < bounds[r])."""
    keys = _order_keys(run)
    cuts = [0] + [bisect.bisect_left(keys, b) for b in bounds] + [run.num_rows]
    return [run.slice(a, b - a) for a, b in zip(cuts[:-1], cuts[1:])]


def ordered_ranges(hashed: "ray.data.Dataset", range_bytes: int):
    """Pass-1 runs merged into the global processing order, one key range at a time.

    A small range sort with plain Ray tasks: sample each sorted run, cut every run at common
    boundaries, then the driver fetches and sorts one range at a time (so it holds about
    ``range_bytes`` of hashes, not all of them).  Returns (total n-grams, iterator of ranges)."""
    import ray

    runs = hashed.to_arrow_refs()
    ranges = max(1, -(-hashed.size_bytes() // range_bytes))
    stats = ray.get([ray.remote(_run_stats).options(num_cpus=0).remote(r, 16 * ranges) for r in runs])
    total = sum(n for n, _ in stats)
    samples = sorted(k for _, keys in stats for k in keys)
    bounds = sorted({samples[len(samples) * i // ranges] for i in range(1, ranges)}) if samples else []
    if bounds:
        split = ray.remote(_split_run).options(num_returns=len(bounds) + 1, num_cpus=0)
        pieces = [split.remote(r, bounds) for r in runs]
    else:
        pieces = [[r] for r in runs]

    def merged():
        for i in range(len(bounds) + 1):
            tables = [t for t in ray.get([p[i] for p in pieces]) if t.num_rows]
            if tables:
                yield _sorted(pa.concat_tables(tables))

    return total, merged()


def batch_from_table(table: pa.Table) -> NgramBatch:
    """The driver's view of a sorted slice of pass-1 rows."""
    ngrams_col = table.column("_bff_par_ngrams").combine_chunks()
    flat = lambda name: pc.list_flatten(table.column(name).combine_chunks()).to_numpy(zero_copy_only=False)  # noqa: E731
    return NgramBatch(
        doc_ids=table.column(ID_COL).to_pylist(),
        doc_of_par=pc.list_parent_indices(ngrams_col).to_numpy().astype(np.int64),
        par_pos=flat("_bff_par_pos").astype(np.int32),
        par_idx=flat("_bff_par_idx").astype(np.int32),
        par_ngrams=flat("_bff_par_ngrams").astype(np.int64),
        keys=flat("_bff_keys").astype(np.uint64),
    )
