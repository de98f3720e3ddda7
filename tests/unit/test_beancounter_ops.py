"""BeanCounter's filter, copy collapse, token counts and duplicate-token table, without Ray."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.curation.edgar_document_filter import EdgarDocumentFilter, EdgarDocumentFilterParams
from raypress.operators.dedup.dedup_token_report import dedup_table, markdown
from raypress.operators.dedup.exact.by_key import mark_duplicates
from raypress.operators.dedup.key_deduplicator import KEY_COL, LENGTH_COL, add_copy_key
from raypress.schema import alive_mask

ROWS = [  # id, form_type, type_attachment, ts_accept, text
    ("a", "10-K", "10-K", "2024-11-01T16:05:00", "x" * 500),
    ("b", "EX-99.1", "EX-99.1", "2024-11-01T16:05:00", "y" * 50),
    ("c", "10-K405", "10-K405", "1998-03-30T00:00:00", "z" * 500),
    ("d", "GRAPHIC", "GRAPHIC", None, "w" * 500),
    ("e", "8-K", "8-K", "2025-01-10T23:00:00", "v" * 500),
]


def table(rows=ROWS) -> pa.Table:
    cols = list(zip(*rows))
    return pa.table({"id": cols[0], "form_type": cols[1], "type_attachment": cols[2],
                     "ts_accept": pa.array(cols[3], pa.string()), "text": cols[4]})


def reasons(**params) -> list[str | None]:
    op = EdgarDocumentFilter(EdgarDocumentFilterParams(**params))
    return op.drop_reasons(op.compute_stats(table()))


def test_form_and_attachment_globs_dates_and_size():
    assert reasons() == [None] * 5
    assert reasons(form_types=["10-k*", "EX-99*"]) == [None, None, None, "form_type not included",
                                                      "form_type not included"]
    assert reasons(exclude_attachment_types=["graphic"]) == [None, None, None, "type_attachment excluded", None]
    assert reasons(ts_from="2000-01-01") == [None, None, "ts_accept < from", "ts_accept < from", None]
    # a bare date as the upper bound takes its whole day
    assert reasons(ts_to="2025-01-10") == [None, None, None, "ts_accept > to", None]
    assert reasons(ts_to="2024-12-31") == [None, None, None, "ts_accept > to", "ts_accept > to"]
    assert reasons(min_chars=100) == [None, "n_char < min", None, None, None]
    with pytest.raises(ValidationError, match="not an ISO date"):
        EdgarDocumentFilterParams(ts_from="last year")


def test_copies_of_one_accession_and_filename_keep_the_longest():
    t = pa.table({"id": ["s1#1", "s2#1", "s3#1", "s1#2", "s4#1"],
                  "accession": ["0001", "0001", "0001", "0001", None],
                  "filename": ["a.htm", "a.htm", "a.htm", "b.htm", "a.htm"],
                  "text": ["short", "the longest copy", "mid copy", "other", "no accession"]})
    out = mark_duplicates(add_copy_key(t, ["accession", "filename"], "text", longest=True), KEY_COL, "copies",
                          prefer=LENGTH_COL)
    alive = alive_mask(out).to_pylist()
    kept = sorted(i for i, a in zip(out.column("id").to_pylist(), alive) if a)
    assert kept == ["s1#2", "s2#1", "s4#1"]
    assert KEY_COL not in out.column_names and LENGTH_COL not in out.column_names
    dups = {i: (r, json.loads(d)) for i, r, d, a in zip(out.column("id").to_pylist(), out.column("_rp_reason").to_pylist(),
                                                         out.column("_rp_detail").to_pylist(), alive) if not a}
    assert dups == {"s1#1": ("s2#1", {"key": '["0001", "a.htm"]'}), "s3#1": ("s2#1", {"key": '["0001", "a.htm"]'})}
    # a null file name matches another only where null_matches says so (1990s documents have none)
    t3 = pa.table({"id": ["p#1", "q#1"], "accession": ["9", "9"], "filename": [None, None], "text": ["ab", "abc"]})
    for null_matches, kept_ids in (([], ["p#1", "q#1"]), (["filename"], ["q#1"])):
        out3 = mark_duplicates(add_copy_key(t3, ["accession", "filename"], "text", True, null_matches), KEY_COL,
                               "c", prefer=LENGTH_COL)
        alive3 = alive_mask(out3)
        alive3 = [True] * out3.num_rows if alive3 is None else alive3.to_pylist()
        assert sorted(i for i, a in zip(out3.column("id").to_pylist(), alive3) if a) == kept_ids
    # equal lengths: the smallest id stays, whatever the order
    t2 = pa.table({"id": ["z", "m"], "accession": ["1", "1"], "filename": ["f", "f"], "text": ["same", "same"]})
    out2 = mark_duplicates(add_copy_key(t2, ["accession", "filename"], "text", True), KEY_COL, "c", prefer=LENGTH_COL)
    assert [i for i, a in zip(out2.column("id").to_pylist(), alive_mask(out2).to_pylist()) if a] == ["m"]


def test_token_counts_with_the_shipped_gpt_neox_tokenizer():
    pytest.importorskip("tokenizers")
    from raypress.operators.text.token_count_mapper import TokenCountMapper, TokenCountParams

    op = TokenCountMapper(TokenCountParams())
    out = op.process_batch(pa.table({"id": ["1", "2", "3"], "text": ["Hello world", None, "Net sales rose 2%."]}))
    n_token = out.column("n_token").to_pylist()
    # GPT-NeoX-20B: "Hello", " world" / "Net", " sales", " rose", " ", "2", "%." (its merges)
    ids = op.tokenizer.encode("Net sales rose 2%.", add_special_tokens=False).ids
    assert n_token == [2, 0, len(ids)] and op.tokenizer.get_vocab_size() >= 50254
    assert out.column("n_char").to_pylist() == [11, 0, 18]


def test_duplicate_token_table_against_hand_counts():
    before = {"10-K": (4, 1000), "8-K": (10, 400)}
    exact = {"10-K": (3, 900), "8-K": (6, 300)}
    near = {"10-K": (3, 900), "8-K": (5, 250)}
    rows = {r["group"]: r for r in dedup_table(before, exact, near)}
    assert rows["10-K"]["exact_dup_tokens"] == 100 and rows["10-K"]["exact_dup_share"] == pytest.approx(0.10)
    assert rows["8-K"]["near_dup_tokens"] == 50 and rows["8-K"]["near_dup_share"] == pytest.approx(50 / 400)
    assert rows["8-K"]["dup_share"] == pytest.approx(150 / 400) and rows["8-K"]["exact_dup_documents"] == 4
    assert rows["all"]["tokens"] == 1400 and rows["all"]["dup_share"] == pytest.approx(250 / 1400)
    md = markdown(dedup_table(before, exact, near), top=10, group_key="form_type")
    assert md.splitlines()[0].startswith("| form_type | documents | tokens |") and "| 8-K | 10 | 400 | 100 | 25.00 |" in md
