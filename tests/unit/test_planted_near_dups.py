"""The planted near-duplicate set behind bench/minhash_dedup.py: deterministic, its ground truth
exact, its hard negatives negatives."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import planted_near_dups as planted  # noqa: E402

SMALL = planted.PlantConfig(n_bases=60, seed=3, hard_negative_rate=0.5)


@pytest.fixture(scope="module")
def small_set() -> planted.PlantedSet:
    return planted.make_planted(SMALL)


def words(*ws: str) -> str:
    return " ".join(ws)


W = [f"w{i}" for i in range(10)]


def test_ground_truth_on_a_hand_checked_case():
    # A has 10 words -> 6 shingles of 5.  B changes A's last word: 5 of 6 shingles shared, union 7.
    # D changes B's first word: 5/7 with B, but only 4/8 with A -> a chain A-B-D, one cluster.
    # E keeps A's first 7 words: 3 shared of 9.  G is shorter than the window (one shingle);
    # H is G upper-cased, identical once lowercased.  F is empty and matches nothing.
    a = words(*W)
    b = words(*W[:9], "x9")
    d = words("y0", *W[1:9], "x9")
    e = words(*W[:7], "z7", "z8", "z9")
    f = ""
    g = "w0 w1"
    h = "W0  W1"
    texts = [a, b, d, e, f, g, h]
    hashes, offsets = planted.shingles(texts)
    assert np.diff(offsets).tolist() == [6, 6, 6, 6, 0, 1, 1]
    pairs, jac = planted.similar_pairs(hashes, offsets, 0.7)
    assert pairs.tolist() == [[0, 1], [1, 2], [5, 6]]
    assert jac.tolist() == pytest.approx([5 / 7, 5 / 7, 1.0])
    sets = [hashes[offsets[i]:offsets[i + 1]] for i in range(len(texts))]
    assert planted.exact_jaccard(sets[0], sets[2]) == pytest.approx(4 / 8)
    assert planted.exact_jaccard(sets[0], sets[3]) == pytest.approx(3 / 9)
    assert planted.exact_jaccard(sets[4], sets[4]) == 0.0  # empty documents never match
    assert planted.components(len(texts), pairs).tolist() == [0, 0, 0, 3, 4, 5, 5]
    # at 0.5 the A-D pair (exactly 0.5) joins
    pairs5, _ = planted.similar_pairs(hashes, offsets, 0.5)
    assert [0, 2] in pairs5.tolist() and [0, 3] not in pairs5.tolist()


def test_prefix_filter_join_equals_brute_force(small_set):
    hashes, offsets = planted.shingles(small_set.texts)
    sets = [set(hashes[offsets[i]:offsets[i + 1]].tolist()) for i in range(len(small_set))]
    for t in (0.5, 0.7, 0.9):
        want = []
        for i, j in itertools.combinations(range(len(sets)), 2):
            union = len(sets[i] | sets[j])
            if union and len(sets[i] & sets[j]) / union >= t:
                want.append([i, j])
        got, _ = planted.similar_pairs(hashes, offsets, t)
        assert sorted(got.tolist()) == want, t
    got, _ = planted.similar_pairs(hashes, offsets, 0.7)
    assert sorted(got.tolist()) == sorted(small_set.pairs.tolist())


def test_the_set_is_deterministic_and_has_every_kind(small_set):
    again = planted.make_planted(SMALL)
    assert again.ids == small_set.ids and again.texts == small_set.texts
    assert np.array_equal(again.pairs, small_set.pairs) and np.array_equal(again.cluster, small_set.cluster)
    other = planted.make_planted(planted.PlantConfig(n_bases=60, seed=4, hard_negative_rate=0.5))
    assert other.texts != small_set.texts
    kinds = set(small_set.kinds)
    assert kinds == {"base", "variant", "hard_negative"}
    st = small_set.stats()
    assert st["true_clusters"] > 5 and st["removable"] > 10
    # ids are unique and sorted, and the kept member (smallest id) is not always the base
    assert small_set.ids == sorted(set(small_set.ids))
    first = {}
    for i, c in enumerate(small_set.cluster.tolist()):
        first.setdefault(c, i)
    multi = [i for c, i in first.items() if (small_set.cluster == c).sum() > 1]
    assert {small_set.kinds[i] for i in multi} >= {"base", "variant"}


def test_bases_are_pairwise_below_half(small_set):
    base = [i for i, k in enumerate(small_set.kinds) if k == "base"]
    hashes, offsets = planted.shingles([small_set.texts[i] for i in base])
    pairs, _ = planted.similar_pairs(hashes, offsets, SMALL.base_max_jaccard)
    assert len(pairs) == 0


def test_hard_negatives_share_a_long_prefix_and_stay_below_threshold(small_set):
    hard = [i for i, k in enumerate(small_set.kinds) if k == "hard_negative"]
    assert len(hard) >= 10
    sizes = small_set.cluster_sizes()
    assert all(sizes[i] == 1 for i in hard)  # no true partner anywhere in the set
    assert (small_set.hard_negative_jaccard < SMALL.threshold - SMALL.hard_negative_margin).all()
    assert (small_set.hard_negative_jaccard > 0.25).all()  # hard: a big shared part
    base_of = {int(f): i for i, (k, f) in enumerate(zip(small_set.kinds, small_set.family)) if k == "base"}
    for i in hard:
        hn, base = small_set.texts[i].split(), small_set.texts[base_of[int(small_set.family[i])]].split()
        shared = next((k for k, (x, y) in enumerate(zip(hn, base)) if x != y), min(len(hn), len(base)))
        assert shared >= 0.4 * len(base)


def test_save_and_load_round_trip(small_set, tmp_path):
    small_set.save(tmp_path / "set")
    back = planted.PlantedSet.load(tmp_path / "set")
    assert back.ids == small_set.ids and back.texts == small_set.texts and back.kinds == small_set.kinds
    assert np.array_equal(back.pairs, small_set.pairs) and np.array_equal(back.cluster, small_set.cluster)
    assert back.config == small_set.config


def test_edits_do_what_they_say():
    rng = np.random.default_rng(0)
    doc = [[f"p{p}w{i}" for i in range(20)] for p in range(4)]
    assert planted.delete_words(doc, 0.0, rng) == doc
    assert planted.substitute_words(doc, 0.0, rng, ["x"]) == doc
    swapped = planted.swap_paragraphs(doc, rng)
    assert sorted(map(tuple, swapped)) == sorted(map(tuple, doc)) and swapped != doc
    assert len(planted.drop_paragraph(doc, rng)) == 3
    # 'same' edits (case, wrapping) are invisible to space + lowercase shingles
    h1, o1 = planted.shingles([planted.render(doc)])
    h2, o2 = planted.shingles([planted.render(planted.change_case(doc, rng), width=30)])
    assert np.array_equal(h1, h2)
