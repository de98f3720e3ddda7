"""``ccnet_paragraph_dedup``: CCNet's exact paragraph dedup (the step MINT-1T applies to HTML text).

Each ``"\\n"``-separated line of a document's text (every text position of MINT-1T's interleaved
``texts``, or one ``text`` string) is normalised and hashed as CCNet does (lower-case, digits ->
0, CCNet's Unicode punctuation and control characters deleted; SHA-1's first 8 bytes; see
``ccnet.paragraphs``), and lines whose hash occurs more than once in the corpus are removed:

* ``keep: none`` (default): every occurrence, the first included - what CCNet's ``mine.py`` and
  the paper do (``deduplicate_two_pass``: "even removing the first occurrence"), which is what
  strips boilerplate (menus, cookie banners, share buttons) from every page that carries it;
* ``keep: first``: one occurrence survives, the one in the smallest document ``id`` (then the
  earliest text position and line).  CCNet's one-pass ``deduplicate`` keeps the first one it
  reads, which depends on file order; the smallest id makes the result independent of blocks,
  partitions and workers.  A line repeated within one document keeps its first copy only there.

A text position left blank is dropped from every parallel list (``images``, ``image_bytes``,
``image_metadata``); a document left with no text keeps its images (``image_count_filter`` and
the others downstream judge it); one left with neither text nor an image leaves as a DUPLICATE
tombstone with reason ``ccnet_no_text_left`` and its content unchanged.  A live row whose
parallel lists disagree in length is quarantined (error naming its id).  Rows that arrive as
tombstones pass through untouched and are not counted.  Kept rows get
``ccnet_removed_paragraphs``.

On Ray (stateless tasks over the materialised input's blocks; documents never leave their block,
only light ``(hash, id, block, row, position, line, bytes)`` rows move, and nothing row-wise
reaches the driver):

1. one task per block: the occurrences of its lines, routed by hash into ``num_partitions``;
2. one task per hash partition: the occurrences to remove (all of a hash seen twice, or all but
   the smallest-id one), routed by block into groups; one task per group cuts them per block;
3. one task per block: remove its losing lines, write tombstones.

The input is materialised once (its blocks are what steps 1 and 3 address; the object store holds
them, spilling to disk as Ray does).  Step 2 holds one partition's occurrences (about 40 bytes plus
the id per line) in one task: raise ``num_partitions`` for a corpus with many lines per document.

The counts (paragraphs seen and their bytes, lines hashed, distinct and duplicated hashes,
paragraphs and bytes removed, documents changed and dropped, positions dropped) go into
``events.jsonl`` as a ``ccnet_paragraph_dedup`` event.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Deduplicator, Params, RunContext
from raypress.operators.dedup.ccnet.paragraphs import (
    OCCURRENCE_SCHEMA,
    REMOVED_COL,
    Counts,
    Keep,
    add_counts,
    block_occurrences,
    concat_pieces,
    decide,
    edit_block,
    route,
    split_group,
)
from raypress.operators.registry import register
from raypress.operators.shared.documents import CONTENT_COLUMNS
from raypress.schema import ID_COL

if TYPE_CHECKING:  # pragma: no cover
    import ray.data


class CcnetParagraphDedupParams(Params):
    text_key: str = Field(
        "texts",
        description="column holding the text: a list of text positions (MINT-1T's interleaved texts, "
        "edited with images / image_bytes / image_metadata) or one string",
    )
    keep: Keep = Field(
        "none",
        description="none: remove every occurrence of a line seen twice or more (CCNet's mine.py, the paper); "
        "first: keep the occurrence in the smallest id (then position, line)",
    )
    min_chars: int = Field(
        0, ge=0, description="lines shorter than this after normalisation are never removed (CCNet: none, 0)"
    )
    num_partitions: int | None = Field(
        None, ge=1, description="hash partitions of the decision step (default: one per 2,000 input rows, at most 200)",
    )


# -- the steps as Ray task bodies (pure: tables in, tables and counts out) ----------------------------


def _hash_task(table: pa.Table, block: int, parts: int, text_key: str, min_chars: int) -> tuple[Any, ...]:
    occ, counts = block_occurrences(table, block, text_key, min_chars)
    return (*route(occ, "hash", parts), counts)


def _decide_task(keep: Keep, groups: int, *pieces: pa.Table) -> tuple[Any, ...]:
    losers, counts = decide(concat_pieces(pieces, OCCURRENCE_SCHEMA), keep)
    return (*route(losers, "block", groups), counts)


def _split_task(blocks: list[int], *pieces: pa.Table) -> tuple[pa.Table, ...] | pa.Table:
    out = split_group(pieces, blocks)
    return out[0] if len(out) == 1 else tuple(out)


def _edit_task(table: pa.Table, losers: pa.Table, text_key: str, node: str) -> tuple[pa.Table, Counts]:
    return edit_block(table, losers, text_key, node)


@functools.lru_cache(maxsize=1)
def _remote():
    import ray

    return tuple(ray.remote(f) for f in (_hash_task, _decide_task, _split_task, _edit_task))


def _refs(out: Any, n: int) -> list:
    return [out] if n == 1 else list(out)


@register("ccnet_paragraph_dedup")
class CcnetParagraphDedup(Deduplicator[CcnetParagraphDedupParams]):
    """CCNet exact paragraph dedup: lines whose normalised SHA-1 occurs more than once in the corpus
    are removed (all copies, or all but the smallest id's); deterministic, on Ray tasks."""

    reads = (ID_COL,)

    def columns_written(self) -> tuple[str, ...]:
        key = self.params.text_key
        return (CONTENT_COLUMNS if key == "texts" else (key,)) + (REMOVED_COL,)

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        import ray
        import ray.data

        p = self.params
        start = time.perf_counter()
        blocks = ds.materialize().to_arrow_refs()
        if not blocks:
            return ds
        if p.num_partitions:
            parts = p.num_partitions
        elif ctx.input_rows is not None:
            parts = ctx.shuffle_partitions(rows_per_partition=2_000)
        else:  # rows not counted: one partition per block, as many as the input was cut into
            parts = min(len(blocks), 200)
        groups = min(len(blocks), parts)
        hash_fn, decide_fn, split_fn, edit_fn = _remote()

        hashed = [hash_fn.options(num_returns=parts + 1).remote(ref, b, parts, p.text_key, p.min_chars)
                  for b, ref in enumerate(blocks)]
        decided = [decide_fn.options(num_returns=groups + 1).remote(p.keep, groups, *[h[q] for h in hashed])
                   for q in range(parts)]
        losers: dict[int, Any] = {}
        for g in range(groups):
            members = list(range(g, len(blocks), groups))
            out = split_fn.options(num_returns=len(members)).remote(members, *[d[g] for d in decided])
            losers.update(zip(members, _refs(out, len(members))))
        edited = [edit_fn.options(num_returns=2).remote(ref, losers[b], p.text_key, ctx.node_id)
                  for b, ref in enumerate(blocks)]

        counts: Counts = {}
        for c in ray.get([h[parts] for h in hashed] + [d[groups] for d in decided] + [e[1] for e in edited]):
            add_counts(counts, c)
        ctx.event(
            "ccnet_paragraph_dedup",
            keep=p.keep,
            min_chars=p.min_chars,
            blocks=len(blocks),
            partitions=parts,
            seconds=round(time.perf_counter() - start, 3),
            **counts,
        )
        return ray.data.from_arrow_refs([e[0] for e in edited])
