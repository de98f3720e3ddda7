"""ccnet_paragraph_dedup without Ray: CCNet's normaliser and hash, the keep rules, document edits,
tombstones, and a result that does not depend on blocks, row order or partitions."""

from __future__ import annotations

import hashlib
import json
import random

import pyarrow as pa
import pytest

from raypress.operators.dedup.ccnet_paragraph_dedup import CcnetParagraphDedup, CcnetParagraphDedupParams
from raypress.operators.dedup.ccnet.paragraphs import (
    NO_TEXT_LEFT,
    OCCURRENCE_SCHEMA,
    REMOVED_COL,
    UNICODE_PUNCT,
    block_occurrences,
    cut_lines,
    decide,
    dedup_tables,
    normalize_for_dedup,
    paragraph_hashes,
)
from raypress.operators.shared.documents import Document, documents_to_table
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL, TombstoneKind, with_tombstones


def _doc(doc_id: str, *chunks: str | tuple[str, bytes]) -> Document:
    """A document from text chunks and (url, bytes) images, in order."""
    d = Document(doc_id, f"https://example.org/{doc_id}", "html")
    for chunk in chunks:
        if isinstance(chunk, tuple):
            d.add_image(chunk[0], chunk[1], {"sha256": hashlib.sha256(chunk[1]).hexdigest()})
        else:
            d.add_text(chunk)
    return d


def _run(docs: list[Document] | pa.Table, **kwargs) -> tuple[dict[str, dict], dict[str, int]]:
    table = docs if isinstance(docs, pa.Table) else documents_to_table(docs)
    out, counts = dedup_tables([table], **kwargs)
    return {r["id"]: r for r in out[0].to_pylist()}, counts


# -- CCNet's normaliser and hash --------------------------------------------------------------


def test_normalize_for_dedup_matches_ccnets_own_test_case():
    # cc_net tests/test_normalizer.py::test_normalize_for_dedup
    assert normalize_for_dedup("０２３´∶：\x10 | ;012 hèllo") == "000 | ;000 hèllo"


def test_the_deleted_punctuation_is_ccnets_unicode_punct_table():
    # cc_net tests/test_normalizer.py::test_unicode_punct's string, plus the table's last key
    weird = "，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％"
    assert UNICODE_PUNCT == weird + "►"
    assert normalize_for_dedup("a" + weird.replace("１", "") + "►b") == "ab"
    assert normalize_for_dedup("１") == "0"  # a digit first: digits are replaced before punctuation goes


def test_normalize_keeps_ascii_punctuation_accents_and_inner_spaces():
    assert normalize_for_dedup("  Hello,   WORLD! Ça 2024\t ") == "hello,   world! ça 0000"
    assert normalize_for_dedup("a\tb\x85c") == "abc"  # control characters inside a line go
    assert normalize_for_dedup(" \t ") == ""


def test_hash_is_the_first_eight_bytes_of_sha1_little_endian():
    # sha1(b"hello") = aaf4c61ddcc5e8a2...: CCNet's str_hash reads those 8 bytes as a native uint64
    assert paragraph_hashes(["hello"]).tolist() == [0xA2E8C5DC1DC6F4AA]
    assert paragraph_hashes([]).tolist() == []


def test_cut_lines_joins_the_rest_with_newlines():
    assert cut_lines("a\nb\nc", {1}) == "a\nc"
    assert cut_lines("a\nb\nc", {0, 2}) == "b"


# -- CCNet's own dedup test cases (tests/test_dedup.py) -----------------------------------------------


def _plain(rows: list[tuple[str, list[str]]]) -> pa.Table:
    return pa.table({"id": [r[0] for r in rows], "text": ["\n".join(lines) for _, lines in rows]})


def test_ccnet_simple_dedup_keeps_the_first_occurrence_with_keep_first():
    table = _plain([("a", ["_Hello", "_World", "I'm so original"]), ("b", ["_world", "I'm originaler", "_Hello"])])
    rows, counts = _run(table, text_key="text", keep="first")
    assert rows["a"]["text"] == "_Hello\n_World\nI'm so original"  # first document untouched
    assert rows["b"]["text"] == "I'm originaler"
    assert rows["b"][REMOVED_COL] == 2 and rows["a"][REMOVED_COL] == 0
    assert counts["removed_paragraphs"] == 2 and counts["removed_bytes"] == len("_world") + len("_Hello")


def test_ccnet_two_pass_dedup_removes_every_occurrence_with_keep_none():
    # test_dedup_fast: "_World" is in both parts and leaves both
    table = _plain([("p0", ["Hello", "_World", "I'm so original"]), ("p1", ["Good morning", "_World", "I'm originaler"])])
    rows, counts = _run(table, text_key="text")
    assert rows["p0"]["text"] == "Hello\nI'm so original"
    assert rows["p1"]["text"] == "Good morning\nI'm originaler"
    assert counts["duplicated"] == 1 and counts["distinct"] == 5 and counts["paragraphs"] == 6


# -- the keep rules on interleaved documents ----------------------------------------------------


def test_same_paragraph_in_two_documents_is_removed_from_the_larger_id():
    docs = [_doc("b", "Shared line.\nOnly in b."), _doc("a", "Intro of a.\nSHARED LINE.")]
    rows, _ = _run(docs, keep="first")
    assert rows["a"]["texts"] == ["Intro of a.\nSHARED LINE."]
    assert rows["b"]["texts"] == ["Only in b."]
    none, _ = _run(docs, keep="none")
    assert none["a"]["texts"] == ["Intro of a."] and none["b"]["texts"] == ["Only in b."]


def test_repeats_within_one_document():
    docs = [_doc("a", "Subscribe now\nbody one", ("https://x/1.png", b"1"), "subscribe NOW\nbody two")]
    first, _ = _run(docs, keep="first")
    assert first["a"]["texts"] == ["Subscribe now\nbody one", None, "body two"]
    none, counts = _run(docs, keep="none")
    assert none["a"]["texts"] == ["body one", None, "body two"]
    assert none["a"][REMOVED_COL] == 2 and counts["documents_changed"] == 1


def test_digits_and_case_do_not_make_a_line_new():
    docs = [_doc("a", "Posted on 2023-01-05 by admin"), _doc("b", "POSTED ON 1999-12-31 BY ADMIN\nreal text")]
    rows, _ = _run(docs, keep="first")
    assert rows["b"]["texts"] == ["real text"]


def test_a_position_left_blank_is_dropped_from_every_parallel_list():
    docs = [
        _doc("a", "Cookie banner", ("https://x/a.png", b"A"), "article a"),
        _doc("b", "Cookie banner", ("https://x/b.png", b"B"), "article b"),
    ]
    rows, counts = _run(docs)
    for doc_id in ("a", "b"):
        row = rows[doc_id]
        assert row["texts"] == [None, f"article {doc_id}"]
        assert row["images"] == [f"https://x/{doc_id}.png", None]
        assert row["image_bytes"] == [doc_id.upper().encode(), None]
        assert row["image_metadata"][0]["sha256"] == hashlib.sha256(doc_id.upper().encode()).hexdigest()
        assert row["image_metadata"][1] is None
    assert counts["positions_dropped"] == 2


def test_a_document_left_without_text_keeps_its_images_and_one_without_either_is_a_tombstone():
    docs = [
        _doc("a", "boilerplate\nmore boilerplate", "unique a"),
        _doc("b", "Boilerplate", ("https://x/b.png", b"B"), "more boilerplate"),
        _doc("c", "boilerplate\n\nmore boilerplate"),
    ]
    rows, counts = _run(docs)
    assert rows["a"]["texts"] == ["unique a"] and rows["a"][NODE_COL] is None
    assert rows["b"]["texts"] == [None] and rows["b"]["images"] == ["https://x/b.png"]
    assert rows["b"][NODE_COL] is None
    c = rows["c"]
    assert c[KIND_COL] == TombstoneKind.DUPLICATE.value and c[REASON_COL] == NO_TEXT_LEFT
    assert c[NODE_COL] == "ccnet_paragraph_dedup"
    assert c["texts"] == ["boilerplate\n\nmore boilerplate"]  # a tombstone keeps its content
    assert json.loads(c[DETAIL_COL]) == {"removed_paragraphs": 2}
    assert counts["documents_dropped"] == 1 and counts["documents_changed"] == 2


def test_blank_lines_are_never_removed_and_min_chars_exempts_short_lines():
    docs = [_doc("a", "Home\n\nA long shared sentence here.\n\nmine"), _doc("b", "home\n\na long shared sentence here.")]
    rows, counts = _run(docs, min_chars=5)
    assert rows["a"]["texts"] == ["Home\n\n\nmine"]
    assert rows["b"]["texts"] == ["home\n"]
    assert counts["paragraphs"] == 5 and counts["hashed"] == 2
    rows, _ = _run(docs)
    assert rows["a"]["texts"] == ["\n\nmine"]  # "home" goes too: 4 characters
    assert rows["b"][REASON_COL] == NO_TEXT_LEFT  # only a blank line was left


def test_a_plain_text_row_losing_all_its_lines_is_a_tombstone():
    table = pa.table({"id": ["x", "y", "z"], "text": ["same\nsame", "keep me", None]})
    rows, _ = _run(table, text_key="text")
    assert rows["x"][REASON_COL] == NO_TEXT_LEFT and rows["x"]["text"] == "same\nsame"
    assert rows["y"]["text"] == "keep me" and rows["z"]["text"] is None
    assert rows["z"][NODE_COL] is None and rows["z"][REMOVED_COL] == 0


# -- tombstones, bad input ---------------------------------------------------------------------


def test_tombstones_pass_through_untouched_and_are_not_counted():
    live = documents_to_table([_doc("b", "Shared line\nb's own"), _doc("c", "shared line\nc's own")])
    dead = with_tombstones(documents_to_table([_doc("a", "Shared line")]), "upstream", TombstoneKind.FILTERED,
                           ["too short"], ["{}"])
    table = pa.concat_tables([dead, live], promote_options="default")
    rows, counts = _run(table, keep="first")
    assert rows["a"]["texts"] == ["Shared line"] and rows["a"][NODE_COL] == "upstream"
    assert rows["a"][REASON_COL] == "too short" and rows["a"][REMOVED_COL] is None
    assert rows["b"]["texts"] == ["Shared line\nb's own"]  # a, the smallest id, is dead: b wins
    assert rows["c"]["texts"] == ["c's own"]
    assert counts["paragraphs"] == 4
    only_dead, counts = _run(dead)
    assert only_dead["a"]["texts"] == ["Shared line"] and counts["paragraphs"] == 0


def test_parallel_lists_of_another_length_quarantine_the_row_naming_it():
    table = documents_to_table([_doc("ok", "fine"), _doc("bad", "text", ("https://x/1.png", b"1"))])
    images = table.column("images").to_pylist()
    images[1] = images[1][:1]
    table = table.set_column(table.schema.get_field_index("images"), "images", pa.array(images, pa.list_(pa.string())))
    rows, counts = _run(table)
    assert rows["bad"][KIND_COL] == TombstoneKind.ERROR.value
    assert "'bad'" in rows["bad"][DETAIL_COL] and "ccnet_paragraph_dedup" in rows["bad"][DETAIL_COL]
    assert rows["ok"][NODE_COL] is None and counts["malformed"] == 1 and counts["paragraphs"] == 1


def test_a_column_that_is_not_text_is_an_error_naming_it():
    with pytest.raises(ValueError, match="'n' is int64"):
        block_occurrences(pa.table({"id": ["a"], "n": [1]}), 0, "n")
    with pytest.raises(ValueError, match="no column 'texts'"):
        block_occurrences(pa.table({"id": ["a"], "text": ["x"]}), 0, "texts")
    empty, counts = block_occurrences(pa.table({}), 0, "texts")  # an empty, column-less block
    assert empty.num_rows == 0 and counts["paragraphs"] == 0


def test_decide_counts_and_keep_first_order():
    occ = pa.table({"hash": pa.array([7, 7, 9, 7], pa.uint64()), "id": ["b", "a", "c", "a"],
                    "block": pa.array([0, 1, 0, 1], pa.int32()), "row": pa.array([0, 0, 1, 0], pa.int32()),
                    "pos": pa.array([0, 2, 0, 0], pa.int32()), "line": pa.array([0, 0, 0, 3], pa.int32()),
                    "nbytes": pa.array([1, 2, 3, 4], pa.int64())}, schema=OCCURRENCE_SCHEMA)
    losers, counts = decide(occ, "first")
    assert counts == {"distinct": 2, "duplicated": 1}
    assert sorted(losers.column("nbytes").to_pylist()) == [1, 2]  # ("a", pos 0, line 3) wins
    losers, counts = decide(occ, "none")
    assert sorted(losers.column("nbytes").to_pylist()) == [1, 2, 4] and counts["duplicated"] == 1


# -- determinism ----------------------------------------------------------------------------------------


def _corpus(seed: int = 3) -> list[Document]:
    rng = random.Random(seed)
    boiler = ["Share this page", "Cookie settings", "All rights reserved 2024", "Read more »", "Subscribe"]
    docs = []
    for i in range(60):
        chunks: list = []
        for _ in range(rng.randint(1, 3)):
            lines = [rng.choice(boiler) if rng.random() < 0.4 else f"line {rng.randint(0, 40)} of topic {i % 7}"
                     for _ in range(rng.randint(1, 4))]
            chunks.append("\n".join(lines))
            if rng.random() < 0.3:
                chunks.append((f"https://x/{i}-{len(chunks)}.png", bytes([i, len(chunks)])))
        docs.append(_doc(f"d{i:03d}", *chunks))
    return docs


@pytest.mark.parametrize("keep", ["none", "first"])
def test_result_is_independent_of_blocks_row_order_and_partitions(keep):
    table = documents_to_table(_corpus())
    reference, ref_counts = _run(table, keep=keep)
    assert ref_counts["removed_paragraphs"] > 0 and ref_counts["documents_changed"] > 0
    for seed, blocks, parts in ((1, 3, 2), (2, 7, 5), (3, 1, 4), (4, 60, 3)):
        rows = list(range(table.num_rows))
        random.Random(seed).shuffle(rows)
        shuffled = table.take(pa.array(rows))
        step = -(-shuffled.num_rows // blocks)
        out, counts = dedup_tables([shuffled.slice(i, step) for i in range(0, shuffled.num_rows, step)],
                                   keep=keep, num_partitions=parts)
        got = {r["id"]: r for t in out for r in t.to_pylist()}
        assert got == reference and counts == ref_counts


def test_op_declares_what_it_reads_and_writes():
    op = CcnetParagraphDedup(CcnetParagraphDedupParams())
    assert op.columns_read() == ("id", "texts")
    assert op.columns_written() == ("texts", "images", "image_bytes", "image_metadata", REMOVED_COL)
    plain = CcnetParagraphDedup(CcnetParagraphDedupParams(text_key="text"))
    assert plain.columns_written() == ("text", REMOVED_COL)
    with pytest.raises(ValueError):
        CcnetParagraphDedupParams(keep="last")
