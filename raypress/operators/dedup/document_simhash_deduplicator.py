"""``document_simhash_deduplicator``: Data-Juicer's SimHash near-dedup, distributed and deterministic.

Same parameters, defaults and SimHash as Data-Juicer's op (see ``simhash.blocks``): documents whose
64-bit SimHashes differ in at most ``hamming_distance`` bits are linked, and each connected
component keeps one document.  Data-Juicer keeps the first in dataset order, which a distributed
dataset does not have: here the smallest ``id`` (the first, for ids in input order).  The flow is
the MinHash op's, with SimHash blocks in place of LSH bands; the driver sees object references and
one integer per task only:

1. per input block, ``simhash_step``: one row ``(block_key, combo, simhash, id, blk)`` per
   document and choice of blocks, shuffled by ``block_key``;
2. per partition, ``pairs_step``: equal SimHashes and pairs within the Hamming distance become
   edges;
3. ``graph.connected_components`` labels every document of a component with its smallest id;
4. the labels go back to their blocks, where labelled rows become DUPLICATE tombstones (reason:
   the kept id) and rows whose text is not a string ERROR tombstones.  Texts never move.

The output is the same for any block, partition or worker count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from pydantic import Field, NonNegativeInt, PositiveInt, model_validator

from raypress.operators.base import Deduplicator, RunContext
from raypress.operators.dedup.graph.connected_components import connected_components
from raypress.operators.dedup.minhash.deduplicator import mark_step, text_blocks
from raypress.operators.dedup.minhash.shingles import ShingleParams
from raypress.operators.dedup.simhash.blocks import SimhashConfig, check_blocks, pairs_step, simhash_step
from raypress.operators.dedup.shuffle.tasks import run_step, total
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
        import ray.data

        p = self.params
        ctx, blocks = text_blocks(self.name, ds, ctx, p.text_key)
        if not blocks:
            return ds
        n = p.num_partitions or ctx.shuffle_partitions()
        marked, stats = near_duplicates(blocks, self.config(), n, ctx.node_id)
        ctx.event("simhash_dedup", **stats)
        return ray.data.from_arrow_refs(marked)


def near_duplicates(
    blocks: Sequence[Any], cfg: SimhashConfig, n: int, node: str, run: Callable = run_step, collect: Callable = total,
) -> tuple[list[Any], dict[str, int]]:
    """The input blocks (refs; or tables with ``run=local_step, collect=sum``) with their near
    duplicates marked, in the same order, and counts of what it took."""
    n_blocks = len(blocks)
    groups = min(n_blocks, n)
    numbered = [{"blk": i} for i in range(n_blocks)]
    rows, docs = run(simhash_step, [[b] for b in blocks], n, per_task=numbered, cfg=cfg, n=n)
    edges, found = run(pairs_step, rows, n, hamming_distance=cfg.hamming_distance, n=n)
    labels, rounds, labelled = connected_components(edges, n, groups, run=run, collect=collect)
    inputs = [[b, *labels[i % groups]] for i, b in enumerate(blocks)]
    marked, dups = run(mark_step, inputs, 1, per_task=numbered, text_key=cfg.text_key, node=node, op=cfg.op,
                        detail_key=DETAIL_KEY)
    stats = dict(blocks=n_blocks, partitions=n, documents=collect(docs), candidate_edges=collect(found),
                 rounds=rounds, duplicates=collect(dups))
    if stats["duplicates"] != labelled:
        raise RuntimeError(f"{cfg.op}: {labelled} documents labelled as duplicates but {stats['duplicates']} rows "
                           "marked: are the ids unique?")
    return marked[0], stats
