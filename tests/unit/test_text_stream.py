"""``TextStream`` against real tokenizers: the streamed deltas add up to what decoding every id at
once gives, while each token decodes only a short window."""

from __future__ import annotations

import gzip
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from raypress.inference.text_stream import TextStream

NEOX = Path(__file__).resolve().parents[2] / "raypress/data/tokenizers/gpt-neox-20b.json.gz"
TEXTS = [
    "Hello world, ça coûte 5 € — naïve café 🤖 end.",
    "  leading spaces\n\nnew lines\ttabs",
    "日本語のテキスト、そして English.",
    "Continuous batching admits requests between decode steps; the KV cache holds one slot each.",
]


def _byte_level() -> Tokenizer:
    """GPT-NeoX's byte-level BPE (shipped with raypress): multi-byte characters span tokens."""
    return Tokenizer.from_str(gzip.open(NEOX, "rt", encoding="utf-8").read())


def _metaspace() -> Tokenizer:
    """A SentencePiece-style BPE (Mixtral / Llama 2's decoder): a sequence's first token loses its space."""
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first")
    tokenizer.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="first")
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>"], initial_alphabet=["▁"])
    tokenizer.train_from_iterator(TEXTS * 3, trainer)
    return tokenizer


def _stream_all(tokenizer: Tokenizer, ids: list[int], windows: list[int] | None = None) -> str:
    def decode(window: list[int]) -> str:
        if windows is not None:
            windows.append(len(window))
        return tokenizer.decode(window)

    stream = TextStream(decode)
    return "".join(stream.push(i) for i in ids) + stream.flush()


@pytest.mark.parametrize("make", [_byte_level, _metaspace], ids=["byte-level", "metaspace"])
def test_streamed_text_equals_decoding_all_ids(make):
    tokenizer = make()
    for text in TEXTS:
        ids = tokenizer.encode(text).ids
        assert _stream_all(tokenizer, ids) == tokenizer.decode(ids)
    rng = random.Random(0)  # arbitrary ids: invalid byte sequences, stray spaces
    for _ in range(200):
        ids = [rng.randrange(tokenizer.get_vocab_size()) for _ in range(rng.randrange(1, 30))]
        assert _stream_all(tokenizer, ids) == tokenizer.decode(ids)


def test_each_token_decodes_a_short_window():
    tokenizer = _byte_level()
    ids = tokenizer.encode(" ".join(TEXTS) * 8).ids
    windows: list[int] = []
    assert _stream_all(tokenizer, ids, windows) == tokenizer.decode(ids)
    assert len(ids) > 300 and max(windows) <= 8  # not the whole completion at every token


def test_half_character_waits_and_a_stream_ending_in_one_flushes_it():
    stream = TextStream(lambda ids: bytes(ids).decode("utf-8", errors="replace"))
    euro = "€".encode()
    assert [stream.push(b) for b in euro[:2]] == ["", ""]
    assert stream.flush() == "\ufffd"  # what decoding the ids at once gives
