"""\"Did you mean\" for unknown names (ops, keys, settings, node ids).

At the ground: the pipeline spec, the validator, the registry and the CLI all suggest names, and
none of them should import another just for this."""

from __future__ import annotations

import difflib

SUGGEST_FROM_AT_MOST = 1000  # names; past that a suggestion per problem would make validation quadratic

# Data-Juicer's op names end in their kind; a `*_filter` misspelled is never meant as a mapper.
OP_KINDS = ("_filter", "_mapper", "_deduplicator", "_selector", "_aggregator", "_grouper")
OP_CUTOFF = 0.75  # on the names without their kind: 0.6 matched `fix_unicode` with `pii`


def did_you_mean(word: str, choices, cutoff: float = 0.6) -> str:
    """A close name, when there are few enough names to compare against (a generated pipeline with
    thousands of nodes and as many bad references must not take minutes to report)."""
    if not hasattr(choices, "__len__"):
        choices = list(choices)
    if len(choices) > SUGGEST_FROM_AT_MOST:
        return ""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=cutoff)
    return f" (did you mean {close[0]!r}?)" if close else ""


def op_kind(name: str) -> str | None:
    """The kind suffix of a Data-Juicer-style op name (``_filter``, ``_mapper``, …), if any."""
    return next((k for k in OP_KINDS if name.endswith(k)), None)


def did_you_mean_op(word: str, ops) -> str:
    """An op of the same kind whose name is close once the shared kind suffix is set aside.

    Why: with the suffix in, every two filters share 7 characters and difflib finds
    `hash_split_filter` "close" to `perplexity_filter`; a suggestion that is not meant is worse
    than none."""
    ops = list(ops)
    kind = op_kind(word)
    if kind is None:
        return did_you_mean(word, ops, cutoff=OP_CUTOFF)
    stems = {op[: -len(kind)]: op for op in ops if op.endswith(kind)}
    if len(stems) > SUGGEST_FROM_AT_MOST:
        return ""
    close = difflib.get_close_matches(word[: -len(kind)], list(stems), n=1, cutoff=OP_CUTOFF)
    return f" (did you mean {stems[close[0]]!r}?)" if close else ""
