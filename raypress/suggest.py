"""\"Did you mean\" for unknown names (ops, keys, settings, node ids).

At the ground: the pipeline spec, the validator, the registry and the CLI all suggest names, and
none of them should import another just for this."""

from __future__ import annotations

import difflib

SUGGEST_FROM_AT_MOST = 1000  # names; past that a suggestion per problem would make validation quadratic


def did_you_mean(word: str, choices) -> str:
    """A close name, when there are few enough names to compare against (a generated pipeline with
    thousands of nodes and as many bad references must not take minutes to report)."""
    if not hasattr(choices, "__len__"):
        choices = list(choices)
    if len(choices) > SUGGEST_FROM_AT_MOST:
        return ""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
