"""``document_deduplicator``: Data-Juicer's exact document dedup, global and deterministic.

Normalization and hash follow Data-Juicer's ``DocumentDeduplicator`` (optional lowercase, then
optional removal of whitespace, digits and ASCII punctuation, then ``strip()``, then md5 of the
UTF-8 bytes), so the md5 recorded in each duplicate's detail is the value Data-Juicer computes.
Data-Juicer keeps the first occurrence in dataset order; on a distributed dataset that order is
not stable, so here each group keeps its smallest ``id`` instead (see ``exact/by_key.py``).

Only keys travel through the shuffle (``DocumentDeduplicator.apply``):

1. key pass: each batch becomes a slim table of ``id`` and the 16-byte md5 (:func:`key_table`);
   tombstones and rows with a null text are left out;
2. decide: that slim dataset is hash-shuffled by md5 and each partition names its duplicates as
   (id, md5, kept id) (:func:`duplicate_decisions`); only those rows are materialized, and their
   block refs (not the data) go to the next pass;
3. mark pass, streamed over the input again: each worker process fetches and indexes the decisions
   once per run; a null text becomes an error tombstone as before, and a live row whose (id, md5)
   is a decision becomes the duplicate tombstone (md5 recomputed only for rows whose id is
   among the decisions).

The result equals the full-row path's (:func:`dedup_full_rows`: the whole rows shuffled by md5),
but for one case that (id, md5) cannot decide: two live rows with the same id and the same md5
(ids are not unique across files), where the decisions cannot tell the kept row from its
duplicate.  The decide step detects it (a duplicate whose id is its kept id; a null id) and the op
then runs the full-row path for that run instead, with a warning in the log and a
``document_dedup_fallback`` event.  Rows sharing an id with different texts need no fallback, nor
do two duplicates sharing (id, md5) behind a kept row with another id (both are marked, as now).
"""

from __future__ import annotations

import hashlib
import logging
import re
import string
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from raypress.operators.base import Deduplicator, Params, RunContext, json_detail
from raypress.operators.dedup.exact.by_key import keep_smallest_id, map_key_partitions
from raypress.operators.registry import register
from raypress.schema import (
    DETAIL_COL,
    ID_COL,
    KIND_COL,
    NODE_COL,
    REASON_COL,
    TOMBSTONE_COLS,
    TombstoneKind,
    alive_mask,
    ensure_tombstone_columns,
    with_tombstones,
)

if TYPE_CHECKING:  # pragma: no cover
    import ray.data

HASH_COL = "_rp_hash"
KEPT_COL = "_rp_kept"  # in the decisions: the id of the row a duplicate's group keeps
ID_HASH_COL = "_rp_id_hash"  # in the decisions: ``id_hashes`` of the duplicate's id

log = logging.getLogger(__name__)

# Data-Juicer's pattern ``\s+|\d+|[<punctuation>]`` as one class: removing every matched
# character gives the same string.  (Data-Juicer compiles it with the ``regex`` package; the
# stdlib agrees on every code point but the separators U+001C..U+001F, which ``re`` counts as
# whitespace, and the digits of scripts newer than this Python's Unicode tables.)
_NON_CHARACTER = re.compile(rf"[\s\d{re.escape(string.punctuation)}]+")
# The same class split for speed: its ASCII members are deleted from the UTF-8 bytes with
# ``bytes.translate`` (C speed; UTF-8 never uses ASCII bytes inside a wider character), and a text
# holding one of its wider members (a no-break space, an Arabic digit) takes the regex instead.
_ASCII_SPACE = b" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f"  # str.isspace() in ASCII: what re's \s and str.strip() see
_ASCII_NON_CHARACTER = _ASCII_SPACE + b"0123456789" + string.punctuation.encode()
_WIDE_NON_CHARACTER = re.compile(r"[^\S\x00-\x7f]|[^\D\x00-\x7f]")  # whitespace or a digit beyond ASCII


def normalize_text(text: str, lowercase: bool = False, ignore_non_character: bool = False) -> str:
    """The text Data-Juicer hashes: optionally lowercased, optionally without whitespace,
    digits and ASCII punctuation, then stripped."""
    if lowercase:
        text = text.lower()
    if ignore_non_character:
        text = _NON_CHARACTER.sub("", text)
    return text.strip()


def normalized_bytes(text: str, lowercase: bool = False, ignore_non_character: bool = False) -> bytes:
    """``normalize_text(...).encode()``, byte for byte, at C speed for the common case."""
    if lowercase:
        text = text.lower()
    if not ignore_non_character:
        return text.strip().encode()
    if not text.isascii() and _WIDE_NON_CHARACTER.search(text):
        return _NON_CHARACTER.sub("", text).strip().encode()
    return text.encode().translate(None, _ASCII_NON_CHARACTER)  # every space gone: nothing to strip


def text_md5(text: str, lowercase: bool = False, ignore_non_character: bool = False) -> bytes:
    """md5 digest (16 bytes) of the normalized text; ``.hex()`` is Data-Juicer's hash value."""
    return hashlib.md5(normalized_bytes(text, lowercase, ignore_non_character)).digest()


def _string_tombstone_columns(table: pa.Table) -> pa.Table:
    """All-null tombstone columns may arrive typed ``null``; make every block agree on string."""
    for name in TOMBSTONE_COLS:
        i = table.schema.get_field_index(name)
        if table.schema.field(i).type != pa.string():
            table = table.set_column(i, name, table.column(i).cast(pa.string()))
    return table


def add_text_hash(
    table: pa.Table, text_key: str, lowercase: bool, ignore_non_character: bool, node: str
) -> pa.Table:
    """Add the 16-byte ``_rp_hash`` column.  A live row whose text is null cannot be compared:
    it leaves as an error tombstone (quarantined with the message) rather than killing the run.
    Tombstones are keyed by their id only so that they spread evenly over the shuffle."""
    table = _string_tombstone_columns(ensure_tombstone_columns(table))
    alive = alive_mask(table)
    is_alive = np.ones(table.num_rows, bool) if alive is None else alive.to_numpy()
    texts = table.column(text_key)
    null_text = is_alive & texts.is_null().to_numpy(zero_copy_only=False)
    if null_text.any():
        bad = table.filter(pa.array(null_text))
        message = f"{text_key!r} is null: cannot hash the document"
        bad = with_tombstones(
            bad, node, TombstoneKind.ERROR, ["ValueError"] * bad.num_rows, [message] * bad.num_rows
        )
        table = pa.concat_tables([table.filter(pa.array(~null_text)), bad])
        is_alive = np.concatenate([is_alive[~null_text], np.zeros(bad.num_rows, bool)])
        texts = table.column(text_key)
    ids = table.column(ID_COL).to_pylist()
    digests = [
        text_md5(text, lowercase, ignore_non_character)
        if live
        else hashlib.md5(f"\0{row_id}".encode()).digest()
        for text, row_id, live in zip(texts.to_pylist(), ids, is_alive)
    ]
    return table.append_column(HASH_COL, pa.array(digests, pa.binary(16)))


def dedup_full_rows(
    ds: "ray.data.Dataset",
    *,
    text_key: str,
    lowercase: bool,
    ignore_non_character: bool,
    node: str,
    num_partitions: int | None,
) -> "ray.data.Dataset":
    """The full-row path: hash every row (text included) and shuffle whole rows by the md5.
    The keys-only path's fallback, and the reference its results are checked against."""
    hashed = ds.map_batches(
        add_text_hash,
        batch_format="pyarrow",
        fn_kwargs=dict(
            text_key=text_key,
            lowercase=lowercase,
            ignore_non_character=ignore_non_character,
            node=node,
        ),
    )
    return keep_smallest_id(
        hashed, HASH_COL, node, detail_key="md5", num_partitions=num_partitions
    )


# --- keys only --------------------------------------------------------------------------------


def key_table(
    table: pa.Table, text_key: str, lowercase: bool = False, ignore_non_character: bool = False
) -> pa.Table:
    """Key pass: ``id`` and the 16-byte md5 of each live row with a text, and nothing else."""
    keep = pc.is_valid(table.column(text_key))
    alive = alive_mask(table)
    if alive is not None:
        keep = pc.and_(keep, alive)
    live = table.select([ID_COL, text_key]).filter(keep)
    digests = [
        text_md5(text, lowercase, ignore_non_character) for text in live.column(text_key).to_pylist()
    ]
    return pa.table({ID_COL: live.column(ID_COL), HASH_COL: pa.array(digests, pa.binary(16))})


def duplicate_decisions(table: pa.Table) -> pa.Table:
    """Decide on a slim table holding every row of its md5s: the (id, md5, kept id) of each
    duplicate, the kept row being the group's smallest id (as :func:`mark_duplicates`), and the
    hash of its id (computed once here rather than in every worker that indexes the decisions)."""
    n = table.num_rows
    id_type = table.schema.field(ID_COL).type
    if n < 2:
        return pa.table(
            {ID_COL: pa.array([], id_type), HASH_COL: pa.array([], pa.binary(16)),
             KEPT_COL: pa.array([], id_type), ID_HASH_COL: pa.array([], pa.uint64())}
        )
    table = table.sort_by([(HASH_COL, "ascending"), (ID_COL, "ascending")])
    keys = table.column(HASH_COL).combine_chunks()
    first = np.ones(n, dtype=bool)
    first[1:] = pc.not_equal(keys.slice(1), keys.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    head = np.maximum.accumulate(np.where(first, np.arange(n), 0))
    dup_rows = pa.array(np.flatnonzero(~first))
    ids = table.column(ID_COL)
    dup_ids = ids.take(dup_rows)
    return pa.table(
        {ID_COL: dup_ids, HASH_COL: keys.take(dup_rows),
         KEPT_COL: ids.take(pa.array(head[np.flatnonzero(~first)])),
         ID_HASH_COL: pa.array(id_hashes(dup_ids), pa.uint64())}
    )


def ambiguous_decisions(table: pa.Table) -> int:
    """Decisions that (id, md5) cannot apply: a duplicate whose id is its kept row's id (two
    live rows share id and md5), or a null id on either side."""
    if table.num_rows == 0:
        return 0
    ids, kept = table.column(ID_COL), table.column(KEPT_COL)
    same = pc.fill_null(pc.equal(ids, kept), True)  # a null on either side counts too
    return int(pc.sum(same).as_py() or 0)


def id_hashes(ids: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A 64-bit hash of each id's text (``cast(string)``); a null id hashes to 0."""
    text = pc.cast(ids, pa.string()).to_pylist()
    return np.array(
        [0 if t is None else int.from_bytes(hashlib.blake2b(t.encode(), digest_size=8).digest(), "little")
         for t in text],
        dtype=np.uint64,
    )


def _md5_prefix(digests: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """The first 8 bytes of each 16-byte md5 as a uint64."""
    if isinstance(digests, pa.ChunkedArray):
        digests = digests.combine_chunks()
    digests = digests.cast(pa.binary(16))
    if len(digests) == 0:
        return np.zeros(0, np.uint64)
    start = digests.offset * 16
    raw = np.frombuffer(digests.buffers()[1], dtype=np.uint8)[start:start + len(digests) * 16]
    return np.ascontiguousarray(raw.reshape(-1, 16)[:, :8]).view("<u8").ravel().astype(np.uint64)


@dataclass
class _DecisionIndex:
    """The decisions, looked up by sorted 64-bit hashes (built once; ``pc.is_in``/``index_in``
    would rebuild a hash table of every decision for each batch) and checked exactly."""

    id_set: np.ndarray  # sorted unique hashes of the duplicates' ids: the cheap first look-up
    pair_sorted: np.ndarray  # sorted hash of (id, md5) per decision
    pair_order: np.ndarray  # decision row of each ``pair_sorted`` entry
    ids: pa.Array  # the decisions' ids as text, for the exact check
    md5: pa.Array
    kept: pa.Array

    def __len__(self) -> int:
        return len(self.ids)

    def find(self, row_id: str, digest: bytes, pair_hash: np.uint64) -> int | None:
        lo = int(np.searchsorted(self.pair_sorted, pair_hash, side="left"))
        hi = int(np.searchsorted(self.pair_sorted, pair_hash, side="right"))
        for k in range(lo, hi):  # almost always one entry; hash collisions are checked away
            pos = int(self.pair_order[k])
            if self.ids[pos].as_py() == row_id and self.md5[pos].as_py() == digest:
                return pos
        return None


MAX_INDEXES_PER_WORKER = 2
_indexes: "OrderedDict[str, _DecisionIndex]" = OrderedDict()
_indexes_lock = threading.Lock()


def _decision_index(token: str, refs: list) -> _DecisionIndex:
    """The decisions of the run ``token``, fetched and indexed once per worker process."""
    with _indexes_lock:
        index = _indexes.get(token)
        if index is not None:
            _indexes.move_to_end(token)
            return index
    import ray

    tables = [t for t in ray.get(list(refs)) if t.num_rows]
    table = pa.concat_tables(tables).combine_chunks()
    hashes = table.column(ID_HASH_COL).to_numpy()
    md5 = table.column(HASH_COL).combine_chunks()
    pair = hashes ^ _md5_prefix(md5)
    order = np.argsort(pair, kind="stable")
    index = _DecisionIndex(
        id_set=np.unique(hashes),
        pair_sorted=pair[order],
        pair_order=order,
        ids=pc.cast(table.column(ID_COL), pa.string()).combine_chunks(),
        md5=md5,
        kept=table.column(KEPT_COL).combine_chunks(),
    )
    with _indexes_lock:
        _indexes[token] = index
        while len(_indexes) > MAX_INDEXES_PER_WORKER:
            _indexes.popitem(last=False)
    return index


def cached_decision_tokens() -> list[str]:
    """Tokens of the decision indexes this process keeps, least recently used first (for tests)."""
    with _indexes_lock:
        return list(_indexes)


class MarkDuplicates:
    """Mark pass for ``map_batches``: null texts become error tombstones, live rows whose
    (id, md5) is among the decisions become duplicate tombstones; row order is kept."""

    def __init__(
        self, refs: list, text_key: str, lowercase: bool, ignore_non_character: bool, node: str
    ):
        self.refs = list(refs)  # object refs of the decisions' blocks; empty: no duplicates
        self.token = uuid.uuid4().hex  # pickled with the callable: one index per process and run
        self.text_key = text_key
        self.lowercase = lowercase
        self.ignore_non_character = ignore_non_character
        self.node = node

    def __call__(self, table: pa.Table) -> pa.Table:
        table = _string_tombstone_columns(ensure_tombstone_columns(table))
        n = table.num_rows
        alive = alive_mask(table)
        is_alive = np.ones(n, bool) if alive is None else alive.to_numpy(zero_copy_only=False)
        texts = table.column(self.text_key)
        null_text = is_alive & texts.is_null().to_numpy(zero_copy_only=False)
        marks: dict[int, tuple[str, Any, str]] = {}
        message = f"{self.text_key!r} is null: cannot hash the document"
        for i in np.flatnonzero(null_text):
            marks[int(i)] = (TombstoneKind.ERROR.value, "ValueError", message)
        live = np.flatnonzero(is_alive & ~null_text)
        if self.refs and live.size:
            index = _decision_index(self.token, self.refs)
            live_ids = table.column(ID_COL).take(pa.array(live))
            hashes = id_hashes(live_ids)
            at = np.minimum(np.searchsorted(index.id_set, hashes), len(index.id_set) - 1)
            known = index.id_set[at] == hashes
            if known.any():  # md5 only for the rows whose id is among the decisions
                rows = live[known]
                row_ids = pc.cast(live_ids, pa.string()).filter(pa.array(known)).to_pylist()
                digests = [text_md5(t, self.lowercase, self.ignore_non_character)
                           for t in texts.take(pa.array(rows)).to_pylist()]
                pairs = hashes[known] ^ _md5_prefix(pa.array(digests, pa.binary(16)))
                for row, row_id, digest, pair in zip(rows, row_ids, digests, pairs):
                    pos = index.find(row_id, digest, pair)
                    if pos is not None:
                        detail = json_detail({"md5": digest.hex()})
                        kept = index.kept[pos].as_py()
                        marks[int(row)] = (TombstoneKind.DUPLICATE.value, kept, detail)
        if not marks:
            return table
        order = sorted(marks)
        mask = np.zeros(n, bool)
        mask[order] = True
        node, kind, reason, detail = (
            [self.node] * len(order),
            [marks[i][0] for i in order],
            [marks[i][1] for i in order],
            [marks[i][2] for i in order],
        )
        for name, values in ((NODE_COL, node), (KIND_COL, kind), (REASON_COL, reason),
                             (DETAIL_COL, detail)):
            i = table.schema.get_field_index(name)
            col = table.column(i).combine_chunks()
            table = table.set_column(
                i, name, pc.replace_with_mask(col, pa.array(mask), pa.array(values, pa.string()))
            )
        return table


def decide_duplicates(
    ds: "ray.data.Dataset", *, text_key: str, lowercase: bool, ignore_non_character: bool,
    num_partitions: int | None,
) -> "ray.data.Dataset":
    """Key pass and decide step: the materialized (id, md5, kept id) of every duplicate."""
    keys = ds.map_batches(
        key_table,
        batch_format="pyarrow",
        fn_kwargs=dict(
            text_key=text_key, lowercase=lowercase, ignore_non_character=ignore_non_character
        ),
    )
    return map_key_partitions(keys, HASH_COL, duplicate_decisions, {}, num_partitions).materialize()


def _count_ambiguous(refs: list) -> int:
    import ray

    count = ray.remote(ambiguous_decisions)
    return sum(ray.get([count.remote(ref) for ref in refs]))


class DocumentDedupParams(Params):
    text_key: str = Field("text", description="column holding the document text")
    lowercase: bool = Field(False, description="compare texts case-insensitively")
    ignore_non_character: bool = Field(
        False,
        description="ignore whitespace, digits and ASCII punctuation when comparing texts",
    )
    num_partitions: int | None = Field(
        None,
        ge=1,
        description="partitions of the hash shuffle (default: one per 100,000 input rows, "
        "at most 200)",
    )


@register("document_deduplicator")
class DocumentDeduplicator(Deduplicator[DocumentDedupParams]):
    """Exact document dedup: md5 of the normalized text; each group keeps its smallest id.

    Only (id, md5) goes through the shuffle; when two live rows share both id and md5 the run
    falls back to shuffling whole rows (logged as a warning and a ``document_dedup_fallback``
    event; see the module's docstring)."""

    reads = (ID_COL,)

    def apply(self, ds: "ray.data.Dataset", ctx: RunContext) -> "ray.data.Dataset":
        """Keys-only dedup (see the module's docstring); falls back to :func:`dedup_full_rows`,
        with a warning and a ``document_dedup_fallback`` event, when two live rows share both
        id and md5."""
        p = self.params
        flags = dict(text_key=p.text_key, lowercase=p.lowercase,
                     ignore_non_character=p.ignore_non_character)
        num_partitions = p.num_partitions or ctx.shuffle_partitions()
        decisions = decide_duplicates(ds, num_partitions=num_partitions, **flags)
        refs = decisions.to_arrow_refs()
        ambiguous = _count_ambiguous(refs)
        if ambiguous:
            log.warning(
                "%s: %d duplicate(s) share their id with the row kept for the same md5; "
                "(id, md5) cannot tell them apart, so this run shuffles the whole rows",
                ctx.node_id, ambiguous,
            )
            ctx.event("document_dedup_fallback", ambiguous=ambiguous)
            return dedup_full_rows(ds, node=ctx.node_id, num_partitions=num_partitions, **flags)
        if decisions.count() == 0:
            refs = []
        return ds.map_batches(
            MarkDuplicates(refs, node=ctx.node_id, **flags), batch_format="pyarrow"
        )
