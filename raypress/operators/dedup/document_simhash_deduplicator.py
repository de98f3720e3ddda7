"""``document_simhash_deduplicator``: Data-Juicer's SimHash near-dedup, distributed and deterministic.

Same parameters, defaults and SimHash as Data-Juicer's op (see ``simhash.blocks``): documents whose
64-bit SimHashes differ in at most ``hamming_distance`` bits are linked, and each connected
component keeps one document.  Data-Juicer keeps the first in dataset order, which a distributed
dataset does not have: here the smallest ``id`` (the first, for ids in input order).  The flow is
the MinHash op's, with SimHash blocks in place of LSH bands; the driver sees object references and
one integer per task only, and the input's text never enters the object store:

1. a key pass streamed over the input (``bucket_rows``): one row ``(block_key, combo, simhash,
   id)`` per document and choice of blocks, shuffled by ``block_key``;
2. per partition, ``pairs_step``: equal SimHashes and pairs within the Hamming distance become
   edges;
3. ``graph.connected_components`` labels every document of a component with its smallest id;
4. a mark pass streamed over the input indexes the labels by id in each worker: labelled rows
   become DUPLICATE tombstones (reason: the kept id) and rows whose text is not a string ERROR
   tombstones.  Texts never move.

The output is the same for any block, partition or worker count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from raypress.operators.base import Deduplicator, RunContext
from raypress.operators.dedup.graph.connected_components import connected_components
from raypress.operators.dedup.minhash.deduplicator import MarkNearDuplicates, Source, checked_input, shuffle_folder
from raypress.operators.dedup.minhash.shingles import ShingleParams
from raypress.operators.dedup.shuffle.sources import DatasetBlocks
from raypress.operators.dedup.simhash.blocks import (
    KEY,
    SimhashConfig,
    block_combinations,
    bucket_rows,
    check_blocks,
    pairs_step,
)
from raypress.operators.dedup.shuffle.tasks import route_step, run_step, total
from raypress.operators.registry import register
from raypress.operators.shared.unicode_regex import compile_pattern
from raypress.schema import ID_COL

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

DETAIL_KEY = "simhash_component"


class SimhashParams(ShingleParams):
    window_size: PositiveInt = Field(6, description="tokens per shingle")
    num_blocks: PositiveInt = Field(6, description="blocks the 64 SimHash bits are cut into to find candidates")
    hamming_distance: NonNegativeInt = Field(4, description="documents whose SimHashes differ in at most this "
                                             "many bits are near duplicates (must be < num_blocks)")

    @classmethod
    def compile_ignore(cls, pattern: str) -> Any:
        """Data-Juicer's SimHash patterns use ``\\p{P}``: compiled as ``simhash.blocks`` does."""
        return compile_pattern(pattern)

    @model_validator(mode="after")
    def _blocks_fit(self) -> "SimhashParams":
        check_blocks(self.num_blocks, self.hamming_distance)
        return self


@register("document_simhash_deduplicator")
class DocumentSimhashDeduplicator(Deduplicator[SimhashParams]):
    """Near-duplicate documents by 64-bit SimHash (Hamming distance <= hamming_distance): each
    cluster keeps its smallest id; the others leave as duplicates naming it."""

    reads: ClassVar[tuple[str, ...]] = (ID_COL,)

    def config(self) -> SimhashConfig:
        p = self.params
        return SimhashConfig(op=self.name, text_key=p.text_key, tokenization=p.tokenization,
                             window_size=p.window_size, lowercase=p.lowercase, ignore_pattern=p.ignore_pattern,
                             num_blocks=p.num_blocks, hamming_distance=p.hamming_distance)

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        p = self.params
        ctx = checked_input(self.name, ds, ctx, p.text_key)
        if ctx.input_rows == 0:
            return ds
        n = p.num_partitions or ctx.shuffle_partitions()
        cfg = self.config()
        rows = ctx.input_rows * len(block_combinations(cfg.num_blocks, cfg.hamming_distance))
        with shuffle_folder(ctx, rows) as folder:
            marked, stats = near_duplicates(DatasetBlocks(ds), cfg, n, ctx.node_id, folder=folder)
        ctx.event("simhash_dedup", **stats, rows_in_files=folder is not None)
        return marked


def near_duplicates(
    source: Source, cfg: SimhashConfig, n: int, node: str, run: Callable = run_step, collect: Callable = total,
    folder: str | None = None,
) -> tuple[Any, dict[str, int]]:
    """The input (a Dataset's blocks; or tables with ``run=local_step, collect=sum``) with its near
    duplicates marked (a lazy Dataset; or the tables), in the same order, and counts of what it
    took.  With a ``folder``, the bucket rows and candidate edges travel through files there (see the
    MinHash op's)."""
    keys = source.map_blocks(bucket_rows, cfg=cfg)
    rows, count = run(route_step, ([b] for b in keys), n, key=KEY, n=n, folder=folder)
    edges, found = run(pairs_step, rows, n, hamming_distance=cfg.hamming_distance, n=n, folder=folder)
    labels, rounds, labelled = connected_components(edges, n, run=run, collect=collect, folder=folder)
    n_combo = len(block_combinations(cfg.num_blocks, cfg.hamming_distance))
    stats = dict(partitions=n, documents=collect(count) // n_combo, candidate_edges=collect(found),
                 rounds=rounds, duplicates=labelled)
    return source.mark(MarkNearDuplicates(labels, cfg.text_key, node, cfg.op, DETAIL_KEY)), stats
