"""document_deduplicator on Ray: global, smallest id kept, independent of blocks and partitions."""

from __future__ import annotations

import json
import random

import pytest

from raypress.operators.base import RunContext
from raypress.operators.dedup.document_deduplicator import DocumentDeduplicator, DocumentDedupParams, text_md5
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL, TombstoneKind

pytestmark = pytest.mark.integration

TEXTS = {
    # exact duplicates, a group of 3 whose smallest id is not first in the input
    "d07": "The cat sat on the mat.",
    "d02": "The cat sat on the mat.",
    "d11": "The cat sat on the mat.",
    # differ only in case
    "d05": "Hello World",
    "d03": "hello world",
    "d09": "HELLO WORLD",
    # differ only in punctuation / spacing / digits
    "d08": "Ready, set: go!",
    "d04": "Ready set go",
    "d12": "Ready  set go 2",
    # differ in case and punctuation
    "d06": "A dog; a bone.",
    "d10": "a dog a bone",
    # unique
    "d01": "Something else entirely",
    "d13": "  The cat sat on the mat.  ",  # surrounding whitespace is stripped: dup of d02
}

# duplicate id -> kept id, per (lowercase, ignore_non_character)
EXPECTED = {
    (False, False): {"d07": "d02", "d11": "d02", "d13": "d02"},
    (True, False): {"d07": "d02", "d11": "d02", "d13": "d02", "d05": "d03", "d09": "d03"},
    (False, True): {"d07": "d02", "d11": "d02", "d13": "d02", "d08": "d04", "d12": "d04"},
    (True, True): {
        "d07": "d02",
        "d11": "d02",
        "d13": "d02",
        "d05": "d03",
        "d09": "d03",
        "d08": "d04",
        "d12": "d04",
        "d10": "d06",
    },
}


def _rows(seed: int) -> list[dict]:
    rows = [{"id": i, "text": t, "n": k} for k, (i, t) in enumerate(TEXTS.items())]
    random.Random(seed).shuffle(rows)
    return rows


def _dedup(rows, blocks: int, partitions: int, **flags):
    import ray

    op = DocumentDeduplicator(DocumentDedupParams(num_partitions=partitions, **flags))
    ds = ray.data.from_items(rows, override_num_blocks=blocks)
    return op.apply(ds, RunContext(run_dir="/tmp", node_id="dedup"))


def _by_id(ds) -> dict[str, dict]:
    return {r["id"]: r for r in ds.take_all()}


# Each flag alone is pinned by the normalisation unit tests (test_document_dedup_normalize.py); here the
# shuffle runs with none and with both (each run starts the hash shuffle's actors: ~10 s here).
@pytest.mark.parametrize("flags", [(False, False), (True, True)])
def test_keeps_smallest_id_per_group(ray_session, flags):
    lowercase, ignore = flags
    out = _by_id(_dedup(_rows(0), 3, 2, lowercase=lowercase, ignore_non_character=ignore))
    assert set(out) == set(TEXTS)  # live + duplicates == input
    dups = {i: r[REASON_COL] for i, r in out.items() if r[NODE_COL] is not None}
    assert dups == EXPECTED[flags]
    for dup_id, kept in dups.items():
        row = out[dup_id]
        assert row[KIND_COL] == TombstoneKind.DUPLICATE.value and row[NODE_COL] == "dedup"
        assert out[kept][NODE_COL] is None
        md5 = text_md5(TEXTS[dup_id], lowercase, ignore).hex()
        assert json.loads(row[DETAIL_COL]) == {"md5": md5}
        assert md5 == text_md5(TEXTS[kept], lowercase, ignore).hex()
    assert all(r["text"] == TEXTS[i] for i, r in out.items())  # rows travel unchanged
    assert "_rp_hash" not in next(iter(out.values()))


def test_result_does_not_depend_on_blocks_partitions_or_order(ray_session):
    flags = dict(lowercase=True, ignore_non_character=True)
    a = _by_id(_dedup(_rows(1), 1, 1, **flags))
    b = _by_id(_dedup(_rows(2), 7, 5, **flags))
    assert a == b
    assert {i for i, r in a.items() if r[NODE_COL]} == set(EXPECTED[(True, True)])


def test_null_text_is_quarantined_and_tombstones_pass_through(ray_session):
    rows = [
        {"id": "a", "text": "same", "_rp_node": "f", "_rp_kind": "filtered", "_rp_reason": "r"},
        {"id": "b", "text": "same", "_rp_node": None, "_rp_kind": None, "_rp_reason": None},
        {"id": "c", "text": "same", "_rp_node": None, "_rp_kind": None, "_rp_reason": None},
        {"id": "d", "text": None, "_rp_node": None, "_rp_kind": None, "_rp_reason": None},
    ]
    out = _by_id(_dedup(rows, 2, 2))
    assert out["a"][NODE_COL] == "f" and out["a"][REASON_COL] == "r"
    assert out["b"][NODE_COL] is None
    assert out["c"][REASON_COL] == "b"
    assert out["d"][KIND_COL] == TombstoneKind.ERROR.value


def test_sort_shuffle_strategy_falls_back_to_map_groups(ray_session):
    import ray
    from ray.data.context import ShuffleStrategy

    flags = dict(lowercase=True, ignore_non_character=True)
    op = DocumentDeduplicator(DocumentDedupParams(num_partitions=2, **flags))
    ds = ray.data.from_items(_rows(4), override_num_blocks=3)
    ds.context.shuffle_strategy = ShuffleStrategy.SORT_SHUFFLE_PULL_BASED  # this dataset only
    out = _by_id(op.apply(ds, RunContext(run_dir="/tmp", node_id="dedup")))
    assert set(out) == set(TEXTS)
    assert {i: r[REASON_COL] for i, r in out.items() if r[NODE_COL]} == EXPECTED[(True, True)]
