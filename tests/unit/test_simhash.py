"""document_simhash_deduplicator without Ray: Data-Juicer's SimHash bit for bit (against a transcription
of simhash-pybind's ``unsigned_hash`` + ``compute``), candidates equal to every pair within the
Hamming distance, Data-Juicer's own test cases kept the same, and the same answer for any
partitioning (``near_duplicates`` run in-process with ``local_step``)."""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.dedup.document_simhash_deduplicator import (
    DocumentSimhashDeduplicator,
    SimhashParams,
    near_duplicates,
)
from raypress.operators.dedup.simhash.blocks import (
    COMBO,
    HASH,
    KEY,
    block_combinations,
    block_keys,
    pairs_step,
    shingles,
    simhashes,
)
from raypress.operators.dedup.shuffle.sources import LocalBlocks
from raypress.operators.dedup.shuffle.tasks import concat, local_step, route_by_value
from raypress.operators.registry import get_op, requirements
from raypress.operators.shared.unicode_regex import compile_pattern
from raypress.schema import DETAIL_COL, ID_COL, KIND_COL, REASON_COL

CASES = Path(__file__).resolve().parents[1] / "data" / "dj_simhash_cases.json"


# -- a transcription of Data-Juicer's compute_hash (simhash-pybind: md5 hash, majority of bits) -----

def dj_unsigned_hash(obj: bytes) -> int:
    return struct.unpack(">Q", hashlib.md5(obj).digest()[0:8])[0] & 0xFFFFFFFFFFFFFFFF


def dj_compute(hashes: list[int]) -> int:
    counts = [0] * 64
    for h in hashes:
        for bit in range(64):
            counts[bit] += 1 if h & 1 else -1
            h >>= 1
    return sum(1 << bit for bit in range(64) if counts[bit] > 0)


def dj_simhash(text: str, tokenization: str = "space", window: int = 6, ignore: str | None = None) -> int:
    text = text.lower()
    if ignore:
        text = re.sub(ignore, "", text)
    if tokenization == "character":
        tokens = [text[i: i + window].encode() for i in range(len(text) - window + 1)]
    else:
        if tokenization == "punctuation":
            words = compile_pattern(r"\p{P}").split(text)
        else:
            words = [w for w in re.split(" ", text) if w]
        tokens = [" ".join(words[i: i + window]).encode() for i in range(len(words) - window + 1)]
    return dj_compute([dj_unsigned_hash(t) for t in tokens])


TEXTS = [
    "The quick brown fox jumps over the lazy dog, and then the dog sleeps all afternoon long.",
    "Smithfield employs 3,700 people at its plant in Sioux Falls,  South Dakota.\nThe plant "
    "slaughters 19,500 pigs a day — 5 percent of U.S. pork.",
    "第九届会议\n2003年7月28日至8月8日\n牙买加金斯敦\n为来自发展中国家的法律专家举办的培训班",
    "Ünïcödé wörds: «quoted», ¿questions? and emoji 🙂 in the middle of a sentence here.",
]


# -- parameters -----------------------------------------------------------------------------------

def test_defaults_and_name_are_data_juicers():
    p = SimhashParams()
    assert (p.text_key, p.tokenization, p.window_size, p.lowercase, p.ignore_pattern, p.num_blocks,
            p.hamming_distance) == ("text", "space", 6, True, None, 6, 4)
    assert get_op("document_simhash_deduplicator") is DocumentSimhashDeduplicator
    assert requirements("document_simhash_deduplicator") == {}


@pytest.mark.parametrize("params, message", [
    ({"hamming_distance": 6}, "hamming_distance (6) must be less than num_blocks (6)"),
    ({"num_blocks": 65, "hamming_distance": 1}, "num_blocks must be between 1 and 64"),
    ({"num_blocks": 64, "hamming_distance": 5}, "makes 7624512 choices of blocks"),
    ({"tokenization": "sentencepiece"}, "tokenization 'sentencepiece' is not supported"),
    ({"tokenization": "words"}, "unknown tokenization 'words'"),
    ({"ignore_pattern": "(unclosed"}, "ignore_pattern is not a valid regular expression"),
    ({"ignore_pattern": r"\p{Nonsense}"}, "unknown property"),
    ({"window_size": 0}, "greater than 0"),
])
def test_bad_params_are_refused_with_the_knob_named(params, message):
    with pytest.raises(ValidationError, match=re.escape(message)):
        SimhashParams(**params)


def test_recipe_patterns_validate():
    for pattern in (r"\p{P}", r"[^\w]+", "\n\n"):  # every ignore_pattern of Data-Juicer's recipes
        assert SimhashParams(ignore_pattern=pattern).ignore_pattern == pattern


# -- the SimHash ----------------------------------------------------------------------------------

@pytest.mark.parametrize("tokenization, window, ignore", [
    ("space", 6, None), ("space", 2, None), ("punctuation", 3, None), ("character", 6, None), ("character", 4, r"\s"),
])
def test_simhash_is_data_juicers_bit_for_bit(tokenization, window, ignore):
    ours = simhashes(TEXTS, tokenization, window, True, ignore)
    assert ours.dtype == np.uint64
    assert [int(h) for h in ours] == [dj_simhash(t, tokenization, window, ignore) for t in TEXTS]


def test_pinned_simhash_value():
    # md5("a b c d e f")[:8] big-endian is the one shingle's hash, so the SimHash is that hash
    assert int(simhashes(["A b C d E f"], "space", 6)[0]) == int.from_bytes(
        hashlib.md5(b"a b c d e f").digest()[:8], "big") == 0x6B7A59F92F21D297


def test_tokens_are_data_juicers():
    assert shingles("a  b\nc d", "space", 2) == ["a b\nc", "b\nc d"]  # split on ' ' only, empties dropped
    assert shingles("a b, c. d", "punctuation", 2) == ["a b  c", " c  d"]  # pieces keep their spaces
    assert shingles("x,,y", "punctuation", 3) == ["x  y"]  # the empty piece between two marks is kept
    assert shingles("abcde", "character", 3) == ["abc", "bcd", "cde"]
    assert shingles("five words are too few", "space", 6) == []
    with pytest.raises(ValueError, match="unknown tokenization"):
        shingles("x", "sentencepiece", 1)


def test_short_and_empty_documents_hash_to_zero_as_in_data_juicer():
    assert simhashes(["", "five words are too few", "ab"], "space", 6).tolist() == [0, 0, 0]
    rows = [{"id": "a", "text": "five words are too few"}, {"id": "b", "text": "other short text"},
            {"id": "c", "text": ""}]
    assert duplicates(dedup(rows)) == {"b": "a", "c": "a"}


def test_p_category_patterns_match_unicode_punctuation():
    p = compile_pattern(r"\p{P}")
    assert p.sub("", "欢迎来到阿里巴巴！ a,b «c» ¿d? e-f") == "欢迎来到阿里巴巴 ab c d ef"
    assert compile_pattern(r"[\p{P}\d]+").sub("", "a1,b2.c") == "abc"
    assert compile_pattern(r"\P{L}").sub("", "a1,b é") == "abé"
    assert compile_pattern(r"[^\w]+").sub("", "a1,b é") == "a1bé"  # plain re patterns unchanged


# -- candidates -----------------------------------------------------------------------------------

def bucket_table(hashes: list[int], ids: list[str], num_blocks: int, k: int) -> pa.Table:
    """What ``bucket_rows`` makes of documents with these SimHashes."""
    h = np.array(hashes, dtype=np.uint64)
    keys = block_keys(h, num_blocks, k)
    c = keys.shape[1]
    return pa.table({KEY: pa.array(keys.reshape(-1)), COMBO: pa.array(np.tile(np.arange(c, dtype=np.int32), len(h))),
                     HASH: pa.array(np.repeat(h, c)), ID_COL: pa.array(np.repeat(ids, c))})


def components(ids: list[str], pairs: list[tuple[str, str]]) -> dict[str, str]:
    """node -> smallest id of its component (a plain union-find)."""
    parent = {i: i for i in ids}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = find(a), find(b)
        parent[max(ra, rb)] = min(ra, rb)
    return {i: find(i) for i in ids}


@pytest.mark.parametrize("num_blocks, k, n", [(6, 4, 1), (6, 4, 5), (9, 7, 3), (4, 1, 2), (10, 5, 2), (64, 1, 2)])
def test_candidates_are_exactly_the_pairs_within_the_distance(num_blocks, k, n):
    rng = random.Random(num_blocks * 100 + k)
    hashes: list[int] = []
    for _ in range(60):  # clusters of hashes a few flipped bits apart, and exact repeats
        base = rng.getrandbits(64)
        hashes.append(base)
        for _ in range(rng.randint(0, 4)):
            flipped = base
            for bit in rng.sample(range(64), rng.randint(0, k + 2)):
                flipped ^= 1 << bit
            hashes.append(flipped)
    ids = [f"d{i:04d}" for i in rng.sample(range(10_000), len(hashes))]
    table = bucket_table(hashes, ids, num_blocks, k)
    parts = route_by_value(table, KEY, n)
    edges = concat([concat(pairs_step([p], hamming_distance=k, n=1)[0]) for p in parts])
    found = set(zip(edges.column("node").to_pylist(), edges.column("nbr").to_pylist()))
    rep = {}
    for h, i in sorted(zip(hashes, ids), key=lambda x: x[1]):
        rep.setdefault(h, i)
    truth = {(rep[a], rep[b]) for a in rep for b in rep if a != b and bin(a ^ b).count("1") <= k}
    truth |= {(i, rep[h]) for h, i in zip(hashes, ids) if i != rep[h]}
    truth |= {(b, a) for a, b in truth}
    assert found == truth  # no pair missed, none added: simhash-cpp's find_all, plus equal hashes
    assert len(block_combinations(num_blocks, k)) == len(list(itertools.combinations(range(num_blocks),
                                                                               num_blocks - k)))


# -- the whole op in-process ------------------------------------------------------------------------

def dedup(rows: list[dict], n_blocks: int = 1, n: int = 1, **params) -> dict[str, dict]:
    op = DocumentSimhashDeduplicator(SimhashParams(**params))
    size = -(-len(rows) // n_blocks)
    blocks = [pa.Table.from_pylist(rows[i: i + size]) for i in range(0, len(rows), size)]
    marked, stats = near_duplicates(LocalBlocks(blocks), op.config(), n, "sh", run=local_step, collect=sum)
    out = [r for t in marked for r in t.to_pylist()]
    assert [r["id"] for r in out] == [r["id"] for r in rows]  # order kept, nothing lost
    assert stats["duplicates"] == sum(r[KIND_COL] == "duplicate" for r in out)
    return {r["id"]: r for r in out}


def duplicates(out: dict[str, dict]) -> dict[str, str]:
    return {i: r[REASON_COL] for i, r in out.items() if r[KIND_COL] == "duplicate"}


@pytest.mark.parametrize("case", ["test_0", "test_english_deduplication", "test_chinese_deduplication",
                                  "test_punctuation_deduplication"])
@pytest.mark.parametrize("n_blocks, n", [(1, 1), (3, 2), (9, 4)])
def test_data_juicers_own_test_cases_keep_the_same_texts(case, n_blocks, n):
    spec = json.loads(CASES.read_text(encoding="utf-8"))["cases"][case]
    rows = [{"id": f"doc{i:05d}", "text": t} for i, t in enumerate(spec["texts"])]
    out = dedup(rows, n_blocks, n, **spec["params"])
    kept = [i for i, r in enumerate(rows) if out[r["id"]][KIND_COL] is None]
    assert kept == spec["kept"]  # ids in input order: the smallest id is Data-Juicer's first


def test_near_copies_name_the_smallest_id_whatever_the_order_and_partitioning():
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(2000)]
    rows, families = [], []
    for f in range(8):
        base = [rng.choice(vocab) for _ in range(300)]
        copy = list(base)
        copy[150] = "edited"
        family = [f"f{f}-{rng.randrange(1000):03d}", f"f{f}-{rng.randrange(1000, 2000)}"]
        rows += [{"id": family[0], "text": " ".join(base)}, {"id": family[1], "text": " ".join(copy).upper()}]
        families.append(family)
    rows += [{"id": f"single{i}", "text": " ".join(rng.choice(vocab) for _ in range(300))} for i in range(10)]
    hashes = simhashes([r["text"] for r in rows], "space", 6)
    expected = {}
    for a, b in families:
        ha, hb = (int(hashes[[r["id"] for r in rows].index(x)]) for x in (a, b))
        if bin(ha ^ hb).count("1") <= 4:
            expected[max(a, b)] = min(a, b)
    assert len(expected) >= 4  # 5 of the 8 edited copies are within 4 bits (one edit changes 6 shingles)
    reference = dedup(rows)
    assert duplicates(reference) == expected
    shuffled = list(rows)
    rng.shuffle(shuffled)
    for n_blocks, n in ((4, 3), (len(rows), 7)):
        out = dedup(shuffled, n_blocks, n)
        assert duplicates(out) == expected
        assert {i: r[DETAIL_COL] for i, r in out.items()} == {i: r[DETAIL_COL] for i, r in reference.items()}
    assert json.loads(reference[next(iter(expected))][DETAIL_COL]) == {"simhash_component": next(iter(expected.values()))}


def test_null_text_is_an_error_and_tombstones_pass_through():
    text = " ".join(f"t{i}" for i in range(40))
    rows = [
        {"id": "n1", "text": None},
        {"id": "t1", "text": text, "_rp_node": "f", "_rp_kind": "filtered", "_rp_reason": "r", "_rp_detail": None},
        {"id": "t2", "text": text},
        {"id": "t3", "text": text.upper()},
    ]
    rows = [{k: r.get(k) for k in rows[1]} for r in rows]  # one schema: every row has the tombstone columns
    out = dedup(rows, 2, 2)
    assert duplicates(out) == {"t3": "t2"}
    assert (out["t1"][KIND_COL], out["t1"][REASON_COL]) == ("filtered", "r")
    assert out["n1"][KIND_COL] == "error" and "'text' of row 'n1' is null" in out["n1"][DETAIL_COL]
