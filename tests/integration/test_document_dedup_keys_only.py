"""document_deduplicator's keys-only path (only id + md5 shuffled) equals the full-row path."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pytest

from raypress.operators.base import RunContext
from raypress.operators.dedup.document_deduplicator import (
    HASH_COL,
    DocumentDeduplicator,
    DocumentDedupParams,
    dedup_full_rows,
    duplicate_decisions,
    key_table,
)
from raypress.schema import ID_COL, KIND_COL, NODE_COL, REASON_COL, TombstoneKind

pytestmark = pytest.mark.integration

WORDS = ("the river bank opened early on monday while seven clerks counted coins and a dog "
         "slept near the warm stove reading old letters about rain trains and apples").split()


def _sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(6, 18))]
    return " ".join(words).capitalize() + rng.choice([".", "!", "?"])


def _variant(rng: random.Random, text: str) -> str:
    """The same text up to case, whitespace, digits or ASCII punctuation (or exactly the same)."""
    return rng.choice([
        lambda t: t,
        lambda t: f"  {t}\n",
        lambda t: t.upper(),
        lambda t: t.lower(),
        lambda t: t.replace(" ", "  ").replace(".", "!"),
        lambda t: t.replace(" ", ", ") + " 42",
        lambda t: t.swapcase().replace(" ", "\t"),
    ])(text)


def _rows(seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    rows: list[dict] = []

    def add(text, row_id=None, tomb=None):
        rows.append({
            "id": row_id or f"doc-{len(rows):04d}", "text": text, "n": len(rows),
            "_rp_node": tomb and "earlier", "_rp_kind": tomb and TombstoneKind.FILTERED.value,
            "_rp_reason": tomb, "_rp_detail": None,
        })

    originals = [_sentence(rng) for _ in range(150)]
    for text in originals:
        add(text)
    for _ in range(120):  # planted duplicates: exact, case and punctuation variants
        add(_variant(rng, rng.choice(originals)))
    for _ in range(8):  # null texts
        add(None)
    for _ in range(12):  # earlier tombstones, some with the texts of live rows: never compared
        add(rng.choice(originals) if rng.random() < 0.7 else None, tomb="too_short")
    # ids shared across files with different texts: the same id kept in one group, a duplicate
    # in another, unique in a third
    add(originals[3], row_id="doc-0000")
    add(_sentence(rng), row_id="doc-0000")
    add(f" {originals[5]} ", row_id="doc-0100")  # doc-0100 is kept for originals[100]
    add(None, row_id="doc-0002")
    add(originals[9], row_id="aaa-first")  # smaller than every doc-* id: kept for originals[9]
    rng.shuffle(rows)
    return rows


def _events() -> tuple[list[dict], RunContext]:
    events: list[dict] = []
    return events, RunContext(run_dir="/tmp", node_id="dedup", emit=events.append)


def _canon(ds) -> list[str]:
    """Rows as sorted JSON: ids are not unique, so compare the multiset of whole rows."""
    return sorted(json.dumps(r, sort_keys=True) for r in ds.take_all())


def _both(rows, blocks: int, partitions: int, **flags):
    import ray

    ds = ray.data.from_items(rows, override_num_blocks=blocks).materialize()
    events, ctx = _events()
    op = DocumentDeduplicator(DocumentDedupParams(num_partitions=partitions, **flags))
    new = _canon(op.apply(ds, ctx))
    old = _canon(dedup_full_rows(ds, text_key="text", node="dedup", num_partitions=partitions,
                                 lowercase=flags.get("lowercase", False),
                                 ignore_non_character=flags.get("ignore_non_character", False)))
    return new, old, events


@pytest.mark.parametrize("flags,partitions", [
    (dict(), 3),
    (dict(lowercase=True, ignore_non_character=True), 1),
])
def test_keys_only_equals_full_rows(ray_session, flags, partitions):
    new, old, events = _both(_rows(), 4, partitions, **flags)
    assert not [e for e in events if e["event"] == "document_dedup_fallback"]
    assert new == old
    rows = [json.loads(r) for r in new]
    kinds = [r[KIND_COL] for r in rows if r[NODE_COL] == "dedup"]
    assert kinds.count(TombstoneKind.DUPLICATE.value) > 20  # the planted duplicates were found
    assert kinds.count(TombstoneKind.ERROR.value) == 9
    assert sum(r[NODE_COL] == "earlier" for r in rows) == 12
    # the shared id is kept for one text and a duplicate for another
    shared = {r["text"]: r for r in rows if r["id"] == "doc-0100"}
    assert len(shared) == 2 and any(r[NODE_COL] is None for r in shared.values())
    assert any(r[KIND_COL] == TombstoneKind.DUPLICATE.value for r in shared.values())


def test_shared_id_and_text_falls_back_to_full_rows(ray_session):
    rows = _rows(11)
    twin = next(r for r in rows if r["text"] and r["_rp_node"] is None)
    rows.append({**twin, "n": -1})  # same id, same text: winner and duplicate share (id, md5)
    new, old, events = _both(rows, 3, 2)
    assert [e["ambiguous"] for e in events if e["event"] == "document_dedup_fallback"] == [1]
    assert new == old


def test_repeated_pair_among_duplicates_needs_no_fallback(ray_session):
    rows = [{"id": i, "text": "same text", "n": k} for k, i in enumerate(["b", "a", "b", "c"])]
    rows.append({"id": "b", "text": "other", "n": 9})
    new, old, events = _both(rows, 2, 1)
    assert not events
    assert new == old
    out = [json.loads(r) for r in new]
    dups = sorted((r["id"], r[REASON_COL]) for r in out if r[NODE_COL])
    assert dups == [("b", "a"), ("b", "a"), ("c", "a")]


def test_shuffle_input_is_only_id_and_md5():
    table = pa.table({
        "id": ["x", "y", "z", "w"], "text": ["One", "one", None, "two"], "meta": [1, 2, 3, 4],
        "_rp_node": [None, None, None, "f"], "_rp_kind": [None, None, None, "filtered"],
        "_rp_reason": [None, None, None, "r"], "_rp_detail": [None, None, None, None],
    })
    keys = key_table(table, "text", lowercase=True)
    assert keys.schema.names == [ID_COL, HASH_COL]
    assert keys.schema.field(HASH_COL).type == pa.binary(16)
    assert keys.column(ID_COL).to_pylist() == ["x", "y"]  # no null text, no tombstone
    decisions = duplicate_decisions(keys)
    decisions = decisions.drop_columns(["_rp_id_hash"]).to_pylist()
    assert decisions == [{"id": "y", HASH_COL: keys.column(HASH_COL)[0].as_py(), "_rp_kept": "x"}]


def test_mark_pass_indexes_the_decisions_once_per_process(ray_session):
    import ray

    from raypress.operators.dedup.document_deduplicator import (
        MarkDuplicates,
        cached_decision_tokens,
        text_md5,
    )

    decisions = duplicate_decisions(key_table(pa.table({"id": ["b", "a"], "text": ["t", " t"]}), "text"))
    mark = MarkDuplicates([ray.put(decisions)], "text", False, False, "dedup")
    batch = pa.table({"id": ["a", "b", "b", "c"], "text": ["t", "t", "other", None]})
    out = mark(batch).to_pylist()
    assert mark.token in cached_decision_tokens()
    assert [r["id"] for r in out] == ["a", "b", "b", "c"]  # the batch's order is kept
    assert [r[KIND_COL] for r in out] == [None, "duplicate", None, "error"]
    assert out[1][REASON_COL] == "a" and json.loads(out[1]["_rp_detail"]) == {"md5": text_md5("t").hex()}
    assert mark(batch).to_pylist() == out and cached_decision_tokens().count(mark.token) == 1
