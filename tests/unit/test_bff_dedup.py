"""bff_dedup's per-document logic (BFF old-both), without Ray."""

from __future__ import annotations

import random

import numpy as np
import pytest
from pydantic import ValidationError

from raypress.operators.shared.documents import Document
from raypress.operators.dedup.bff.decisions import BffVerdict, apply_verdict, cut_paragraphs, resolve_batch
from raypress.operators.dedup.bff_dedup import BffParams, bff_documents
from raypress.operators.dedup.bff.ngrams import hash_documents, tokenize
from raypress.operators.dedup.bff.bloom import BloomFilter, pairs_from_u64

WORDS = [f"w{i}" for i in range(5000)]


def words(seed: int, n: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def doc(doc_id: str, *texts: str) -> Document:
    d = Document(doc_id, f"https://example.org/{doc_id}", "html")
    for t in texts:
        d.add_text(t)
    return d


def run(docs, params: BffParams | None = None, bloom: BloomFilter | None = None):
    bloom = bloom or BloomFilter.for_capacity(100_000, 0.01)
    kept, removed = bff_documents(docs, bloom, params)
    return {d.id: (d, v) for d, v in kept}, {d.id: v for d, v in removed}


# -- tokens and n-grams ---------------------------------------------------------------------


def test_tokens_are_unicode_words_and_punctuation_case_kept():
    assert tokenize("Hello, World! It's 3.14 and 1,000 e.g. U.S.A.") == [
        "Hello", ",", "World", "!", "It's", "3.14", "and", "1,000", "e.g", ".", "U.S.A", "."]
    assert tokenize("日本語のテキスト") == ["日", "本", "語", "の", "テキスト"]
    assert tokenize("cafe\u0301 नमस्ते  \t ") == ["cafe\u0301", "नमस्ते"]
    assert tokenize("  \n ") == []


def test_ngrams_per_paragraph():
    long_par = words(1, 20)  # 20 tokens -> 8 13-grams
    text = f"{long_par}\nshort line here\n\n{long_par}"
    batch = hash_documents([[text, None, "x"]], ["d"], 13, 13)
    assert batch.par_ngrams.tolist() == [8, 8]
    assert batch.par_idx.tolist() == [0, 3]  # the short line and the empty one have no n-grams
    assert batch.par_pos.tolist() == [0, 0]
    assert np.array_equal(batch.keys[:8], batch.keys[8:])  # same paragraph, same hashes
    assert len(set(batch.keys[:8].tolist())) == 8


def test_ngram_hash_ignores_position_and_document_but_not_case_or_order():
    par = words(2, 15)
    a = hash_documents([[par], ["intro text that is long enough to have many tokens in it!", par]],
                       ["a", "b"], 13, 13)
    keys_a = a.keys[: a.par_ngrams[0]]
    keys_b = a.keys[-a.par_ngrams[-1]:]
    assert np.array_equal(keys_a, keys_b)
    upper = hash_documents([[par.upper()]], ["c"], 13, 13)
    assert not set(upper.keys.tolist()) & set(keys_a.tolist())
    shuffled = " ".join(reversed(par.split()))
    assert not set(hash_documents([[shuffled]], ["d"], 13, 13).keys.tolist()) & set(keys_a.tolist())


def test_short_paragraph_is_one_ngram_when_min_allows():
    batch = hash_documents([["one two three four five\nsix seven"]], ["d"], 13, 3)
    assert batch.par_ngrams.tolist() == [1]  # 5 tokens: one n-gram; 2 tokens < min: none
    again = hash_documents([["x\none two three four five"]], ["e"], 13, 3)
    assert again.par_idx.tolist() == [1] and again.keys.tolist() == batch.keys.tolist()
    assert hash_documents([["one two three four five"]], ["f"], 13, 13).num_ngrams == 0


# -- BFF decisions ---------------------------------------------------------------------------


def test_document_seen_twice_second_is_removed():
    text = words(3, 60) + "\n" + words(4, 40)
    kept, removed = run([doc("a", text), doc("b", text), doc("c", words(5, 50))])
    assert set(kept) == {"a", "c"} and set(removed) == {"b"}
    v = removed["b"]
    assert v.duplicate and v.contained == v.ngrams == 48 + 28
    assert v.fraction == 1.0
    assert '"contained_fraction": 1.0' in v.detail()
    assert kept["a"][1].contained == 0 and kept["a"][1].removed == []


def test_shared_paragraph_is_cut_from_the_later_document():
    shared, own1, own2, own3 = words(10, 30), words(11, 40), words(12, 40), words(13, 40)
    first = doc("a", f"{own1}\n{shared}")
    second = doc("b", f"{own2}\n{shared}\n{own3}")
    kept, removed = run([first, second])
    assert not removed
    edited, verdict = kept["b"]
    assert verdict.removed == [(0, 1)]
    assert edited.texts == [f"{own2}\n{own3}"]  # the window "\n" + shared is cut, as BFF cuts it
    assert kept["a"][0].texts == first.texts


def _boundary_docs(contained_windows: int):
    """A paragraph of 17 tokens has 5 13-grams; an earlier paragraph holding its first
    12 + contained_windows tokens makes exactly ``contained_windows`` of them seen."""
    tokens = words(20, 17).split()
    earlier = doc("a", " ".join(tokens[: 12 + contained_windows]))
    later = doc("b", " ".join(tokens) + "\n" + words(21, 60))  # a fresh paragraph keeps b alive
    return [earlier, later]


def test_threshold_boundary_is_strictly_greater_as_in_bff():
    kept, _ = run(_boundary_docs(4))  # 4/5 = 0.8: not above the threshold -> kept
    assert kept["b"][1].removed == [] and kept["b"][1].contained == 4
    kept, _ = run(_boundary_docs(4), BffParams(threshold=0.79))  # just under 0.8 -> removed
    assert kept["b"][1].removed == [(0, 0)]
    tokens = words(22, 18).split()  # 6 13-grams, 5 seen: 0.833 > 0.8 -> removed
    docs = [doc("a", " ".join(tokens[:17])), doc("b", " ".join(tokens) + "\n" + words(23, 60))]
    kept, _ = run(docs)
    assert kept["b"][1].removed == [(0, 0)] and kept["b"][0].texts == ["\n" + words(23, 60)]


def test_document_boundary_is_strictly_greater():
    tokens = words(30, 17).split()
    kept, removed = run([doc("a", " ".join(tokens[:16])), doc("b", " ".join(tokens))])
    assert "b" in kept and kept["b"][1].fraction == 0.8  # 4/5, not above 0.8
    kept, removed = run([doc("a", " ".join(tokens[:16])), doc("b", " ".join(tokens))], BffParams(threshold=0.75))
    assert removed["b"].fraction == 0.8


def test_short_paragraphs_are_never_removed_by_default():
    line = "Home | About | Contact"
    kept, removed = run([doc("a", f"{line}\n{words(40, 30)}"), doc("b", f"{line}\n{words(41, 30)}"),
                         doc("c", line), doc("d", line)])
    assert not removed
    assert kept["b"][1].removed == [] and kept["c"][1].ngrams == 0 and kept["d"][0].texts == [line]


def test_short_paragraphs_hashed_whole_with_lower_min_ngram_size():
    line = "Home | About | Contact"  # 5 tokens
    params = BffParams(min_ngram_size=3)
    kept, removed = run([doc("a", f"{line}\n{words(42, 30)}"), doc("b", f"{words(43, 30)}\n{line}"),
                         doc("c", "ok go")], params)
    assert kept["b"][1].removed == [(0, 1)] and kept["b"][0].texts == [words(43, 30)]
    assert kept["c"][1].ngrams == 0  # 2 tokens < min_ngram_size


def test_repeat_within_one_document_is_removed():
    par = words(50, 30)
    kept, _ = run([doc("a", f"{par}\n{words(51, 40)}\n{par}")])
    assert kept["a"][1].removed == [(0, 2)]
    assert kept["a"][0].texts == [f"{par}\n{words(51, 40)}"]


def test_removed_paragraphs_are_not_inserted_but_kept_paragraphs_of_removed_documents_are():
    tokens = words(60, 18).split()
    base, extended = " ".join(tokens[:17]), " ".join(tokens)  # 5 and 6 13-grams
    fresh = words(61, 40)
    kept, removed = run([doc("a", base), doc("b", f"{extended}\n{fresh}"), doc("c", extended)])
    assert kept["b"][1].removed == [(0, 0)]  # 5/6 seen: removed, so its 6th n-gram is not inserted
    assert removed["c"].contained == 5  # ... and c still finds only 5 of 6
    # a document removed whole still inserted the paragraphs it kept (BFF inserts before deciding)
    dup = words(62, 100)
    tail = words(63, 14)  # 2 n-grams, unseen: kept at paragraph level, doc 88/90 seen
    kept, removed = run([doc("a", dup), doc("b", f"{dup}\n{tail}"), doc("c", f"{tail}\n{words(64, 40)}")])
    assert removed["b"].duplicate and removed["b"].removed == [(0, 0)]  # its tail (0, 1) was kept
    assert kept["c"][1].removed == [(0, 0)]


def test_images_and_blank_positions():
    shared = words(70, 30)
    d = Document("b", None, "pdf")
    d.add_text(shared)
    d.add_image("page_0_image_5", b"png", {"sha256": "ab"})
    d.add_text(words(71, 30))
    kept, _ = run([doc("a", shared), d])
    edited, verdict = kept["b"]
    assert verdict.removed == [(0, 0)]
    assert edited.images == ["page_0_image_5", None] and edited.texts == [None, words(71, 30)]
    assert edited.image_bytes == [b"png", None] and edited.image_metadata[0] == {"sha256": "ab"}
    assert d.texts[0] == shared  # the input document is not modified


def test_empty_documents_are_kept():
    empty = Document("e", None, "html")
    nothing = Document("n", None, "html", texts=[None, ""], images=["x", None], image_bytes=[None, None],
                       image_metadata=[None, None])
    kept, removed = run([empty, nothing, doc("w", "   \n\t")])
    assert set(kept) == {"e", "n", "w"} and not removed
    assert all(v.ngrams == 0 and not v.changed for _, v in kept.values())


def test_cut_paragraphs_like_bff():
    assert cut_paragraphs("a\nb\nc", [1]) == "a\nc"
    assert cut_paragraphs("a\nb\nc", [0]) == "\nb\nc"
    assert cut_paragraphs("a\nb\nc", [2]) == "a\nb"
    assert cut_paragraphs("a\nb\nc", [0, 1, 2]) == ""
    assert apply_verdict(doc("x", "a\nb"), BffVerdict("x", 2, 2, [(0, 0), (0, 1)])).texts == []


def test_params_validation():
    with pytest.raises(ValidationError, match="min_ngram_size"):
        BffParams(ngram_size=5, min_ngram_size=6)
    with pytest.raises(ValidationError):
        BffParams(false_positive_rate=0)
    with pytest.raises(ValidationError):
        BffParams(unknown=1)


# -- the batched resolution is exactly sequential BFF ---------------------------------------


def _naive(docs, bloom, ngram_size, min_ngram_size, threshold):
    """BFF's loop as written in Rust: paragraph by paragraph, check then insert."""
    out = []
    for d in docs:
        batch = hash_documents([d.texts], [d.id], ngram_size, min_ngram_size)
        offsets = np.concatenate([[0], np.cumsum(batch.par_ngrams)])
        total = seen = 0
        removed = []
        for g in range(len(batch.par_ngrams)):
            pairs = pairs_from_u64(batch.keys[offsets[g] : offsets[g + 1]])
            contained = int(bloom.contains_pairs(pairs).sum())
            total, seen = total + len(pairs), seen + contained
            if contained / len(pairs) > threshold:
                removed.append((int(batch.par_pos[g]), int(batch.par_idx[g])))
            else:
                bloom.add_pairs(pairs)
        out.append((d.id, total, seen, removed, bool(total and seen / total > threshold)))
    return out


def _random_corpus(seed: int, n_docs: int) -> list[Document]:
    rng = random.Random(seed)
    pool = [words(1000 + i, rng.randint(3, 40)) for i in range(40)]  # shared paragraphs
    docs = []
    for i in range(n_docs):
        pars = [rng.choice(pool) if rng.random() < 0.6 else words(rng.randrange(10**6), rng.randint(1, 40))
                for _ in range(rng.randint(1, 6))]
        if rng.random() < 0.3:
            pars.append(pars[0])
        cut = rng.randint(0, len(pars))
        docs.append(doc(f"d{i:03d}", "\n".join(pars[:cut]), "\n".join(pars[cut:])))
    return docs


@pytest.mark.parametrize("num_bits,num_hashes", [(1 << 20, 7), (2048, 3)])  # roomy / crowded filter
@pytest.mark.parametrize("batch_docs", [1, 7, 1000])
def test_batches_equal_the_sequential_loop(num_bits, num_hashes, batch_docs):
    docs = _random_corpus(7, 120)
    params = BffParams(min_ngram_size=4, batch_docs=batch_docs)
    expected = _naive(docs, BloomFilter(num_bits, num_hashes), 13, 4, 0.8)
    bloom = BloomFilter(num_bits, num_hashes)
    kept, removed = bff_documents(docs, bloom, params)
    got = sorted((v.id, v.ngrams, v.contained, v.removed, v.duplicate) for _, v in kept + removed)
    assert got == sorted(expected)
    assert sum(e[4] for e in expected) > 0 and sum(len(e[3]) for e in expected) > 0  # both rules fire
    reference = BloomFilter(num_bits, num_hashes)
    _naive(docs, reference, 13, 4, 0.8)
    assert np.array_equal(bloom.bits, reference.bits)


def test_resolve_batch_on_empty_batch():
    batch = hash_documents([[], None], ["a", "b"], 13, 13)
    verdicts = resolve_batch(batch, BloomFilter(1024, 3), 0.8)
    assert [(v.id, v.ngrams, v.changed) for v in verdicts] == [("a", 0, False), ("b", 0, False)]
