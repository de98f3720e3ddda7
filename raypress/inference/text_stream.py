"""Incremental detokenisation with stop strings: token ids in, text that can no longer change out.

Why its own module: what a streamed request may show after each token (never the start of a stop
string, never half a UTF-8 character) is a text problem independent of how tokens are produced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

REPLACEMENT = "\ufffd"  # what a byte-level tokenizer decodes half a multi-byte character to


class TextStream:
    """Turns a growing list of token ids into text deltas, cut before the first stop string.

    Each token decodes only a short window, as vLLM and TGI do: the ids since the last emitted
    text plus the few before them (``ids[prefix:]``), minus what those few decode to alone
    (``ids[prefix:read]``). The context keeps what a tokenizer does to a sequence's first token
    (SentencePiece drops its leading space) out of the delta. Decoding the whole completion at
    every token cost time that grew with its length and took ~6% of a decode step at batch 32.
    A window that ends in U+FFFD (half of a multi-byte character) waits for the next token, and
    emitted text never holds a suffix that could still grow into a stop string.
    """

    def __init__(self, decode: Callable[[list[int]], str], stop: Sequence[str] = ()) -> None:
        self._decode = decode
        self._stop = list(stop)
        self.ids: list[int] = []
        self.text = ""
        self.stopped = False  # a stop string appeared; ``text`` ends right before it
        self._sent = 0
        self._prefix = 0  # ids[_prefix:_read]: the context the next window decodes after
        self._read = 0  # ids before it are in ``text``

    def push(self, token_id: int) -> str:
        """Add one token; return the newly safe text."""
        self.ids.append(token_id)
        if not self._extend(final=False):
            return ""
        if self._cut_at_stop():
            return self.flush()
        return self._emit(len(self.text) - self._partial_stop())

    def flush(self) -> str:
        """Everything not yet emitted (the stream is ending), a trailing half character included."""
        if not self.stopped and self._extend(final=True):
            self._cut_at_stop()
        return self._emit(len(self.text))

    def _extend(self, final: bool) -> bool:
        """Append the text the ids since ``_read`` add; False when they add none yet."""
        if self._read == len(self.ids):
            return False
        context = self._decode(self.ids[self._prefix : self._read]) if self._read > self._prefix else ""
        window = self._decode(self.ids[self._prefix :])
        if len(window) <= len(context) or (not final and window.endswith(REPLACEMENT)):
            return False
        self.text += window[len(context) :]
        self._prefix, self._read = self._read, len(self.ids)
        return True

    def _cut_at_stop(self) -> bool:
        """Cut ``text`` before the first stop string in its unsent part (emitted text never holds
        the start of one, so only that part is searched)."""
        hits = [i for s in self._stop if (i := self.text.find(s, self._sent)) >= 0]
        if not hits:
            return False
        self.text, self.stopped = self.text[: min(hits)], True
        return True

    def _partial_stop(self) -> int:
        """Length of the longest suffix of ``text`` that starts a stop string."""
        return max((k for s in self._stop for k in range(1, len(s)) if self.text.endswith(s[:k])), default=0)

    def _emit(self, end: int) -> str:
        if end <= self._sent:
            return ""
        delta, self._sent = self.text[self._sent : end], end
        return delta
