"""CCNet's paragraph normalisation and hash, and the Ray-free steps of ``ccnet_paragraph_dedup``.

What CCNet does (facebookresearch/cc_net, ``text_normalizer.normalize_for_dedup`` and
``dedup.compute_hashes``), per ``"\\n"``-separated line of a document:

* normalise: ``strip()``, lower-case, every Unicode decimal digit (``re``'s ``\\d``) -> ``"0"``,
  then delete the 34 Unicode punctuation marks of CCNet's ``UNICODE_PUNCT`` table (full-width
  comma and colon, CJK brackets, curly quotes, en/em dashes, the ellipsis ...) and every control
  character (U+0000-U+001F, U+007F-U+009F: tabs inside a line go too).  ASCII punctuation, inner
  spaces and accents are kept: that is CCNet's dedup normaliser (``accent=False``), not its
  stronger ``normalize`` for language models;
* hash: the first 8 bytes of the SHA-1 of the normalised line's UTF-8, read as a little-endian
  uint64 (CCNet's ``str_hash`` on x86).

Two deliberate differences: a line that normalises to the empty string (blank, or made only of
the deleted characters) is never counted or removed (CCNet hashes ``""`` like any line, so every
blank line after the first would go, merging the text's paragraphs); and ``min_chars`` exempts
short lines (CCNet has no such setting; 0, the default, exempts none).  Both are decided on the
normalised line, so every occurrence of a hash gets the same treatment.

The steps, each a plain function on Arrow tables (the op runs them as Ray tasks; the unit tests
call them directly, through :func:`dedup_tables`):

1. :func:`block_occurrences`: one light row ``(hash, id, block, row, pos, line, nbytes)`` per
   counted line of the block's live documents;
2. :func:`decide`: on all occurrences of a set of hashes (a hash partition), the occurrences to
   remove: ``keep="none"`` every occurrence of a hash seen twice or more (CCNet's ``mine.py``,
   the two-pass dedup of the paper: "even removing the first occurrence"), ``keep="first"`` all
   but the first in (document id, text position, line) order (CCNet's one-pass ``deduplicate``
   keeps the first one it meets; here "first" is by id, so blocks and workers do not matter);
3. :func:`edit_block`: remove a block's losing lines, drop text positions left blank (from every
   parallel list), and tombstone a document left with neither text nor an image.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from typing import Any, Iterator, Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from raypress.operators.base import json_detail
from raypress.operators.shared.documents import CONTENT_COLUMNS
from raypress.schema import ID_COL, TombstoneKind, alive_mask, ensure_tombstone_columns, with_tombstones

OP = "ccnet_paragraph_dedup"
REMOVED_COL = "ccnet_removed_paragraphs"
NO_TEXT_LEFT = "ccnet_no_text_left"  # reason of a document whose every text line was a duplicate

Keep = Literal["none", "first"]
Layout = Literal["list", "plain", "none"]

# CCNet's UNICODE_PUNCT keys (text_normalizer.py), in its order.
UNICODE_PUNCT = (
    "\uff0c\u3002\u3001\u201e\u201d\u201c\u00ab\u00bb\uff11\u300d\u300c\u300a\u300b\u00b4\u2236\uff1a\uff1f"
    "\uff01\uff08\uff09\uff1b\u2013\u2014\uff0e\uff5e\u2019\u2026\u2501\u3008\u3009\u3010\u3011\uff05\u25ba"
)
NON_PRINTING = "".join(map(chr, [*range(0, 32), *range(127, 160)]))
_DELETE = str.maketrans("", "", UNICODE_PUNCT + NON_PRINTING)
_DIGIT = re.compile(r"\d")

OCCURRENCE_SCHEMA = pa.schema(
    [
        ("hash", pa.uint64()),
        (ID_COL, pa.string()),
        ("block", pa.int32()),
        ("row", pa.int32()),
        ("pos", pa.int32()),  # text position (0 for a plain text column)
        ("line", pa.int32()),  # index of the line in text.split("\n")
        ("nbytes", pa.int64()),  # UTF-8 bytes of the raw line
    ]
)
LOSER_COLUMNS = ("block", "row", "pos", "line", "nbytes")
LOSER_SCHEMA = pa.schema([OCCURRENCE_SCHEMA.field(c) for c in LOSER_COLUMNS])

Counts = dict[str, int]


def normalize_for_dedup(line: str) -> str:
    """CCNet's ``normalize_for_dedup``: strip, lower-case, digits -> 0, delete CCNet's Unicode
    punctuation and the control characters (same result, written with ``str.translate``)."""
    line = line.strip()
    if not line:
        return line
    return _DIGIT.sub("0", line.lower()).translate(_DELETE)


def paragraph_hashes(normalized: Sequence[str]) -> np.ndarray:
    """uint64 per normalised line: SHA-1's first 8 bytes, little-endian (CCNet's ``str_hash``)."""
    digests = b"".join(hashlib.sha1(s.encode("utf-8")).digest()[:8] for s in normalized)
    return np.frombuffer(digests, dtype="<u8").astype(np.uint64)


# -- reading a block's documents ------------------------------------------------------------


def text_layout(table: pa.Table, text_key: str) -> Layout:
    """``list`` (interleaved ``texts``), ``plain`` (one string) or ``none`` (nothing to read: an
    empty block, an all-null column); anything else is an error naming the column."""
    if table.num_rows == 0:
        return "none"
    if text_key not in table.column_names:
        raise ValueError(f"{OP}: no column {text_key!r} to deduplicate (columns: {table.column_names})")
    typ = table.schema.field(text_key).type
    if pa.types.is_null(typ):
        return "none"
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return "plain"
    if (pa.types.is_list(typ) or pa.types.is_large_list(typ)) and (
        pa.types.is_string(typ.value_type) or pa.types.is_large_string(typ.value_type) or pa.types.is_null(typ.value_type)
    ):
        return "list"
    raise ValueError(f"{OP}: column {text_key!r} is {typ}; expected a string or a list of strings")


def parallel_columns(table: pa.Table, text_key: str, layout: Layout) -> list[str]:
    """The lists that run parallel to ``text_key`` (MINT-1T's images and their bytes/metadata)."""
    if layout != "list":
        return []
    return [c for c in CONTENT_COLUMNS if c != text_key and c in table.column_names
            and (pa.types.is_list(table.schema.field(c).type) or pa.types.is_large_list(table.schema.field(c).type))]


def live_rows(table: pa.Table) -> np.ndarray:
    alive = alive_mask(table)
    if alive is None:
        return np.arange(table.num_rows)
    return np.flatnonzero(alive.to_numpy(zero_copy_only=False))


def malformed_rows(table: pa.Table, text_key: str, layout: Layout, rows: np.ndarray) -> dict[int, str]:
    """Live rows whose parallel lists disagree in length with their texts: row -> message.  They
    are neither counted nor edited, and leave as error tombstones (quarantined)."""
    cols = parallel_columns(table, text_key, layout)
    if not cols or not len(rows):
        return {}
    n_text = pc.list_value_length(table.column(text_key)).to_numpy(zero_copy_only=False)
    bad: dict[int, str] = {}
    ids = table.column(ID_COL)
    for name in cols:
        n = pc.list_value_length(table.column(name)).to_numpy(zero_copy_only=False)
        # a null list on either side is "no positions of that kind": table_to_documents pads it
        wrong = ~np.isnan(n_text) & ~np.isnan(n) & (n_text != n)
        for r in np.flatnonzero(wrong[rows]):
            row = int(rows[r])
            bad.setdefault(row, f"{OP}: row {ids[row].as_py()!r}: {text_key!r} has {int(n_text[row])} positions "
                                f"but {name!r} has {int(n[row])}; the lists must run parallel")
    return bad


def _texts(value: Any, layout: Layout) -> Iterator[tuple[int, str]]:
    """(position, text) of one row's text positions."""
    if layout == "plain":
        if value is not None:
            yield 0, value
    elif value:
        for pos, text in enumerate(value):
            if text is not None:
                yield pos, text


# -- step 1: occurrences ----------------------------------------------------------------------


def block_occurrences(table: pa.Table, block: int, text_key: str, min_chars: int = 0) -> tuple[pa.Table, Counts]:
    """Every countable line of the block's live documents as a light row (OCCURRENCE_SCHEMA), and
    the counts: ``paragraphs`` (non-blank lines), ``paragraph_bytes`` and ``hashed`` (lines that
    normalise to at least max(1, min_chars) characters)."""
    layout = text_layout(table, text_key)
    counts = dict(paragraphs=0, paragraph_bytes=0, hashed=0)
    if layout == "none":
        return OCCURRENCE_SCHEMA.empty_table(), counts
    rows = live_rows(table)
    bad = malformed_rows(table, text_key, layout, rows)
    rows = [int(r) for r in rows if int(r) not in bad]
    values = table.column(text_key).take(pa.array(rows, pa.int64())).to_pylist()
    ids = table.column(ID_COL).take(pa.array(rows, pa.int64())).to_pylist()
    norm: list[str] = []
    cols: dict[str, list] = {c: [] for c in (ID_COL, "row", "pos", "line", "nbytes")}
    floor = max(1, min_chars)
    for row, doc_id, value in zip(rows, ids, values):
        for pos, text in _texts(value, layout):
            for line_no, line in enumerate(text.split("\n")):
                if not line.strip():
                    continue
                nbytes = len(line.encode("utf-8"))
                counts["paragraphs"] += 1
                counts["paragraph_bytes"] += nbytes
                n = normalize_for_dedup(line)
                if len(n) < floor:
                    continue
                norm.append(n)
                for key, v in ((ID_COL, doc_id), ("row", row), ("pos", pos), ("line", line_no), ("nbytes", nbytes)):
                    cols[key].append(v)
    counts["hashed"] = len(norm)
    occ = pa.table(
        {
            "hash": pa.array(paragraph_hashes(norm), pa.uint64()),
            ID_COL: pa.array(cols[ID_COL], pa.string()),
            "block": pa.array(np.full(len(norm), block, np.int32)),
            **{c: pa.array(cols[c], OCCURRENCE_SCHEMA.field(c).type) for c in ("row", "pos", "line", "nbytes")},
        },
        schema=OCCURRENCE_SCHEMA,
    )
    return occ, counts


# -- step 2: decisions per hash ---------------------------------------------------------------


def concat_pieces(pieces: Sequence[pa.Table], schema: pa.Schema) -> pa.Table:
    """Pieces of one partition as one table (Ray may hand over empty, column-less tables)."""
    full = [p for p in pieces if p is not None and p.num_rows]
    if not full:
        return schema.empty_table()
    return pa.concat_tables([p.select(schema.names).cast(schema) for p in full])


def decide(occ: pa.Table, keep: Keep) -> tuple[pa.Table, Counts]:
    """The occurrences to remove (LOSER_SCHEMA) among ``occ``, which holds every occurrence of its
    hashes; counts ``distinct`` hashes and ``duplicated`` ones (seen twice or more)."""
    n = occ.num_rows
    if n == 0:
        return LOSER_SCHEMA.empty_table(), dict(distinct=0, duplicated=0)
    if keep == "none":
        h = occ.column("hash").to_numpy()
        _, inverse, counts = np.unique(h, return_inverse=True, return_counts=True)
        lose = counts[inverse] >= 2
        stats = dict(distinct=int(len(counts)), duplicated=int((counts >= 2).sum()))
    elif keep == "first":
        order = [(c, "ascending") for c in ("hash", ID_COL, "pos", "line", "block", "row")]
        occ = occ.sort_by(order)
        h = occ.column("hash").to_numpy()
        first = np.ones(n, dtype=bool)
        first[1:] = h[1:] != h[:-1]
        lose = ~first
        repeated = first.copy()
        repeated[:-1] &= ~first[1:]  # a run's head followed by a same-hash row
        repeated[-1] = False
        stats = dict(distinct=int(first.sum()), duplicated=int(repeated.sum()))
    else:
        raise ValueError(f"{OP}: keep must be 'none' or 'first', not {keep!r}")
    return occ.filter(pa.array(lose)).select(list(LOSER_COLUMNS)), stats


# -- step 3: editing a block ------------------------------------------------------------------


def cut_lines(text: str, drop: set[int]) -> str:
    """``text`` without the given ``"\\n"``-lines, the rest joined by ``"\\n"`` (as CCNet does)."""
    return "\n".join(line for i, line in enumerate(text.split("\n")) if i not in drop)


def _put_column(table: pa.Table, name: str, column: pa.Array) -> pa.Table:
    idx = table.schema.get_field_index(name)
    return table.set_column(idx, name, column) if idx >= 0 else table.append_column(name, column)


def _set_values(sub: pa.Table, name: str, values: list) -> pa.Table:
    idx = sub.schema.get_field_index(name)
    return sub.set_column(idx, name, pa.array(values, sub.schema.field(idx).type))


def edit_block(table: pa.Table, losers: pa.Table, text_key: str, node: str) -> tuple[pa.Table, Counts]:
    """Apply the removals of one block (``losers``: its rows of LOSER_SCHEMA).

    A text position left blank is dropped from every parallel list; a document left with no text
    keeps its images, one left with neither leaves as a DUPLICATE tombstone (reason
    ``ccnet_no_text_left``, content unchanged).  Adds ``ccnet_removed_paragraphs`` (null on
    tombstones that arrived as such); rows that arrived as tombstones pass untouched."""
    counts = dict(removed_paragraphs=0, removed_bytes=0, documents_changed=0, documents_dropped=0,
                  positions_dropped=0, malformed=0)
    if table.num_rows == 0:  # an empty block may lack columns altogether
        return _put_column(table, REMOVED_COL, pa.nulls(0, pa.int64())), counts
    layout = text_layout(table, text_key)
    table = ensure_tombstone_columns(table)
    n = table.num_rows
    rows = live_rows(table)
    removed = np.full(n, -1, dtype=np.int64)
    removed[rows] = 0
    bad = malformed_rows(table, text_key, layout, rows) if layout != "none" else {}

    plan: dict[int, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for row, pos, line, nbytes in zip(*(losers.column(c).to_pylist() for c in ("row", "pos", "line", "nbytes"))):
        plan[row][pos].add(line)
        removed[row] += 1
        counts["removed_bytes"] += nbytes
    counts["removed_paragraphs"] = len(losers)
    touched = sorted(plan)
    parts: list[pa.Table] = []
    order: list[int] = []
    kept_rows, dropped_rows = [], []
    if touched:
        sub = table.take(pa.array(touched, pa.int64()))
        new_texts = sub.column(text_key).to_pylist()
        cols = parallel_columns(table, text_key, layout)
        lists = {c: sub.column(c).to_pylist() for c in cols}
        for k, row in enumerate(touched):
            has_text, dropped = _edit_row(k, plan[row], new_texts, lists, layout)
            counts["positions_dropped"] += dropped
            images = lists.get("images", [None] * len(touched))[k]
            if has_text or any(ref is not None for ref in images or []):
                kept_rows.append(k)
            else:
                dropped_rows.append(k)
        if kept_rows:
            edited = sub.take(pa.array(kept_rows, pa.int64()))
            for name, values in ((text_key, new_texts), *lists.items()):
                edited = _set_values(edited, name, [values[k] for k in kept_rows])
            parts.append(edited)
            order += [touched[k] for k in kept_rows]
        if dropped_rows:
            gone = sub.take(pa.array(dropped_rows, pa.int64()))
            details = [json_detail({"removed_paragraphs": int(removed[touched[k]])}) for k in dropped_rows]
            parts.append(with_tombstones(gone, node, TombstoneKind.DUPLICATE, [NO_TEXT_LEFT] * len(details), details))
            order += [touched[k] for k in dropped_rows]
        counts["documents_changed"] = len(kept_rows)
        counts["documents_dropped"] = len(dropped_rows)
    if bad:
        bad_rows = sorted(bad)
        errors = with_tombstones(table.take(pa.array(bad_rows, pa.int64())), node, TombstoneKind.ERROR,
                                 ["ValueError"] * len(bad_rows), [bad[r] for r in bad_rows])
        parts.append(errors)
        order += bad_rows
        removed[bad_rows] = -1
        counts["malformed"] = len(bad_rows)
    if parts:
        rest = np.setdiff1d(np.arange(n), np.asarray(order, dtype=np.int64))
        parts.append(table.take(pa.array(rest, pa.int64())))
        order += rest.tolist()
        table = pa.concat_tables(parts).take(pa.array(np.argsort(np.asarray(order)), pa.int64()))
    return _put_column(table, REMOVED_COL, pa.array(removed, pa.int64(), mask=removed < 0)), counts


def _edit_row(k: int, plan: dict[int, set[int]], texts: list, lists: dict[str, list], layout: Layout) -> tuple[bool, int]:
    """Cut row ``k``'s lines in place (``texts[k]`` and its parallel ``lists``); returns (whether
    any non-blank text is left, positions dropped)."""
    if layout == "plain":
        texts[k] = cut_lines(texts[k], plan[0])
        return bool(texts[k].strip()), 0
    value = list(texts[k])
    keep = [True] * len(value)
    for pos, drop in plan.items():
        value[pos] = cut_lines(value[pos], drop)
        keep[pos] = bool(value[pos].strip())
    texts[k] = [v for v, ok in zip(value, keep) if ok]
    for values in lists.values():
        if values[k] is not None:
            values[k] = [v for v, ok in zip(values[k], keep) if ok]
    return any(t is not None and t.strip() for t in texts[k]), keep.count(False)


# -- the whole dedup without Ray (tests; the op wires the same steps as Ray tasks) -----------------


def route(table: pa.Table, column: str, n: int) -> list[pa.Table]:
    """``n`` tables: each row goes to ``table[column] % n`` (order kept within a table)."""
    if n == 1:
        return [table]
    part = (table.column(column).to_numpy(zero_copy_only=False).astype(np.uint64) % np.uint64(n)).astype(np.int64)
    order = np.argsort(part, kind="stable")
    bounds = np.searchsorted(part[order], np.arange(n + 1))
    grouped = table.take(pa.array(order))
    return [grouped.slice(int(bounds[i]), int(bounds[i + 1] - bounds[i])) for i in range(n)]


def split_group(pieces: Sequence[pa.Table], blocks: Sequence[int]) -> list[pa.Table]:
    """One group's losers (its pieces from every decision partition), cut per block of ``blocks``."""
    losers = concat_pieces(pieces, LOSER_SCHEMA)
    if not losers.num_rows:
        return [losers] * len(blocks)
    block = losers.column("block").to_numpy()
    return [losers.filter(pa.array(block == b)) for b in blocks]


def add_counts(total: Counts, more: Counts) -> Counts:
    for key, value in more.items():
        total[key] = total.get(key, 0) + int(value)
    return total


def dedup_tables(
    tables: Sequence[pa.Table], text_key: str = "texts", keep: Keep = "none", min_chars: int = 0,
    num_partitions: int = 1, node: str = OP,
) -> tuple[list[pa.Table], Counts]:
    """The op's three steps in this process, wired exactly as its Ray tasks are (blocks ->
    ``num_partitions`` hash partitions -> block groups -> blocks)."""
    counts: Counts = {}
    pieces: list[list[pa.Table]] = [[] for _ in range(num_partitions)]
    for b, table in enumerate(tables):
        occ, c = block_occurrences(table, b, text_key, min_chars)
        add_counts(counts, c)
        for q, piece in enumerate(route(occ, "hash", num_partitions)):
            pieces[q].append(piece)
    groups = min(len(tables), num_partitions)
    routed: list[list[pa.Table]] = [[] for _ in range(groups)]
    for q in range(num_partitions):
        losers, c = decide(concat_pieces(pieces[q], OCCURRENCE_SCHEMA), keep)
        add_counts(counts, c)
        for g, piece in enumerate(route(losers, "block", groups)):
            routed[g].append(piece)
    per_block: dict[int, pa.Table] = {}
    for g in range(groups):
        blocks = list(range(g, len(tables), groups))
        per_block.update(zip(blocks, split_group(routed[g], blocks)))
    out = []
    for b, table in enumerate(tables):
        edited, c = edit_block(table, per_block[b], text_key, node)
        add_counts(counts, c)
        out.append(edited)
    return out, counts
