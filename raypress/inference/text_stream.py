"""Incremental detokenisation with stop strings: token ids in, text that can no longer change out.

Why its own module: what a streamed request may show after each token (never the start of a stop
string, never half a UTF-8 character) is a text problem independent of how tokens are produced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class TextStream:
    """Turns a growing list of token ids into text deltas, cut before the first stop string.

    Every step decodes the whole completion (cheap next to a forward pass) and emits only what can
    no longer change: a suffix that could still grow into a stop string, or a trailing U+FFFD (half
    of a multi-byte character from a byte-level tokenizer), is held back until the next token.
    """

    def __init__(self, decode: Callable[[list[int]], str], stop: Sequence[str] = ()) -> None:
        self._decode = decode
        self._stop = list(stop)
        self.ids: list[int] = []
        self.text = ""
        self.stopped = False  # a stop string appeared; ``text`` ends right before it
        self._sent = 0

    def push(self, token_id: int) -> str:
        """Add one token; return the newly safe text."""
        self.ids.append(token_id)
        text = self._decode(self.ids)
        # emitted text never holds the start of a stop string, so search only the unsent part
        hits = [i for s in self._stop if (i := text.find(s, self._sent)) >= 0]
        if hits:
            self.text, self.stopped = text[: min(hits)], True
            return self.flush()
        self.text = text
        return self._emit(len(text) - self._held_back(text))

    def flush(self) -> str:
        """Everything not yet emitted (the stream is ending)."""
        return self._emit(len(self.text))

    def _held_back(self, text: str) -> int:
        partial = max((k for s in self._stop for k in range(1, len(s)) if text.endswith(s[:k])), default=0)
        replacement = len(text) - len(text.rstrip("\ufffd"))
        return max(partial, replacement)

    def _emit(self, end: int) -> str:
        if end <= self._sent:
            return ""
        delta, self._sent = self.text[self._sent : end], end
        return delta

