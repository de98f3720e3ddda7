"""Log-likelihood multiple choice (cap/choice_scoring.py): the task built from real text, the
log-likelihoods of a real (tiny) MoE checked against its own training loss, the lm-eval tokenisation
of (context, continuation) pairs, and the statistics."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from raypress.operators.moe.cap.choice_scoring import (
    ChoiceQuestion,
    binomial_tail,
    build_questions,
    model_loglikelihoods,
    pairs_of,
    score,
    split_pair,
    wilson,
)
from moe_fixtures import save_tiny_model_dir  # tests/ is on sys.path (its conftest.py)

README = Path(__file__).resolve().parents[2] / "README.md"


def readme_rows() -> list[tuple[str, str]]:
    paragraphs = [p for p in README.read_text().split("\n\n") if len(p.split()) >= 40]
    return [(f"p{i}", p) for i, p in enumerate(paragraphs)]


def test_questions_from_real_text():
    rows = readme_rows()
    questions = build_questions(rows, n_choices=4, context_words=24, continuation_words=6, seed=0)
    assert len(questions) == len(rows) > 20
    texts = dict(rows)
    for q in questions:
        words = texts[q.id].split()
        assert q.context == " ".join(words[:24])
        assert q.choices[q.label] == " " + " ".join(words[24:30])
        assert len(set(q.choices)) == 4 and all(c.startswith(" ") for c in q.choices)
    assert len({q.label for q in questions}) == 4  # the right answer is not always in one place
    assert build_questions(rows, seed=0) == questions and build_questions(rows, seed=1) != questions


def test_too_few_texts_is_a_clear_error():
    with pytest.raises(ValueError, match="distinct continuations"):
        build_questions([("a", "word " * 40), ("b", "word " * 40)], n_choices=4)
    with pytest.raises(ValueError, match="distinct continuations"):
        build_questions([("a", "word " * 400), ("b", "word " * 400)], n_choices=4, windows_per_text=0)
    long = " ".join(f"w{i}" for i in range(300))  # 10 distinct windows, but no other text for wrong choices
    with pytest.raises(ValueError, match="never come from the question's own text"):
        build_questions([("a", long), ("b", "word " * 20)], n_choices=4, windows_per_text=0)


def tagged_rows(windows: list[int]) -> list[tuple[str, str]]:
    """Texts whose every word names its text, so a choice says where it came from; text i holds
    windows[i] whole 30-word windows and a few words more."""
    return [(f"t{i}", " ".join(f"t{i}w{j}" for j in range(30 * n + 7))) for i, n in enumerate(windows)]


def _source(choice: str) -> str:
    return choice.split()[0].split("w")[0]


def _offset(question_id: str) -> int:
    return int(question_id.split("@")[1]) if "@" in question_id else 0


def test_windows_do_not_overlap_and_wrong_choices_are_other_texts():
    rows = readme_rows()
    questions = build_questions(rows, windows_per_text=0, seed=0)
    texts = dict(rows)
    assert len(questions) > 2 * len(rows)
    seen: dict[str, list[int]] = {}
    for q in questions:
        text, offset = q.id.split("@")[0], _offset(q.id)
        words = texts[text].split()
        assert offset % 30 == 0 and offset + 30 <= len(words)
        assert q.context == " ".join(words[offset:offset + 24])
        assert q.choices[q.label] == " " + " ".join(words[offset + 24:offset + 30])
        assert len(set(q.choices)) == 4
        seen.setdefault(text, []).append(offset)
    for text, offsets in seen.items():  # every whole window once, in order: none overlaps another
        assert offsets == list(range(0, len(texts[text].split()) // 30 * 30, 30))

    # texts of very different lengths: late windows of the long texts draw from any other text
    tagged = build_questions(tagged_rows([1, 1, 2, 3, 12, 12]), windows_per_text=0, seed=3)
    assert len(tagged) == 31
    for q in tagged:
        own = q.id.split("@")[0]
        assert _source(q.choices[q.label]) == own
        assert all(_source(c) != own for i, c in enumerate(q.choices) if i != q.label)
        if _offset(q.id) == 0:  # enough other texts at the first window: the wrong choices are theirs too
            assert all(c.split()[0].endswith("w24") for c in q.choices)


def test_questions_are_deterministic_by_seed():
    rows = readme_rows()
    first = build_questions(rows, windows_per_text=0, seed=0, limit=120)
    assert build_questions(list(rows), windows_per_text=0, seed=0, limit=120) == first
    assert build_questions(rows, windows_per_text=0, seed=1, limit=120) != first
    # the cap takes a prefix: a question does not depend on how many others are built
    assert build_questions(rows, windows_per_text=0, seed=0, limit=40) == first[:40]


def test_round_robin_covers_every_text_before_second_windows():
    windows = [1, 2, 9, 9, 9, 3]
    questions = build_questions(tagged_rows(windows), windows_per_text=0, limit=14, seed=0)
    ids = [q.id for q in questions]
    assert ids[:6] == [f"t{i}" for i in range(6)]  # every text's first window, in row order
    assert ids[6:11] == ["t1@30", "t2@30", "t3@30", "t4@30", "t5@30"]  # then every second one
    assert ids[11:] == ["t2@60", "t3@60", "t4@60"]
    capped = build_questions(tagged_rows(windows), windows_per_text=2, seed=0)
    assert len(capped) == sum(min(n, 2) for n in windows) and max(_offset(q.id) for q in capped) == 30
    assert capped == build_questions(tagged_rows(windows), windows_per_text=0, seed=0)[:len(capped)]


def test_one_window_per_text_is_the_one_question_task():
    """windows_per_text=1: one question per text, on its opening words, with the text's own id: the
    task as it was before windows, and exactly the first round of the many-window task."""
    rows = readme_rows()
    one = build_questions(rows, windows_per_text=1, seed=0)
    assert one == build_questions(rows, seed=0)  # the default
    assert [q.id for q in one] == [rid for rid, _ in rows]
    assert one == build_questions(rows, windows_per_text=0, seed=0)[:len(rows)]
    assert len(build_questions(rows, windows_per_text=1, limit=5)) == 5


def test_split_pair_moves_trailing_spaces_like_lm_eval():
    encode = lambda text: [ord(c) for c in text]  # noqa: E731 - one id per character
    assert split_pair(encode, "the cat ", "sat") == ([ord(c) for c in "the cat"], [ord(" "), *map(ord, "sat")])
    assert split_pair(encode, "the cat", " sat") == ([ord(c) for c in "the cat"], [ord(" "), *map(ord, "sat")])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from raypress.inference.engine import Engine

    torch.set_num_threads(1)
    engine = Engine.from_pretrained(save_tiny_model_dir(tmp_path_factory.mktemp("model")))
    return engine.model, engine.encode


def test_model_loglikelihoods_equal_the_model_s_own_loss(tiny):
    """Summed log-probabilities of the continuation tokens = -(mean cross-entropy x tokens) of the
    model's training forward with the context's labels masked: an independent path (F.cross_entropy
    over shifted labels) through the model."""
    model, encode = tiny
    pairs = [("The quick brown fox", " jumps over"), ("Mixture-of-experts layers ", "route tokens")]
    got = model_loglikelihoods(model, encode, pairs)
    for (context, continuation), (value, greedy) in zip(pairs, got):
        context_ids, continuation_ids = split_pair(encode, context, continuation)
        ids = torch.tensor([context_ids + continuation_ids])
        labels = ids.clone()
        labels[0, : len(context_ids)] = -100
        with torch.inference_mode():
            model(ids, labels=labels)
        loss = float(model.last_lm_loss)  # the cross-entropy part (the returned loss adds the router's)
        assert value == pytest.approx(-loss * len(continuation_ids), rel=1e-4, abs=1e-4)
        assert isinstance(greedy, bool)


def test_greedy_flag_is_true_for_the_model_s_own_greedy_continuation(tiny):
    """is_greedy (lm-eval's second loglikelihood output): the continuation the model would decode
    greedily is flagged; the same tokens with one changed are not."""
    model, encode = tiny
    context_ids = encode("The quick brown fox")
    ids = list(context_ids)
    for _ in range(3):
        with torch.inference_mode():
            ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
    other = ids[:-1] + [(ids[-1] + 1) % model.config.vocab_size]
    for tokens, expected in ((ids, True), (other, False)):
        ids_of = {"C": context_ids, "C+": tokens}  # a tokenizer that gives exactly these ids
        (value, greedy), = model_loglikelihoods(model, ids_of.__getitem__, [("C", "+")])
        assert greedy is expected and value < 0


def test_scores_and_statistics():
    questions = [ChoiceQuestion("a", "ctx", (" x", " yy"), 0), ChoiceQuestion("b", "ctx", (" x", " yyyyyy"), 1),
                 ChoiceQuestion("c", "ctx", (" x", " y"), 1)]
    # per choice: sums; acc picks the larger, acc_norm the larger per byte
    lls = [(-1.0, False), (-2.0, False), (-3.0, False), (-4.0, False), (-5.0, False), (-1.0, True)]
    result = score(questions, lls)
    assert result["acc"] == pytest.approx(2 / 3)  # a right, b wrong (-3 > -4), c right
    assert result["acc_norm"] == pytest.approx(1.0)  # b: -3/2 < -4/7
    assert result["chance"] == 0.5 and result["questions"] == 3
    assert pairs_of(questions)[:2] == [("ctx", " x"), ("ctx", " yy")]
    with pytest.raises(ValueError, match="log-likelihoods"):
        score(questions, lls[:-1])
    assert binomial_tail(0, 10, 0.25) == pytest.approx(1.0)
    assert binomial_tail(10, 10, 0.25) == pytest.approx(0.25**10)
    assert binomial_tail(5, 20, 0.25) == pytest.approx(0.5852, abs=1e-4)  # scipy.stats.binom.sf(4, 20, .25)
    lo, hi = wilson(50, 100)
    assert lo == pytest.approx(0.4038, abs=1e-4) and hi == pytest.approx(0.5962, abs=1e-4)
    assert math.isclose(sum(wilson(0, 10)), wilson(0, 10)[1])
