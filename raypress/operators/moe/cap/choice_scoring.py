"""An accuracy axis that carries information: log-likelihood multiple choice, as lm-evaluation-harness scores it.

Why: a 2M-parameter model never generates the exact next word of held-out prose, so the cloze
exact-match accuracy was 0.0 at every level and the radar's accuracy axis said nothing.  Ranking
continuations by likelihood is how lm-evaluation-harness scores multiple-choice tasks (HellaSwag,
ARC, ...): for each question the model's summed log-probability of every choice given the context;
the highest is its answer (``acc``), or the highest per byte of the choice (``acc_norm``).  Chance
is 1 / choices, and the report says how far above it the model is (Wilson interval, exact binomial
test).

The task is built from held-out real text (``build_questions``): each document is cut into
consecutive, non-overlapping windows of ``context_words + continuation_words`` words; a window's
context is its first ``context_words`` words, the right choice the rest, the wrong ones the words at
the same place in other held-out documents -- real text of the same kind, so only the context tells
them apart.  Several windows per document because a small held-out side gives too few questions
to tell a model from chance with one each (32 questions: a 95% interval 0.3 wide); the questions
are taken round-robin over the documents (every first window, then every second, ...) so that a
cap on their number keeps as many documents as possible.  Windows of one document share a topic, so
they are not independent draws: the interval and p-value treat them as if they were.

Two ways to get the log-likelihoods, giving the same numbers: a model in this process
(``model_loglikelihoods``) and an OpenAI-compatible server's ``/v1/completions`` with ``echo``,
``max_tokens: 0`` and ``logprobs`` (``completion_loglikelihoods``, what lm-eval's
``local-completions`` sends).  Contexts and choices are tokenised as lm-eval does: the context alone,
then context + choice, the choice's tokens being those after the context's.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ChoiceQuestion:
    id: str
    context: str
    choices: tuple[str, ...]  # each starts with the delimiter (a space), as lm-eval's targets
    label: int


def build_questions(rows: Sequence[tuple[str, str]], n_choices: int = 4, context_words: int = 24,
                    continuation_words: int = 6, seed: int = 0, windows_per_text: int = 1,
                    limit: int | None = None) -> list[ChoiceQuestion]:
    """Questions from ``(id, text)`` rows with at least ``context_words + continuation_words`` words:
    up to ``windows_per_text`` windows of each (0: every one it holds), round-robin over the rows, the
    first ``limit`` of them (None: all).  With one window per text the ids are the rows' own, as the
    questions were before windows; later windows are ``"<id>@<word offset>"``."""
    if n_choices < 2:
        raise ValueError("n_choices must be at least 2")
    need = context_words + continuation_words
    texts = [(str(rid), words) for rid, text in rows if len(words := text.split()) >= need]
    spans = [_window_spans(words, context_words, continuation_words, windows_per_text) for _, words in texts]
    distinct = {s for doc in spans for s in doc}
    if len(distinct) < n_choices:
        raise ValueError(f"{len(texts)} texts of >= {need} words give {len(distinct)} distinct continuations; "
                         f"{n_choices} choices need at least {n_choices}")
    order = _round_robin([len(doc) for doc in spans])[:limit]
    taken = [0] * len(texts)
    for doc, _ in order:
        taken[doc] += 1
    built: dict[tuple[int, int], ChoiceQuestion] = {}
    for doc, (rid, words) in enumerate(texts):
        rng = random.Random(f"{seed}:{rid}")  # one stream per text, drawn window by window
        for window in range(taken[doc]):
            right, pool = spans[doc][window], _wrong_pool(spans, doc, window, n_choices - 1)
            if len(pool) < n_choices - 1:
                raise ValueError(f"the texts other than {rid!r} give {len(pool)} distinct continuations unlike "
                                 f"its own; {n_choices} choices need {n_choices - 1} (wrong choices never come "
                                 "from the question's own text)")
            wrong = rng.sample(pool, n_choices - 1)
            label = rng.randrange(n_choices)
            start = window * need
            built[doc, window] = ChoiceQuestion(
                rid if window == 0 else f"{rid}@{start}", " ".join(words[start:start + context_words]),
                tuple(wrong[:label] + [right] + wrong[label:]), label)
    return [built[key] for key in order]


def _window_spans(words: Sequence[str], context_words: int, continuation_words: int, most: int) -> list[str]:
    """The continuation (with its leading delimiter) of each whole window, at most ``most`` (0: all)."""
    need = context_words + continuation_words
    count = len(words) // need if most == 0 else min(most, len(words) // need)
    return [" " + " ".join(words[k * need + context_words:(k + 1) * need]) for k in range(count)]


def _round_robin(counts: Sequence[int]) -> list[tuple[int, int]]:
    """(text, window) pairs: every text's first window, then every second one, ..."""
    return [(doc, window) for window in range(max(counts, default=0))
            for doc, count in enumerate(counts) if window < count]


def _wrong_pool(spans: Sequence[Sequence[str]], doc: int, window: int, need: int) -> list[str]:
    """Other texts' continuations at the same window when there are ``need`` distinct ones, else at any
    window; never the text's own (they share its topic) nor one equal to the right continuation.  Sorted:
    the seeded draw from it must not depend on set order."""
    right = spans[doc][window]
    same = sorted({other[window] for d, other in enumerate(spans) if d != doc and window < len(other)} - {right})
    if len(same) >= need:
        return same
    return sorted({s for d, other in enumerate(spans) if d != doc for s in other} - {right})


# ---- log-likelihoods ----------------------------------------------------------------------------


def split_pair(encode: Callable[[str], list[int]], context: str, continuation: str) -> tuple[list[int], list[int]]:
    """(context ids, continuation ids) as lm-eval's ``_encode_pair``: trailing spaces of the context
    move to the continuation, the pair is encoded whole and the continuation is what follows the
    context's own encoding."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    whole = encode(context + continuation)
    context_ids = encode(context)
    return context_ids, whole[len(context_ids):]


def model_loglikelihoods(model: Any, encode: Callable[[str], list[int]], pairs: Sequence[tuple[str, str]],
                         max_len: int | None = None) -> list[tuple[float, bool]]:
    """(summed log-probability of the continuation, whether greedy decoding would produce it) for each
    (context, continuation), from one forward pass of the model per pair (left-truncated to
    ``max_len`` tokens, as lm-eval does)."""
    import torch

    out = []
    device = next(model.parameters()).device
    for context, continuation in pairs:
        context_ids, continuation_ids = split_pair(encode, context, continuation)
        if not continuation_ids:
            raise ValueError(f"the continuation {continuation!r} encodes to no tokens after its context")
        ids = (context_ids + continuation_ids)[-(max_len + 1):] if max_len else context_ids + continuation_ids
        inputs = torch.tensor([ids[:-1]], device=device)
        with torch.inference_mode():
            logits = model(inputs)[0, -len(continuation_ids):].float()
        logprobs = torch.log_softmax(logits, dim=-1)
        target = torch.tensor(continuation_ids, device=device)
        picked = logprobs.gather(1, target[:, None])[:, 0]
        out.append((float(picked.sum()), bool((logprobs.argmax(-1) == target).all())))
    return out


def completion_loglikelihoods(post: Callable[[dict[str, Any]], dict[str, Any]], model: str,
                              pairs: Sequence[tuple[str, str]],
                              count: Callable[[str], int]) -> list[tuple[float, bool]]:
    """The same from an OpenAI-compatible ``/v1/completions`` (``post`` sends one request body and
    returns the JSON answer): the prompt is context + continuation, echoed with each token's
    log-probability and top alternative, nothing generated.  The continuation's tokens are those after
    the context's own token count (``count``, the server's tokenizer): lm-eval's ``ctxlen``.  Not the
    ``text_offset``s: a byte-level BPE splits a multi-byte character over tokens whose texts do not
    add up to the string's characters."""
    out = []
    for context, continuation in pairs:
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        answer = post({"model": model, "prompt": context + continuation, "echo": True, "max_tokens": 0,
                       "logprobs": 1, "temperature": 0})
        lp = answer["choices"][0]["logprobs"]
        first = count(context)
        if not 0 < first < len(lp["tokens"]):
            raise ValueError(f"the server's echo has no continuation tokens for {continuation!r} "
                             f"({len(lp['tokens'])} tokens, {first} of them the context's)")
        tokens = lp["tokens"][first:]
        values = lp["token_logprobs"][first:]
        greedy = all(max(top, key=top.get) == token for token, top in zip(tokens, lp["top_logprobs"][first:]))
        out.append((float(sum(values)), greedy))
    return out


# ---- scoring ------------------------------------------------------------------------------------


def score(questions: Sequence[ChoiceQuestion], loglikelihoods: Sequence[tuple[float, bool]]) -> dict[str, Any]:
    """acc and acc_norm (per byte of the choice) over the questions, with chance, a 95% Wilson interval
    and the one-sided exact binomial p-value of doing this well by chance."""
    flat = list(loglikelihoods)
    if len(flat) != sum(len(q.choices) for q in questions):
        raise ValueError(f"{len(flat)} log-likelihoods for {sum(len(q.choices) for q in questions)} choices")
    correct = correct_norm = 0
    at = 0
    for q in questions:
        values = [flat[at + i][0] for i in range(len(q.choices))]
        at += len(q.choices)
        normed = [v / len(c.encode()) for v, c in zip(values, q.choices)]
        correct += max(range(len(values)), key=values.__getitem__) == q.label
        correct_norm += max(range(len(normed)), key=normed.__getitem__) == q.label
    n = len(questions)
    chance = sum(1 / len(q.choices) for q in questions) / n
    return {"task": "log-likelihood multiple choice (lm-evaluation-harness style)", "questions": n,
            "choices": len(questions[0].choices), "chance": chance,
            "acc": correct / n, "acc_interval_95": wilson(correct, n),
            "acc_p_value_vs_chance": binomial_tail(correct, n, chance),
            "acc_norm": correct_norm / n, "acc_norm_interval_95": wilson(correct_norm, n),
            "acc_norm_p_value_vs_chance": binomial_tail(correct_norm, n, chance)}


def pairs_of(questions: Sequence[ChoiceQuestion]) -> list[tuple[str, str]]:
    """Every (context, choice) in question order: what the log-likelihood functions take."""
    return [(q.context, choice) for q in questions for choice in q.choices]


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def binomial_tail(successes: int, n: int, p: float) -> float:
    """P(X >= successes) for X ~ Binomial(n, p)."""
    return min(1.0, sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(successes, n + 1)))
