"""document_deduplicator without Ray: Data-Juicer's normalization and the per-partition marking."""

from __future__ import annotations

import hashlib
import json

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.dedup.document_deduplicator import (
    HASH_COL,
    DocumentDeduplicator,
    DocumentDedupParams,
    add_text_hash,
    normalize_text,
    text_md5,
)
from raypress.operators.dedup.exact.by_key import mark_duplicates
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL, TombstoneKind


# --- normalization (Data-Juicer's DocumentDeduplicator.compute_hash) -------------------------


def test_default_only_strips_surrounding_whitespace():
    assert normalize_text("  Hello, World!\n") == "Hello, World!"
    assert normalize_text("Hello,  World!") != normalize_text("hello, world!")


def test_lowercase():
    assert normalize_text("Hello WORLD", lowercase=True) == "hello world"
    assert normalize_text("Hello WORLD", lowercase=False) == "Hello WORLD"


def test_ignore_non_character_removes_whitespace_digits_and_ascii_punctuation():
    text = "Hello,\tWorld! 42 times (really?) -- a_b"
    assert normalize_text(text, ignore_non_character=True) == "HelloWorldtimesreallyab"


def test_ignore_non_character_is_unicode_aware_for_space_and_digits_only():
    # ideographic space and Arabic-Indic digits go; letters with accents and the em dash
    # (not ASCII punctuation) stay, as in Data-Juicer
    assert normalize_text("café\u3000٣٤ naïve—x", ignore_non_character=True) == "cafénaïve—x"


def test_both_flags_make_case_and_punctuation_variants_equal():
    a, b = "The quick, brown fox.", "the QUICK brown fox"
    assert text_md5(a) != text_md5(b)
    assert text_md5(a, lowercase=True) != text_md5(b, lowercase=True)
    assert text_md5(a, ignore_non_character=True) != text_md5(b, ignore_non_character=True)
    assert text_md5(a, True, True) == text_md5(b, True, True)


def test_hash_is_md5_of_the_normalized_utf8_text():
    assert text_md5(" abc ").hex() == "900150983cd24fb0d6963f7d28e17f72"
    assert text_md5("Ünï", lowercase=True) == hashlib.md5("ünï".encode()).digest()


def test_params_are_data_juicer_names_with_defaults_off():
    p = DocumentDedupParams()
    assert (p.text_key, p.lowercase, p.ignore_non_character) == ("text", False, False)
    assert DocumentDeduplicator.name == "document_deduplicator"
    with pytest.raises(ValidationError):
        DocumentDedupParams(lowercase=True, ignore_punctuation=True)


# --- hashing a batch ------------------------------------------------------------------------


def test_null_text_becomes_an_error_tombstone_not_a_crash():
    table = pa.table({"id": ["a", "b"], "text": ["x", None]})
    out = add_text_hash(table, "text", False, False, "dd")
    rows = {r["id"]: r for r in out.to_pylist()}
    assert rows["a"][NODE_COL] is None and rows["a"][HASH_COL] == text_md5("x")
    assert rows["b"][KIND_COL] == TombstoneKind.ERROR.value
    assert rows["b"][NODE_COL] == "dd" and "null" in rows["b"][DETAIL_COL]
    assert out.schema.field(HASH_COL).type == pa.binary(16)


# --- marking one partition ------------------------------------------------------------------


def _partition(rows: list[dict]) -> pa.Table:
    table = pa.Table.from_pylist(rows)
    return add_text_hash(table, "text", True, False, "dd")


def test_each_group_keeps_its_smallest_id_and_duplicates_name_it():
    table = _partition(
        [
            {"id": "c", "text": "Same"},
            {"id": "a", "text": "same"},
            {"id": "b", "text": "SAME "},
            {"id": "z", "text": "other"},
            {"id": "y", "text": "Other"},
            {"id": "u", "text": "unique"},
        ]
    )
    out = mark_duplicates(table, HASH_COL, "dd", detail_key="md5")
    rows = {r["id"]: r for r in out.to_pylist()}
    assert HASH_COL not in out.column_names and len(rows) == 6
    assert {i for i, r in rows.items() if r[NODE_COL] is None} == {"a", "y", "u"}
    assert {i: r[REASON_COL] for i, r in rows.items() if r[NODE_COL]} == {
        "b": "a",
        "c": "a",
        "z": "y",
    }
    assert rows["c"][KIND_COL] == TombstoneKind.DUPLICATE.value
    assert json.loads(rows["c"][DETAIL_COL]) == {"md5": text_md5("same").hex()}


def test_all_unique_rows_stay_live_with_null_tombstone_columns():
    table = _partition([{"id": "a", "text": "x"}, {"id": "b", "text": "y"}])
    out = mark_duplicates(table, HASH_COL, "dd")
    assert out.column(NODE_COL).null_count == 2 and out.num_rows == 2


def test_existing_tombstones_pass_through_and_never_win_a_group():
    table = pa.table(
        {
            "id": ["a", "b", "c"],
            "text": ["same", "same", "same"],
            NODE_COL: ["earlier_filter", None, None],
            KIND_COL: ["filtered", None, None],
            REASON_COL: ["too short", None, None],
            DETAIL_COL: [None, None, None],
        }
    )
    out = mark_duplicates(add_text_hash(table, "text", False, False, "dd"), HASH_COL, "dd")
    rows = {r["id"]: r for r in out.to_pylist()}
    assert rows["a"][NODE_COL] == "earlier_filter" and rows["a"][REASON_COL] == "too short"
    assert rows["b"][NODE_COL] is None
    assert rows["c"][REASON_COL] == "b"
