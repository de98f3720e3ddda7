"""MinHash-LSH near-dedup of a whole Dataset: the params and the driver both MinHash ops share.

The driver never sees rows, signatures or edges, only object references and one integer per
task:

1. the input's blocks (``Dataset.to_arrow_refs``: materialized once in the object store, which
   spills to disk) are numbered; ``band_step`` runs once per block;
2. band keys are shuffled to ``n`` partitions; each partition turns its buckets into star edges
   (or, with ``verify``, into verified edges: see ``minhash.lsh``);
3. ``graph.connected_components`` labels every node of a component with its smallest id;
4. the labels go back to the blocks their documents came from (each row carried its block number
   along), and ``mark_step`` turns every labelled row of a block into a DUPLICATE tombstone.  The
   rows themselves never leave their block: no shuffle of the texts.

Bytes in flight per live document: ``num_bands`` band rows of (8-byte key, id, 4-byte block);
per candidate (a document sharing a bucket), O(num_bands) edges of two ids and two block
numbers, which the components never grow; per duplicate, one label row.  A task holds one block
or one partition.  The output is the same for any block, partition or worker count: every stage
is a function of whole buckets or of the component structure, and ties go to the smallest id.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field, PositiveInt, field_validator, model_validator

from raypress.operators.base import Deduplicator, RunContext, json_detail
from raypress.operators.dedup.graph.connected_components import LABEL, NODE, NODE_BLK, connected_components
from raypress.operators.dedup.minhash.bands import optimal_param
from raypress.operators.dedup.minhash.lsh import (
    LSHConfig,
    bad_texts,
    band_step,
    bucket_step,
    members_step,
    shingles_step,
    verify_step,
)
from raypress.operators.dedup.minhash.shingles import ShingleParams
from raypress.operators.dedup.shuffle.tasks import concat, run_step, total
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

    @field_validator("tokenizer_model")
    @classmethod
    def _no_tokenizer_model(cls, value: str | None) -> str | None:
        if value is not None:
            raise ValueError("tokenizer_model is only used by Data-Juicer's 'sentencepiece' tokenization, which "
                             "raypress does not support; remove it and use tokenization 'space', "
                             "'punctuation' or 'character'")
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
                         threshold=p.jaccard_threshold, chunk_rows=self.chunk_rows())

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        import ray.data

        p = self.params
        ctx, blocks = text_blocks(self.name, ds, ctx, p.text_key)
        if not blocks:
            return ds
        marked, stats = near_duplicates(blocks, self.config(ctx), self.partitions(ctx), p.verify, ctx.node_id)
        ctx.event("minhash_dedup", **stats)
        return ray.data.from_arrow_refs(marked)


def text_blocks(op: str, ds: "ray.data.Dataset", ctx: RunContext, text_key: str) -> tuple[RunContext, list[Any]]:
    """The input's blocks as refs (none when no row reached the node) and ``ctx`` with its input rows
    counted, after checking the text column is there: the first step of every near-dedup op."""
    if ctx.input_rows is None:  # called outside a run: size the default shuffle by the input
        ctx = dataclasses.replace(ctx, input_rows=ds.count())
    if ctx.input_rows == 0:  # nothing reached this node (e.g. all filtered upstream): nothing to do
        return ctx, []
    schema = ds.schema()
    columns = list(schema.names) if schema is not None else []
    if columns and text_key not in columns:
        raise ValueError(f"{op}: the input has no column {text_key!r} (columns: {', '.join(columns)}); "
                         "name the text column with `text_key`")
    return ctx, ds.to_arrow_refs()


def near_duplicates(
    blocks: Sequence[Any], cfg: LSHConfig, n: int, verify: bool, node: str,
    run: Callable = run_step, collect: Callable = total,
) -> tuple[list[Any], dict[str, int]]:
    """The input blocks (refs; or tables with ``run=local_step, collect=sum``) with their near
    duplicates marked, in the same order, and what it took: counts and rounds."""
    n_blocks = len(blocks)
    groups = min(n_blocks, n)
    numbered = [{"blk": i} for i in range(n_blocks)]
    bands, docs = run(band_step, [[b] for b in blocks], n, per_task=numbered, cfg=cfg, n=n,
                      num_gpus=1 if cfg.device != "cpu" else 0)
    if verify:
        members, _ = run(members_step, bands, groups, groups=groups)
        inputs = [[b, *members[i % groups]] for i, b in enumerate(blocks)]
        shingled, _ = run(shingles_step, inputs, n, per_task=numbered, cfg=cfg, n=n)
        edges, found = run(verify_step, shingled, n, threshold=cfg.threshold, n=n)
    else:
        edges, found = run(bucket_step, bands, n, n=n)
    labels, rounds, labelled = connected_components(edges, n, groups, run=run, collect=collect)
    inputs = [[b, *labels[i % groups]] for i, b in enumerate(blocks)]
    marked, dups = run(mark_step, inputs, 1, per_task=numbered, text_key=cfg.text_key, node=node, op=cfg.op)
    stats = dict(blocks=n_blocks, partitions=n, bands=cfg.num_bands, rows_per_band=cfg.rows_per_band,
                 documents=collect(docs), candidate_edges=collect(found), rounds=rounds, duplicates=collect(dups))
    if stats["duplicates"] != labelled:
        raise RuntimeError(f"{cfg.op}: {labelled} documents labelled as duplicates but {stats['duplicates']} rows "
                           "marked: are the ids unique?")
    return marked[0], stats


def mark_block(
    block: pa.Table, blk: int, labels: pa.Table, text_key: str, node: str, op: str, detail_key: str = DETAIL_KEY
) -> tuple[pa.Table, int]:
    """The block with its labelled rows as DUPLICATE tombstones (reason: the kept id, detail
    ``{detail_key: kept id}``) and its live rows without a string text as ERROR tombstones; row order
    and other rows unchanged.  Also returns the number of duplicates marked.  Shared by the MinHash
    and SimHash ops (each labels components its own way)."""
    table = ensure_tombstone_columns(block)
    bad, kinds, messages = bad_texts(table, text_key, op)
    ids = table.column(ID_COL)
    labels = labels.filter(pc.equal(labels.column(NODE_BLK), blk)) if labels.num_rows else labels
    dup_rows = np.zeros(0, dtype=np.int64)
    kept: list = []
    if labels.num_rows:
        where = pc.index_in(ids, value_set=labels.column(NODE).cast(ids.type).combine_chunks())
        hit = where.is_valid().to_numpy(zero_copy_only=False)
        dup_rows = np.flatnonzero(hit)  # labelled rows are live documents with a text, never `bad`
        kept = labels.column(LABEL).take(pc.take(where, pa.array(dup_rows))).to_pylist()
    if len(dup_rows) == 0 and len(bad) == 0:
        return table, 0
    cols = {c: table.column(c).to_pylist() for c in (NODE_COL, KIND_COL, REASON_COL, DETAIL_COL)}
    for i, label in zip(dup_rows.tolist(), kept):
        cols[NODE_COL][i], cols[KIND_COL][i] = node, TombstoneKind.DUPLICATE.value
        cols[REASON_COL][i], cols[DETAIL_COL][i] = str(label), json_detail({detail_key: label})
    for i, kind, message in zip(bad.tolist(), kinds, messages):
        cols[NODE_COL][i], cols[KIND_COL][i] = node, TombstoneKind.ERROR.value
        cols[REASON_COL][i], cols[DETAIL_COL][i] = kind, message
    for name, values in cols.items():
        table = table.set_column(table.schema.get_field_index(name), name, pa.array(values, pa.string()))
    return table, len(dup_rows)


def mark_step(tables: list[pa.Table], blk: int, text_key: str, node: str, op: str,
              detail_key: str = DETAIL_KEY) -> tuple[list[pa.Table], int]:
    """``tables[0]`` is the block, the rest the label pieces of its block group."""
    labels = concat(tables[1:]) if len(tables) > 1 else pa.table({NODE: [], NODE_BLK: [], LABEL: []})
    out, marked = mark_block(tables[0], blk, labels, text_key, node, op, detail_key)
    return [out], marked
