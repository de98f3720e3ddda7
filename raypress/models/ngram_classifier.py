"""A fastText-style text classifier: hashed word n-grams -> mean embedding -> linear layer.

Why this shape: it trains in seconds on CPUs, is robust to unseen words (every n-gram lands in
some hash bucket) and is what quality classifiers in data curation usually are (fastText in
DCLM, FineWeb-Edu's small heads).  Hashing uses xxhash, so the same text gets the same feature
ids in every process and on every machine (Python's ``hash()`` is salted per process).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
import xxhash
from torch import nn

KIND = "ngram_classifier"  # the `kind` a Model artifact's manifest names for this network
CONFIG_FILE = "ngram_config.json"
WEIGHTS_FILE = "ngram_weights.pt"
_TOKEN = re.compile(r"\w+|[^\w\s]+")


@dataclass
class NgramConfig:
    """Everything needed to rebuild the network and to name its outputs."""

    labels: list[Any] = field(default_factory=list)  # class index -> label value (JSON-able)
    dim: int = 32
    buckets: int = 1 << 18
    word_ngrams: int = 2

    @property
    def num_classes(self) -> int:
        return len(self.labels)


def tokenize(text: str) -> list[str]:
    """Lowercased words; runs of punctuation are tokens too (they carry quality signal)."""
    return _TOKEN.findall(text.lower())


def ngram_ids(tokens: Sequence[str], word_ngrams: int, buckets: int) -> list[int]:
    """Bucket ids of every word n-gram, n = 1..word_ngrams, hashed with xxh64 (seed 0)."""
    ids = []
    for n in range(1, word_ngrams + 1):
        for i in range(len(tokens) - n + 1):
            ids.append(xxhash.xxh64_intdigest(" ".join(tokens[i : i + n]).encode()) % buckets)
    return ids


def featurize(
    texts: Sequence[str], word_ngrams: int, buckets: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of texts -> (flat bucket ids, start offset of each text): EmbeddingBag's input.

    An empty text is an empty bag; its embedding is zero, so it scores by the bias alone."""
    flat: list[int] = []
    offsets: list[int] = []
    for text in texts:
        offsets.append(len(flat))
        flat.extend(ngram_ids(tokenize(text), word_ngrams, buckets))
    return torch.tensor(flat, dtype=torch.long), torch.tensor(offsets, dtype=torch.long)


class NgramClassifier(nn.Module):
    """Mean of the n-gram embeddings, then one linear layer to class logits."""

    def __init__(self, config: NgramConfig):
        super().__init__()
        if config.num_classes < 2:
            raise ValueError(f"need at least 2 labels to classify, got {config.labels!r}")
        self.config = config
        # Sparse gradients: a step touches only the rows of its batch's n-grams, not all buckets
        # (use an optimizer that takes them, e.g. Adagrad or SGD).
        self.embedding = nn.EmbeddingBag(config.buckets, config.dim, mode="mean", sparse=True)
        self.out = nn.Linear(config.dim, config.num_classes)
        # fastText's initialisation: small uniform embeddings, a zero output layer.
        nn.init.uniform_(self.embedding.weight, -1.0 / config.dim, 1.0 / config.dim)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
        return self.out(self.embedding(ids, offsets))

    def featurize(self, texts: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        return featurize(texts, self.config.word_ngrams, self.config.buckets)

    @torch.no_grad()
    def predict_proba(self, texts: Sequence[str]) -> torch.Tensor:
        """Class probabilities, one row per text, columns in ``config.labels`` order."""
        was_training = self.training
        self.eval()
        probs = torch.softmax(self(*self.featurize(texts)), dim=-1)
        self.train(was_training)
        return probs


def save(model: NgramClassifier, directory: str | Path) -> Path:
    """Write the weights and the JSON config (labels included) into ``directory``."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path / WEIGHTS_FILE)
    (path / CONFIG_FILE).write_text(json.dumps(asdict(model.config), indent=2))
    return path


def load(directory: str | Path) -> NgramClassifier:
    """Rebuild a classifier written by :func:`save`, in eval mode."""
    path = Path(directory)
    config = NgramConfig(**json.loads((path / CONFIG_FILE).read_text()))
    model = NgramClassifier(config)
    model.load_state_dict(torch.load(path / WEIGHTS_FILE, map_location="cpu", weights_only=True))
    return model.eval()
