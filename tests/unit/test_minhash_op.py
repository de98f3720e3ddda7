"""The MinHash near-dedup ops without Ray: parameters (Data-Juicer's names and defaults, refusals
that name the knob) and the whole pipeline run in-process through the same steps and wiring the
Ray driver uses (``near_duplicates`` with ``local_step``)."""

from __future__ import annotations

import importlib.util

import json
import random

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.base import RunContext
from raypress.operators.dedup.document_minhash_deduplicator import DocumentMinhashDeduplicator
from raypress.operators.dedup.minhash.bands import optimal_param
from raypress.operators.dedup.minhash.deduplicator import MinhashParams, near_duplicates
from raypress.operators.dedup.minhash.lsh import KEY, SHINGLES, band_rows, bucket_edges, bucket_members, verified_edges
from raypress.operators.dedup.ray_bts_minhash_deduplicator import (
    ACTOR_KNOBS,
    RayBtsMinhashDeduplicator,
    RayBtsMinhashParams,
)
from raypress.operators.dedup.shuffle.sources import LocalBlocks
from raypress.operators.dedup.shuffle.tasks import local_step
from raypress.operators.registry import get_op, requirements
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL

CTX = RunContext(run_dir="/tmp", node_id="mh")


def words(rng: random.Random, n: int) -> list[str]:
    return [f"w{rng.randrange(5000)}" for _ in range(n)]


def planted(seed: int = 0) -> tuple[list[dict], dict[str, str]]:
    """12 base texts, each with 1-3 copies with one word replaced (Jaccard >= 0.93), under
    scrambled ids; returns rows and dup -> kept."""
    rng = random.Random(seed)
    rows, families = [], []
    for _ in range(12):
        base = words(rng, 150)
        family = [" ".join(base)]
        for _ in range(rng.randint(1, 3)):
            edited = list(base)
            edited[rng.randrange(150)] = "edit"
            family.append(" ".join(edited))
        families.append(family)
    ids = random.Random(seed + 1).sample(range(10_000), sum(len(f) for f in families))
    expected = {}
    k = 0
    for family in families:
        fam_ids = [f"d{ids[k + j]:05d}" for j in range(len(family))]
        k += len(family)
        rows += [{"id": i, "text": t} for i, t in zip(fam_ids, family)]
        expected.update({i: min(fam_ids) for i in fam_ids if i != min(fam_ids)})
    rng.shuffle(rows)
    return rows, expected


def blocks_of(rows: list[dict], n_blocks: int) -> list[pa.Table]:
    size = -(-len(rows) // n_blocks)
    return [pa.Table.from_pylist(rows[i: i + size]) for i in range(0, len(rows), size)]


def dedup(rows: list[dict], n_blocks: int = 1, n: int = 1, op=None, **params) -> tuple[dict[str, dict], dict]:
    op = op or DocumentMinhashDeduplicator(MinhashParams(**params))
    marked, stats = near_duplicates(LocalBlocks(blocks_of(rows, n_blocks)), op.config(CTX), n, op.params.verify, "mh",
                                    run=local_step, collect=sum)
    out = [r for t in marked for r in t.to_pylist()]
    assert len(out) == len(rows)
    return {r["id"]: r for r in out}, stats


def duplicates(out: dict[str, dict]) -> dict[str, str]:
    return {i: r[REASON_COL] for i, r in out.items() if r[KIND_COL] == "duplicate"}


# -- parameters ---------------------------------------------------------------------------------

def test_defaults_are_data_juicers():
    p = MinhashParams()
    assert (p.text_key, p.tokenization, p.window_size, p.lowercase, p.ignore_pattern) == ("text", "space", 5, True, None)
    assert (p.num_permutations, p.jaccard_threshold, p.num_bands, p.num_rows_per_band) == (256, 0.7, None, None)
    assert p.bands() == optimal_param(0.7, 256)
    assert MinhashParams(num_bands=16, num_rows_per_band=8).bands() == (16, 8)


@pytest.mark.parametrize("params, words_in_message", [
    ({"tokenization": "sentencepiece"}, ["sentencepiece", "not supported"]),
    ({"tokenization": "words"}, ["unknown tokenization", "'words'"]),
    ({"tokenizer_model": "m.model"}, ["tokenizer_model", "sentencepiece"]),
    ({"num_bands": 20}, ["num_bands and num_rows_per_band"]),
    ({"num_bands": 30, "num_rows_per_band": 10}, ["exceeds num_permutations"]),
    ({"jaccard_threshold": 1.0}, ["strictly between 0 and 1"]),
    ({"ignore_pattern": "(unclosed"}, ["ignore_pattern", "regular expression"]),
    ({"window_size": 0}, ["window_size"]),
])
def test_refused_params_say_which_and_why(params, words_in_message):
    with pytest.raises(ValidationError) as err:
        MinhashParams(**params)
    assert all(w in str(err.value) for w in words_in_message), str(err.value)


def test_both_ops_are_registered_deduplicators():
    assert get_op("document_minhash_deduplicator") is DocumentMinhashDeduplicator
    assert get_op("ray_bts_minhash_deduplicator") is RayBtsMinhashDeduplicator
    assert RayBtsMinhashDeduplicator.Params is RayBtsMinhashParams
    assert DocumentMinhashDeduplicator.kind.value == "deduplicator"
    assert requirements("document_minhash_deduplicator") == {} == requirements("ray_bts_minhash_deduplicator")


def test_ray_bts_knobs_that_map_are_honoured():
    ctx = RunContext(run_dir="/tmp", node_id="x", input_rows=250_000)
    op = RayBtsMinhashDeduplicator(RayBtsMinhashParams(union_find_parallel_num=6, minhash_batch_size=512))
    assert op.partitions(ctx) == 6 and op.config(ctx).chunk_rows == 512
    auto = RayBtsMinhashDeduplicator(RayBtsMinhashParams())
    assert auto.partitions(ctx) == ctx.shuffle_partitions() == 3
    assert auto.config(ctx).chunk_rows == DocumentMinhashDeduplicator(MinhashParams()).config(ctx).chunk_rows
    assert RayBtsMinhashParams(union_find_parallel_num="8").union_find_parallel_num == 8  # DJ's int("8")


@pytest.mark.parametrize("knob", sorted(ACTOR_KNOBS))
def test_ray_bts_knobs_without_counterpart_are_refused_by_name_unless_default(knob):
    RayBtsMinhashParams(**{knob: ACTOR_KNOBS[knob]})  # what a copied Data-Juicer recipe spells out
    with pytest.raises(ValidationError, match=f"{knob}=.*cannot be honoured"):
        RayBtsMinhashParams(**{knob: ACTOR_KNOBS[knob] * 2})


def test_ray_bts_accelerator_picks_the_signature_device():
    ctx = RunContext(run_dir="/tmp", node_id="x", input_rows=1000)
    assert RayBtsMinhashDeduplicator(RayBtsMinhashParams()).config(ctx).device == "cpu"
    if all(importlib.util.find_spec(m) for m in ("torch", "triton")):
        assert RayBtsMinhashDeduplicator(RayBtsMinhashParams(accelerator="cuda")).config(ctx).device == "cuda"
    with pytest.raises(ValidationError, match="accelerator"):
        RayBtsMinhashParams(accelerator="tpu")


def test_ray_bts_refuses_two_partition_counts_and_sentencepiece():
    with pytest.raises(ValidationError, match="union_find_parallel_num=4 and num_partitions=3"):
        RayBtsMinhashParams(union_find_parallel_num=4, num_partitions=3)
    with pytest.raises(ValidationError, match="tokenizer_model"):
        RayBtsMinhashParams(tokenization="sentencepiece", tokenizer_model="sp.model")


# -- the pipeline, in-process -------------------------------------------------------------------

def test_planted_near_duplicates_keep_their_smallest_id():
    rows, expected = planted()
    out, stats = dedup(rows, 3, 4)
    assert duplicates(out) == expected
    for dup, kept in expected.items():
        assert out[dup][NODE_COL] == "mh"
        assert json.loads(out[dup][DETAIL_COL]) == {"minhash_component": kept}
        assert out[kept][NODE_COL] is None
    assert stats["duplicates"] == len(expected) and stats["documents"] == len(rows)


def test_result_does_not_depend_on_blocks_or_partitions():
    rows, expected = planted(3)
    results = [dedup(rows, b, n)[0] for b, n in ((1, 1), (4, 7), (len(rows), 3))]
    assert results[0] == results[1] == results[2]
    assert duplicates(results[0]) == expected


def test_verify_drops_lsh_false_positives_that_plain_lsh_merges():
    # one band of one row: two documents are candidates as soon as one MinHash value agrees
    rng = random.Random(5)
    common = words(rng, 40)
    rows = [{"id": f"d{i}", "text": " ".join(common[: 20 + i] + words(rng, 30))} for i in range(6)]
    loose = dict(num_permutations=1, num_bands=1, num_rows_per_band=1, jaccard_threshold=0.7)
    merged, _ = dedup(rows, 2, 3, **loose)
    checked, _ = dedup(rows, 2, 3, verify=True, **loose)
    assert duplicates(merged) and not duplicates(checked)


def test_band_rows_through_files_give_the_same_answer(tmp_path):
    rows, _ = planted(4)
    for verify in (False, True):
        op = DocumentMinhashDeduplicator(MinhashParams(verify=verify))
        in_memory = near_duplicates(LocalBlocks(blocks_of(rows, 3)), op.config(CTX), 2, verify, "mh",
                                    run=local_step, collect=sum)
        in_files = near_duplicates(LocalBlocks(blocks_of(rows, 3)), op.config(CTX), 2, verify, "mh",
                                   run=local_step, collect=sum, folder=str(tmp_path / str(verify)))
        assert [t.to_pylist() for t in in_files[0]] == [t.to_pylist() for t in in_memory[0]]
        assert in_files[1] == in_memory[1]
        pieces = [pa.ipc.open_file(str(f)).schema.names for f in (tmp_path / str(verify)).glob("*.arrow")]
        assert any(KEY in names for names in pieces)  # the band rows went through files,
        assert any(names == ["node", "nbr"] for names in pieces)  # and the components' edges too


def test_verify_keeps_true_pairs_on_planted_data():
    rows, expected = planted(2)
    assert duplicates(dedup(rows, 3, 2, verify=True)[0]) == expected


def test_empty_documents_never_match_short_ones_are_one_shingle():
    rows = [{"id": "a", "text": ""}, {"id": "b", "text": ""}, {"id": "c", "text": "   "},
            {"id": "d", "text": "Hello"}, {"id": "e", "text": "hello"}, {"id": "f", "text": "hello there"}]
    out, stats = dedup(rows, 2, 2)
    assert duplicates(out) == {"e": "d"}  # lowercase: one identical shingle
    assert stats["documents"] == 3  # the empty and blank ones have no shingles, so no bands


def test_tombstones_pass_through_and_bad_texts_are_quarantined_by_row():
    text = " ".join(f"t{i}" for i in range(30))
    block = pa.table({
        "id": ["a", "b", "c", "d", "e"],
        "text": [text, text, text, None, text],
        "_rp_node": ["f", None, None, None, None],
        "_rp_kind": ["filtered", None, None, None, None],
        "_rp_reason": ["too short", None, None, None, None],
        "_rp_detail": [None] * 5,
    })
    marked, _ = near_duplicates(LocalBlocks([block]), DocumentMinhashDeduplicator(MinhashParams()).config(CTX), 2, False, "mh",
                                run=local_step, collect=sum)
    out = marked[0].to_pylist()
    assert [r["id"] for r in out] == ["a", "b", "c", "d", "e"]  # order kept
    assert out[0] == {**block.to_pylist()[0]}  # the tombstone untouched, not anyone's twin
    assert out[2][REASON_COL] == "b" and out[4][REASON_COL] == "b" and out[1][NODE_COL] is None
    assert out[3][KIND_COL] == "error" and out[3][REASON_COL] == "ValueError"
    assert out[3][DETAIL_COL] == "document_minhash_deduplicator: 'text' of row 'd' is null, not a string: cannot shingle it"


def test_non_string_text_column_is_quarantined_row_by_row():
    block = pa.table({"id": ["x", "y"], "text": [3, 3]})
    marked, stats = near_duplicates(LocalBlocks([block]), DocumentMinhashDeduplicator(MinhashParams()).config(CTX), 1, False,
                                    "mh", run=local_step, collect=sum)
    out = marked[0].to_pylist()
    assert [r[KIND_COL] for r in out] == ["error", "error"] and stats["documents"] == 0
    assert out[1][DETAIL_COL] == "document_minhash_deduplicator: 'text' of row 'y' is a int, not a string: cannot shingle it"


def test_missing_text_column_names_the_op_and_the_column():
    cfg = DocumentMinhashDeduplicator(MinhashParams(text_key="content")).config(CTX)
    with pytest.raises(ValueError, match="document_minhash_deduplicator: the input has no column 'content'"):
        band_rows(pa.table({"id": ["a"], "text": ["x"]}), cfg)


# -- verification, bucket by bucket -------------------------------------------------------------

def bucket(members: dict[str, set[int]], key: int = 7) -> pa.Table:
    ids = sorted(members)
    return pa.table({KEY: pa.array([key] * len(ids), pa.uint64()), "id": ids,
                     SHINGLES: pa.array([sorted(members[i]) for i in ids], pa.large_list(pa.uint32()))})


def pairs(edges: pa.Table) -> set[tuple[str, str]]:
    return {(a, b) for a, b in zip(edges.column("node").to_pylist(), edges.column("nbr").to_pylist()) if a < b}


def test_verify_keeps_a_true_pair_whose_bucket_minimum_matches_neither():
    x = set(range(100, 120))
    table = bucket({"a": set(range(10)), "x": x, "y": (x - {119}) | {500}})  # J(x, y) = 19/21
    assert pairs(verified_edges(table, 0.7)) == {("x", "y")}


def test_verify_links_a_member_to_every_leader_it_matches():
    core = set(range(100))
    table = bucket({"a": core | set(range(200, 240)), "b": core | set(range(300, 340)), "c": core | {200, 300}})
    # a and b: J = 100/180 < 0.7, so both lead; c matches both (102/140 each) and joins them
    assert pairs(verified_edges(table, 0.7)) == {("a", "c"), ("b", "c")}


def test_identical_buckets_are_verified_once():
    one, two = bucket({"a": {1, 2}, "b": {1, 2}}, key=1), bucket({"a": {1, 2}, "b": {1, 2}}, key=2)
    single = bucket({"z": {9}}, key=3)
    members = bucket_members(pa.concat_tables([one, two, single]).drop_columns([SHINGLES]))
    assert members.column("id").to_pylist() == ["a", "b"] and members.column(KEY).to_pylist() == [1, 1]


def test_interleaved_documents_are_shingled_from_their_text_pieces():
    """MINT-1T rows keep their text in `texts` (list<string|null>, images at the nulls)."""
    rng = random.Random(5)
    base = words(rng, 120)
    edited = list(base)
    edited[7] = "edit"
    rows = [{"id": "b", "texts": [" ".join(base[:60]), None, " ".join(base[60:])]},
            {"id": "a", "texts": [" ".join(edited[:60]), " ".join(edited[60:]), None]},
            {"id": "c", "texts": [" ".join(words(rng, 120))]}]
    out, stats = dedup(rows, text_key="texts", verify=True)
    assert duplicates(out) == {"b": "a"} and stats["documents"] == 3


def test_a_block_of_tombstones_without_the_text_column_passes_through():
    """Everything filtered upstream: the block may carry only ids and tombstone columns."""
    block = pa.table({"id": ["a", "b"], "_rp_node": ["f", "f"], "_rp_kind": ["filtered"] * 2,
                      "_rp_reason": ["short"] * 2, "_rp_detail": [None, None]})
    marked, stats = near_duplicates(LocalBlocks([block]), DocumentMinhashDeduplicator(MinhashParams(text_key="texts")).config(CTX),
                                    2, True, "mh", run=local_step, collect=sum)
    assert marked[0].to_pylist() == block.to_pylist() and stats["documents"] == 0
