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
