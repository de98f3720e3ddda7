"""MinHash-LSH near-dedup of a whole Dataset: the params and the driver both MinHash ops share.

The driver never sees rows, signatures or edges, only object references and one integer per
task, and the object store never holds the input (materialized on disk by the runner, as every
global op's input is) nor its text:

1. a key pass streamed over the input (``sources.DatasetBlocks.map_blocks``) turns each batch into
   band rows ``(band_key, id)``; each output block is routed by band key to ``n`` partitions as
   soon as Ray Data produces it;
2. each partition turns its buckets into star edges (or, with ``verify``, into verified edges,
   after a second streamed pass attaches the candidates' shingles: see ``minhash.lsh``);
3. ``graph.connected_components`` labels every node of a component with its smallest id;
4. a mark pass streamed over the input (``MarkNearDuplicates``) turns every labelled row into a
   DUPLICATE tombstone: each worker fetches the labels (one row per duplicate) and indexes them
   by id once.  The rows never leave their blocks: no shuffle of the texts.

Bytes in the object store per live document: ``num_bands`` band rows of (8-byte key, id); per
candidate (a document sharing a bucket), O(num_bands) edges of two ids, which the components
never grow; per duplicate, one label row.  A task holds one block or one partition.  The output
is the same for any block, partition or worker count: every stage is a function of whole buckets
or of the component structure, and ties go to the smallest id.  Rows are marked by id, so ids
must be unique among live rows (readers make them so); one id twice in a band bucket stops the
run with that id named.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterator, Literal, TypeVar

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt, field_validator, model_validator

from raypress.operators.base import Deduplicator, RunContext, json_detail
from raypress.operators.dedup.graph.connected_components import LABEL, NODE, connected_components
from raypress.operators.dedup.minhash.bands import optimal_param
from raypress.operators.dedup.minhash.lsh import (
    KEY,
    AttachShingles,
    LSHConfig,
    bad_texts,
    band_rows,
    live_rows,
    bucket_step,
    members_step,
    verify_step,
)
from raypress.operators.dedup.minhash.shingles import ShingleParams
from raypress.operators.dedup.shuffle.id_index import IdIndex, cached_index, new_token
from raypress.operators.dedup.shuffle.sources import DatasetBlocks, LocalBlocks
from raypress.operators.dedup.shuffle.tasks import route_step, run_step, total
from raypress.schema import (
    DETAIL_COL,
    ID_COL,
    KIND_COL,
    NODE_COL,
    REASON_COL,
    TombstoneKind,
    ensure_tombstone_columns,
)

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

DETAIL_KEY = "minhash_component"


class MinhashParams(ShingleParams):
    """Data-Juicer's ``document_minhash_deduplicator`` parameters, plus raypress's own three."""

    num_permutations: PositiveInt = Field(256, description="MinHash permutations (signature length)")
    jaccard_threshold: float = Field(0.7, ge=0, le=1, description="documents whose shingle sets have "
                                     "Jaccard similarity >= this are near duplicates")
    num_bands: PositiveInt | None = Field(None, description="LSH bands (default: chosen with "
                                          "num_rows_per_band to minimise false positives + negatives)")
    num_rows_per_band: PositiveInt | None = Field(None, description="signature values per LSH band")
    tokenizer_model: str | None = Field(None, description="Data-Juicer's sentencepiece model: not "
                                        "supported (sentencepiece tokenization is not)")
    verify: bool = Field(False, description="check candidate pairs by exact Jaccard of their shingles "
                         "before they count as duplicates (removes LSH false positives; costs a "
                         "second read of the candidates' texts)")
    seed: int = Field(42, description="seed of the MinHash permutations (Data-Juicer's: 42)")
    shingle_hash: Literal["polynomial", "sha1"] = Field(
        "polynomial", description="how a shingle becomes 32 bits: 'polynomial' (vectorised, ~9x faster) or "
        "'sha1' (Data-Juicer's sha1_hash32: with its seed, the same signatures, so the same candidate pairs)")

    @field_validator("tokenizer_model")
    @classmethod
    def _no_tokenizer_model(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError("tokenizer_model is only used by Data-Juicer's 'sentencepiece' tokenization, which "
                             "raypress does not support; remove it and use tokenization 'space', "
                             "'whitespace', 'punctuation' or 'character'")
        return value

    @model_validator(mode="after")
    def _bands_fit(self) -> "MinhashParams":
        b, r = self.num_bands, self.num_rows_per_band
        if (b is None) != (r is None):
            raise ValueError("set both num_bands and num_rows_per_band, or neither (Data-Juicer would silently "
                             "replace the one given by its own choice)")
        if b is not None and r is not None and b * r > self.num_permutations:
            raise ValueError(f"num_bands x num_rows_per_band = {b * r} exceeds num_permutations "
                             f"({self.num_permutations})")
        if b is None and not 0 < self.jaccard_threshold < 1:
            raise ValueError("jaccard_threshold must be strictly between 0 and 1 to choose num_bands and "
                             "num_rows_per_band (or set both)")
        return self

    def bands(self) -> tuple[int, int]:
        """(num_bands, rows_per_band): as given, else Data-Juicer's ``optimal_param``."""
        if self.num_bands is not None and self.num_rows_per_band is not None:
            return self.num_bands, self.num_rows_per_band
        return optimal_param(self.jaccard_threshold, self.num_permutations)


MP = TypeVar("MP", bound=MinhashParams)


class MinhashDeduplicator(Deduplicator[MP]):
    """Near-duplicate documents by MinHash-LSH: each connected component of the candidate graph
    keeps its smallest id; the others leave as duplicates naming it."""

    reads: ClassVar[tuple[str, ...]] = (ID_COL,)

    def partitions(self, ctx: RunContext) -> int:
        return self.params.num_partitions or ctx.shuffle_partitions()

    def chunk_rows(self) -> int:
        """Documents per signature computation (bounds the (docs x permutations) work arrays)."""
        return 4096

    def config(self, ctx: RunContext) -> LSHConfig:
        p = self.params
        b, r = p.bands()
        return LSHConfig(op=self.name, text_key=p.text_key, tokenization=p.tokenization,
                         window_size=p.window_size, lowercase=p.lowercase, ignore_pattern=p.ignore_pattern,
                         num_perm=p.num_permutations, num_bands=b, rows_per_band=r, seed=p.seed,
                         threshold=p.jaccard_threshold, chunk_rows=self.chunk_rows(), shingle_hash=p.shingle_hash)

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        p = self.params
        ctx = checked_input(self.name, ds, ctx, p.text_key)
        if ctx.input_rows == 0:  # nothing reached this node (e.g. all filtered upstream): nothing to do
            return ds
        cfg = self.config(ctx)
        with shuffle_folder(ctx, ctx.input_rows * cfg.num_bands) as folder:
            marked, stats = near_duplicates(DatasetBlocks(ds), cfg, self.partitions(ctx), p.verify, ctx.node_id,
                                            folder=folder)
        ctx.event("minhash_dedup", **stats, rows_in_files=folder is not None)
        return marked


# Above this many shuffled rows (about 48 bytes each), the key shuffle's pieces go to files.
ROWS_IN_OBJECT_STORE = 2_000_000


@contextlib.contextmanager
def shuffle_folder(ctx: RunContext, rows: int) -> Iterator[str | None]:
    """Where a near-dedup op's key shuffle keeps its pieces: None (the object store) for up to
    ``ROWS_IN_OBJECT_STORE`` rows, else a folder of the run (see ``shuffle.files``), removed
    afterwards, so peak memory does not grow with the input."""
    if rows <= ROWS_IN_OBJECT_STORE:
        yield None
        return
    folder = Path(ctx.run_dir) / "scratch" / f"{ctx.node_id}-{new_token()}"
    try:
        yield str(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def checked_input(op: str, ds: "ray.data.Dataset", ctx: RunContext, text_key: str) -> RunContext:
    """``ctx`` with its input rows counted, after checking the text column is there: the first
    step of every near-dedup op."""
    if ctx.input_rows is None:  # called outside a run: size the default shuffle by the input
        ctx = dataclasses.replace(ctx, input_rows=ds.count())
    if ctx.input_rows == 0:
        return ctx
    schema = ds.schema()
    columns = list(schema.names) if schema is not None else []
    if columns and text_key not in columns:
        raise ValueError(f"{op}: the input has no column {text_key!r} (columns: {', '.join(columns)}); "
                         "name the text column with `text_key`")
    return ctx


Source = DatasetBlocks | LocalBlocks


def near_duplicates(
    source: Source, cfg: LSHConfig, n: int, verify: bool, node: str,
    run: Callable = run_step, collect: Callable = total, folder: str | None = None,
) -> tuple[Any, dict[str, int]]:
    """The input (a Dataset's blocks; or tables with ``run=local_step, collect=sum``) with its near
    duplicates marked (a lazy Dataset; or the tables), in the same order, and what it took.  With a
    ``folder``, the band rows, the candidate edges of every round (and with ``verify`` the
    candidates' shingles) travel through files there; the caller removes it once this returns."""
    gpus = 1 if cfg.device != "cpu" else 0  # signatures by the Triton kernel, one GPU per task
    keys = source.map_blocks(band_rows, num_gpus=gpus, cfg=cfg)
    bands, docs = run(route_step, ([b] for b in keys), n, key=KEY, n=n, folder=folder)
    if verify:
        members, _ = run(members_step, bands, 1, op=cfg.op)
        attach = AttachShingles(members[0], cfg)
        shingled, _ = run(route_step, ([b] for b in source.map_blocks(attach)), n, key=KEY, n=n, folder=folder)
        edges, found = run(verify_step, shingled, n, threshold=cfg.threshold, n=n, folder=folder)
    else:
        edges, found = run(bucket_step, bands, n, n=n, op=cfg.op, folder=folder)
    labels, rounds, labelled = connected_components(edges, n, run=run, collect=collect, folder=folder)
    stats = dict(partitions=n, bands=cfg.num_bands, rows_per_band=cfg.rows_per_band,
                 documents=collect(docs) // max(cfg.num_bands, 1), candidate_edges=collect(found), rounds=rounds,
                 duplicates=labelled)
    return source.mark(MarkNearDuplicates(labels, cfg.text_key, node, cfg.op)), stats


def mark_block(
    block: pa.Table, labels: IdIndex, text_key: str, node: str, op: str, detail_key: str = DETAIL_KEY
) -> pa.Table:
    """The block with its labelled rows as DUPLICATE tombstones (reason: the kept id, detail
    ``{detail_key: kept id}``) and its live rows without a string text as ERROR tombstones; row order
    and other rows unchanged.  Shared by the MinHash and SimHash ops (each labels components its
    own way)."""
    table = ensure_tombstone_columns(block)
    bad, kinds, messages = bad_texts(table, text_key, op)
    dup_rows = np.zeros(0, dtype=np.int64)
    kept: list = []
    if len(labels) and table.num_rows:
        dup_rows, positions = labels.lookup(table.column(ID_COL))
        live = live_rows(table)[dup_rows]  # a label names a live document; a tombstone keeps its own
        dup_rows, positions = dup_rows[live], positions[live]
        kept = labels.table.column(LABEL).take(pa.array(positions, pa.int64())).to_pylist()
    if len(dup_rows) == 0 and len(bad) == 0:
        return table
    cols = {c: table.column(c).to_pylist() for c in (NODE_COL, KIND_COL, REASON_COL, DETAIL_COL)}
    for i, label in zip(dup_rows.tolist(), kept):
        cols[NODE_COL][i], cols[KIND_COL][i] = node, TombstoneKind.DUPLICATE.value
        cols[REASON_COL][i], cols[DETAIL_COL][i] = str(label), json_detail({detail_key: label})
    for i, kind, message in zip(bad.tolist(), kinds, messages):
        cols[NODE_COL][i], cols[KIND_COL][i] = node, TombstoneKind.ERROR.value
        cols[REASON_COL][i], cols[DETAIL_COL][i] = kind, message
    for name, values in cols.items():
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, pa.string()))
    return table


class MarkNearDuplicates:
    """The mark pass over the input (``map_batches``): labelled rows become DUPLICATE tombstones,
    live rows without a string text ERROR tombstones.  ``labels`` (refs or tables of ``(node,
    label)``) are indexed by id once per worker process."""

    def __init__(self, labels: list, text_key: str, node: str, op: str, detail_key: str = DETAIL_KEY):
        self.labels = list(labels)
        self.text_key, self.node, self.op, self.detail_key = text_key, node, op, detail_key
        self.token = new_token()

    def __call__(self, block: pa.Table) -> pa.Table:
        index = cached_index(self.token, self.labels, key=NODE)
        return mark_block(block, index, self.text_key, self.node, self.op, self.detail_key)
