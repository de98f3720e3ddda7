"""Data-Juicer's ray_document_deduplicator on raypress's document_deduplicator.

Data-Juicer's own cases (tests/ops/deduplicator/test_ray_document_deduplicator.py at c07c2d7), its
Ray variant's rules for missing and empty texts (``RayBasicDeduplicator.EMPTY_HASH_VALUE``) and
its ``backend`` / ``redis_address`` params, and real text (paragraphs of /usr/share/doc's copyright
files, many shared between packages) against Data-Juicer's hash computed independently here.
Without Ray: the full-row path on one table (the keys-only path equals it, see
test_document_dedup_keys_only.py); one small run on the shared Ray session goes through ``apply``.
``ray_basic_deduplicator`` is only a base class in Data-Juicer (never registered), and not an op
here either.
"""

from __future__ import annotations

import hashlib
import json
import string
from pathlib import Path

import pyarrow as pa
import pytest
import regex
from pydantic import ValidationError

from raypress.operators.base import RunContext
from raypress.operators.dedup.document_deduplicator import HASH_COL, DocumentDeduplicator, add_text_hash
from raypress.operators.dedup.exact.by_key import mark_duplicates
from raypress.operators.dedup.ray_document_deduplicator import (
    EMPTY_COL,
    EMPTY_TEXT,
    RayDocumentDeduplicator,
    mark_empty_texts,
    restore_empty_texts,
)
from raypress.operators.registry import get_op
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL

DOC = Path("/usr/share/doc")


def dj_hash(text, lowercase=False, ignore_non_character=False) -> str:
    """Data-Juicer's RayDocumentDeduplicator.calculate_hash, written out."""
    if not text:
        return "EMPTY"
    if lowercase:
        text = text.lower()
    if ignore_non_character:
        text = regex.sub(f"\\s+|\\d+|[{regex.escape(string.punctuation)}]", "", text)
    return hashlib.md5(text.strip().encode("utf-8")).hexdigest()


def expected_kept(texts: list, **flags) -> set[int]:
    """Indices Data-Juicer keeps, one per hash; raypress keeps the smallest id (here: index)."""
    first: dict[str, int] = {}
    for i, text in enumerate(texts):
        first.setdefault(dj_hash(text, **flags), i)
    return set(first.values())


def table_of(texts: list) -> pa.Table:
    return pa.table({"id": [f"{i:04d}" for i in range(len(texts))], "text": pa.array(texts, pa.string())})


def dedup_locally(texts: list, **flags) -> list[dict]:
    """ray_document_deduplicator's full-row path on one table, without Ray."""
    marked = mark_empty_texts(table_of(texts), "text")
    hashed = add_text_hash(marked, "text", flags.get("lowercase", False), flags.get("ignore_non_character", False),
                           "dedup")
    return restore_empty_texts(mark_duplicates(hashed, HASH_COL, "dedup", detail_key="md5"), "text").to_pylist()


def kept_indices(rows: list[dict]) -> set[int]:
    return {int(r["id"]) for r in rows if r[NODE_COL] is None}


ENGLISH = ["Today is Sunday and it's a happy day!", "Do you need a cup of coffee?",
           "Today is sunday and it's a happy day!", "This paper proposed a novel method on LLM pretraining.",
           "This paper proposed a novel method on LLM pretraining."]
CHINESE = ["你好，请问你是谁", "欢迎来到阿里巴巴！",
           "第九届会议\n2003年7月28日至8月8日\n牙买加金斯敦\n为来自发展中国家的法律和技术委员会以及财务委员会成员\n"
           "参加委员会会议支付费用的方式\n1.",
           "第九届会议\n2003年7月28日至8月8日\n牙买加金斯敦\n为来自发展中国家的法律和技术委员会以及财务委员会成员\n"
           "参加委员会会议支付费用的方式\n1.",
           "第九届会议\n时间：2003年7月28日至8月8日\n牙买加金斯敦\n为来自发展中国家的法律和技术委员会以及财务委员会成员\n"
           "参加委员会会议支付费用的方式\n1."]
EMPTIES = [None, "", "  ", "x", "", None, "\n", "123", "X"]


def test_registered_under_the_ray_name_with_data_juicers_params():
    cls = get_op("ray_document_deduplicator")
    assert cls is RayDocumentDeduplicator and issubclass(cls, DocumentDeduplicator)
    assert get_op("document_deduplicator") is DocumentDeduplicator  # the first name is untouched
    p = cls.Params()
    assert (p.backend, p.redis_address, p.lowercase, p.ignore_non_character, p.text_key) == (
        "ray_actor", "redis://localhost:6379", False, False, "text")
    assert cls.Params(backend="redis", redis_address="redis://10.0.0.1:6379").backend == "redis"
    with pytest.raises(ValidationError):  # Data-Juicer: ValueError("Unknown backend")
        cls.Params(backend="memcached")


def test_ray_basic_deduplicator_is_a_base_class_not_an_op():
    assert get_op("ray_basic_deduplicator") is None


@pytest.mark.parametrize("texts, kept", [(ENGLISH, {0, 1, 2, 3}), (CHINESE, {0, 1, 2, 4})])
def test_data_juicer_cases(texts, kept):
    rows = dedup_locally(texts)
    assert kept_indices(rows) == kept == expected_kept(texts)
    dup = next(r for r in rows if r[NODE_COL] is not None)
    assert dup[KIND_COL] == "duplicate" and json.loads(dup[DETAIL_COL]) == {"md5": dj_hash(dup["text"])}


@pytest.mark.parametrize("flags", [{}, {"lowercase": True}, {"ignore_non_character": True},
                                   {"lowercase": True, "ignore_non_character": True}])
def test_missing_and_empty_texts_are_one_group_apart_from_blank_ones(flags):
    rows = dedup_locally(EMPTIES, **flags)
    assert kept_indices(rows) == expected_kept(EMPTIES, **flags)
    by_id = {int(r["id"]): r for r in rows}
    assert [by_id[i]["text"] for i in range(len(EMPTIES))] == EMPTIES  # every text as it came
    assert by_id[4][REASON_COL] == by_id[5][REASON_COL] == "0000"  # "" and null: the EMPTY group, kept None
    assert json.loads(by_id[4][DETAIL_COL]) == {"md5": "EMPTY"}
    assert by_id[6][REASON_COL] == "0002" and json.loads(by_id[6][DETAIL_COL]) == {"md5": dj_hash("\n")}
    assert EMPTY_COL not in rows[0]


def test_marking_round_trips_and_a_missing_text_column_is_all_empty():
    table = table_of(EMPTIES)
    marked = mark_empty_texts(table, "text")
    assert marked.column("text").to_pylist().count(EMPTY_TEXT) == 4
    assert restore_empty_texts(marked, "text").equals(table)
    no_text = pa.table({"id": ["a", "b"]})
    marked = mark_empty_texts(no_text, "text")
    rows = mark_duplicates(add_text_hash(marked, "text", False, False, "n"), HASH_COL, "n", detail_key="md5")
    out = restore_empty_texts(rows, "text")
    assert "text" not in out.column_names and EMPTY_COL not in out.column_names
    assert sorted((r["id"], r[REASON_COL]) for r in out.to_pylist()) == [("a", None), ("b", "a")]


def copyright_paragraphs(limit: int = 400) -> list[str]:
    if not DOC.is_dir():
        pytest.skip("no /usr/share/doc on this machine")
    paragraphs: list[str] = []
    for path in sorted(DOC.glob("*/copyright")):
        text = path.read_text(encoding="utf-8", errors="replace")
        paragraphs += [p for p in text.split("\n\n")][:20]
        if len(paragraphs) >= limit:
            break
    if len(paragraphs) < 50:
        pytest.skip("too few copyright files under /usr/share/doc")
    return paragraphs[:limit]


@pytest.mark.parametrize("flags", [{}, {"lowercase": True, "ignore_non_character": True}])
def test_real_copyright_paragraphs_match_data_juicers_hash(flags):
    texts = copyright_paragraphs()
    rows = dedup_locally(texts, **flags)
    kept = kept_indices(rows)
    assert kept == expected_kept(texts, **flags) and len(kept) < len(texts)  # licences repeat across packages
    for r in rows:
        if r[NODE_COL] is not None:
            twin = texts[int(r[REASON_COL])]
            assert dj_hash(twin, **flags) == dj_hash(r["text"], **flags) == json.loads(r[DETAIL_COL])["md5"]


@pytest.mark.integration
def test_on_ray_with_the_redis_backend_named(ray_session):
    import ray

    texts = ENGLISH + CHINESE + EMPTIES
    rows = [{"id": f"{i:04d}", "text": t} for i, t in enumerate(texts)]
    events: list[dict] = []
    op = RayDocumentDeduplicator(RayDocumentDeduplicator.Params(backend="redis", num_partitions=1))
    ctx = RunContext(run_dir="/tmp", node_id="dedup", emit=events.append)
    out = op.apply(ray.data.from_items(rows, override_num_blocks=3), ctx).take_all()
    assert sorted(r["id"] for r in out) == [r["id"] for r in rows]  # every row: kept or a tombstone
    assert kept_indices(out) == expected_kept(texts)
    assert {int(r["id"]): r["text"] for r in out} == dict(enumerate(texts))
    assert [e["event"] for e in events] == ["dedup_backend_not_used"]
