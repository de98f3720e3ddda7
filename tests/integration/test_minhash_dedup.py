"""The MinHash near-dedup ops on Ray: planted near duplicates found, the smallest id kept, every row
accounted for, and the same output for any block or partition count."""

from __future__ import annotations

import json
import random

import pytest

from raypress.operators.base import RunContext
from raypress.operators.dedup.document_minhash_deduplicator import DocumentMinhashDeduplicator
from raypress.operators.dedup.minhash.deduplicator import MinhashParams
from raypress.operators.dedup.ray_bts_minhash_deduplicator import RayBtsMinhashDeduplicator, RayBtsMinhashParams
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL

pytestmark = pytest.mark.integration


def planted(seed: int) -> tuple[list[dict], dict[str, str]]:
    """Families of one base text and 1-4 copies with one word replaced or added and maybe the case
    changed (Jaccard of word 5-shingles >= 0.93: LSH misses such a pair with probability < 1e-7),
    plus unrelated singles."""
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(3000)]
    texts: list[list[str]] = []
    for _ in range(15):
        base = [rng.choice(vocab) for _ in range(rng.randint(150, 200))]
        family = [" ".join(base)]
        for _ in range(rng.randint(1, 4)):
            edited = list(base)
            if rng.random() < 0.5:
                edited[rng.randrange(len(edited))] = rng.choice(vocab)
            else:
                edited.insert(rng.randrange(len(edited)), "inserted")
            family.append(" ".join(edited).upper() if rng.random() < 0.3 else " ".join(edited))
        texts.append(family)
    texts += [[" ".join(rng.choice(vocab) for _ in range(150))] for _ in range(25)]
    ids = rng.sample(range(100_000), sum(len(f) for f in texts))
    rows, expected, k = [], {}, 0
    for family in texts:
        fam_ids = [f"doc-{ids[k + j]:06d}" for j in range(len(family))]
        k += len(family)
        rows += [{"id": i, "text": t, "source": "planted"} for i, t in zip(fam_ids, family)]
        expected.update({i: min(fam_ids) for i in fam_ids if i != min(fam_ids)})
    rng.shuffle(rows)
    return rows, expected


def run(op, rows: list[dict], blocks: int, events: list | None = None) -> dict[str, dict]:
    import ray

    ds = ray.data.from_items(rows, override_num_blocks=blocks)
    ctx = RunContext(run_dir="/tmp", node_id="near", emit=(events if events is not None else []).append)
    out = op.apply(ds, ctx).take_all()
    assert len(out) == len(rows)  # nothing lost, nothing added
    return {r["id"]: r for r in out}


def duplicates(out: dict[str, dict]) -> dict[str, str]:
    return {i: r[REASON_COL] for i, r in out.items() if r[KIND_COL] == "duplicate"}


def test_planted_near_duplicates_same_answer_for_any_blocks_and_partitions(ray_session):
    rows, expected = planted(0)
    events: list[dict] = []
    one = run(DocumentMinhashDeduplicator(MinhashParams(num_partitions=1)), rows, 1, events)
    many = run(DocumentMinhashDeduplicator(MinhashParams(num_partitions=7)), list(reversed(rows)), 5)
    assert one == many
    assert duplicates(one) == expected
    by_text = {r["id"]: r for r in rows}
    for dup, kept in expected.items():
        assert one[dup][NODE_COL] == "near"
        assert json.loads(one[dup][DETAIL_COL]) == {"minhash_component": kept}
        assert one[kept][NODE_COL] is None  # the twin named is kept
        assert one[dup]["text"] == by_text[dup]["text"] and one[dup]["source"] == "planted"
    live = [i for i, r in one.items() if r[NODE_COL] is None]
    assert len(live) + len(expected) == len(rows)
    stats = events[-1]
    assert stats["event"] == "minhash_dedup" and stats["duplicates"] == len(expected)
    assert stats["documents"] == len(rows) and stats["partitions"] == 1


def test_edge_rows_empty_short_bad_text_and_tombstones(ray_session):
    text = " ".join(f"t{i}" for i in range(40))
    rows = [
        {"id": "e1", "text": ""}, {"id": "e2", "text": ""},  # empty: never matched
        {"id": "s1", "text": "Word"}, {"id": "s2", "text": "word"},  # one word: one shingle, equal
        {"id": "n1", "text": None}, {"id": "i1", "text": 42},  # not a string: quarantined
        {"id": "t1", "text": text, "_rp_node": "f", "_rp_kind": "filtered", "_rp_reason": "r"},
        {"id": "t2", "text": text}, {"id": "t3", "text": text + " tail"},
    ]
    out = run(DocumentMinhashDeduplicator(MinhashParams(num_partitions=3)), rows, 3)
    assert duplicates(out) == {"s2": "s1", "t3": "t2"}
    assert out["e1"][NODE_COL] is None and out["e2"][NODE_COL] is None
    assert (out["t1"][NODE_COL], out["t1"][REASON_COL]) == ("f", "r")  # passed through untouched
    assert out["n1"][KIND_COL] == "error" and "'text' of row 'n1' is null" in out["n1"][DETAIL_COL]
    assert out["i1"][KIND_COL] == "error"
    assert out["i1"][DETAIL_COL] == "document_minhash_deduplicator: 'text' of row 'i1' is a int, not a string: " \
                                    "cannot shingle it"


def test_missing_text_column_is_a_clear_error(ray_session):
    import ray

    ds = ray.data.from_items([{"id": "a", "content": "x"}])
    op = DocumentMinhashDeduplicator(MinhashParams())
    with pytest.raises(ValueError, match=r"document_minhash_deduplicator: the input has no column 'text' "
                                         r"\(columns: id, content\)"):
        op.apply(ds, RunContext(run_dir="/tmp", node_id="near"))


def test_ray_bts_op_with_verify_and_data_juicer_knobs(ray_session):
    rows, expected = planted(1)
    events: list[dict] = []
    params = RayBtsMinhashParams(union_find_parallel_num=3, minhash_batch_size=16, merge_batch_size=1000,
                                 verify=True)
    out = run(RayBtsMinhashDeduplicator(params), rows, 4, events)
    assert duplicates(out) == expected
    assert events[0] == {"event": "knobs_without_effect", "node": "near", "knobs": ["merge_batch_size"],
                         "why": events[0]["why"]}
    assert events[-1]["partitions"] == 3


def test_accelerator_cuda_without_a_gpu_is_a_clear_error_not_a_hang(ray_session):
    """The signature tasks would ask Ray for a GPU the cluster does not have and wait forever."""
    import ray

    pytest.importorskip("triton")
    ds = ray.data.from_items([{"id": "a", "text": "some words here"}])
    op = RayBtsMinhashDeduplicator(RayBtsMinhashParams(accelerator="cuda"))
    with pytest.raises(ValueError, match=r"accelerator='cuda' .* this Ray cluster has none"):
        op.apply(ds, RunContext(run_dir="/tmp", node_id="near"))


@pytest.mark.parametrize("verify", [False, True])
def test_band_rows_through_files_same_answer_and_no_files_left(ray_session, tmp_path, monkeypatch, verify):
    """Above ROWS_IN_OBJECT_STORE the key shuffle's pieces go through files under the run dir."""
    import ray

    import raypress.operators.dedup.minhash.deduplicator as minhash

    monkeypatch.setattr(minhash, "ROWS_IN_OBJECT_STORE", 0)
    rows, expected = planted(2)
    events: list[dict] = []
    ds = ray.data.from_items(rows, override_num_blocks=4)
    ctx = RunContext(run_dir=str(tmp_path), node_id="near", emit=events.append)
    op = DocumentMinhashDeduplicator(MinhashParams(num_partitions=3, verify=verify))
    out = {r["id"]: r for r in op.apply(ds, ctx).take_all()}
    assert len(out) == len(rows) and duplicates(out) == expected
    assert events[-1]["rows_in_files"] is True
    assert not list((tmp_path / "scratch").iterdir())  # the pieces' folder is gone


def test_one_id_on_two_live_rows_stops_with_the_id_named(ray_session):
    text = " ".join(f"w{i}" for i in range(40))
    rows = [{"id": "a", "text": text}, {"id": "b", "text": text + " more"}, {"id": "a", "text": text}]
    with pytest.raises(Exception, match="two live rows have the id 'a'; near-dedup needs unique ids"):
        run(DocumentMinhashDeduplicator(MinhashParams(num_partitions=2)), rows, 2)
