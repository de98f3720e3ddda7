"""Real text and the model files Data-Juicer's recipes look up by name, made here.

Data-Juicer downloads its models at run time (`en.sp.model` and `en.arpa.bin`, the Wikipedia models
of edugp/kenlm; the `EleutherAI/pythia-6.9b-deduped` tokenizer).  Nothing can be downloaded here,
so the tests train the same kinds of model on real text and put them under Data-Juicer's names: a
sentencepiece unigram model, a KenLM-readable bigram language model over its pieces (absolute
discounting with back-off, written as ARPA), and a byte-level BPE `tokenizer.json`.  Only the
models are stand-ins: the recipes and the ops run unchanged.

The real text: the long descriptions of the installed Python packages (prose, markdown, some code;
the quickstart's corpus) and raypress's own Python sources (code, for the code recipes).
"""

from __future__ import annotations

import importlib.metadata
import math
from collections import Counter, defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHIA = "EleutherAI/pythia-6.9b-deduped"


def package_descriptions(min_chars: int = 200) -> list[dict[str, str]]:
    """One row per installed distribution with a description: ``{"id": name, "text": description}``."""
    rows: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower()
        body = dist.metadata.get_payload() or ""
        if name and len(body) >= min_chars and name not in rows:
            rows[name] = body
    return [{"id": f"pkg/{name}", "text": text} for name, text in sorted(rows.items())]


def raypress_sources() -> list[dict[str, str]]:
    """raypress's own modules as code rows: ``{"id": path, "content": source}``."""
    return [{"id": str(p.relative_to(REPO)), "content": p.read_text(encoding="utf-8")}
            for p in sorted((REPO / "raypress").rglob("*.py"))]


def train_sentencepiece(lines: list[str], prefix: Path, vocab_size: int = 2000) -> Path:
    """A unigram sentencepiece model (``{prefix}.model``), as Data-Juicer's ``{lang}.sp.model`` is."""
    import sentencepiece as spm

    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_prefix=str(prefix), vocab_size=vocab_size,
                                   model_type="unigram", character_coverage=0.9995, minloglevel=2,
                                   hard_vocab_limit=False)
    return Path(f"{prefix}.model")


def write_bigram_arpa(sentences: list[list[str]], path: Path, discount: float = 0.75) -> Path:
    """A bigram model in ARPA format, which KenLM loads: absolutely discounted bigram probabilities
    backing off to add-one unigrams (``<unk>`` gets one count), weights normalised per history."""
    unigrams: Counter[str] = Counter()
    bigrams: dict[str, Counter[str]] = defaultdict(Counter)
    for words in sentences:
        seq = ["<s>", *words, "</s>"]
        unigrams.update(seq[1:])
        for prev, word in zip(seq, seq[1:]):
            bigrams[prev][word] += 1
    vocab = sorted(unigrams) + ["<unk>"]
    total = sum(unigrams.values()) + len(vocab)
    p_uni = {w: (unigrams.get(w, 0) + 1) / total for w in vocab}
    lines_1, lines_2 = [], []
    backoff: dict[str, float] = {}
    for prev, following in bigrams.items():
        count = sum(following.values())
        seen_mass = sum(p_uni[w] for w in following)
        backoff[prev] = (discount * len(following) / count) / max(1.0 - seen_mass, 1e-12)
        for word, c in sorted(following.items()):
            lines_2.append(f"{math.log10((c - discount) / count):.6f}\t{prev} {word}")
    lines_1.append(f"-99\t<s>\t{math.log10(backoff['<s>']):.6f}")
    for w in vocab:
        bo = f"\t{math.log10(backoff[w]):.6f}" if w in backoff else ""
        lines_1.append(f"{math.log10(p_uni[w]):.6f}\t{w}{bo}")
    path.write_text("\\data\\\n" f"ngram 1={len(lines_1)}\n" f"ngram 2={len(lines_2)}\n\n"
                    "\\1-grams:\n" + "\n".join(lines_1) + "\n\n\\2-grams:\n" + "\n".join(lines_2)
                    + "\n\n\\end\\\n", encoding="utf-8")
    return path


def train_bpe_tokenizer(texts: list[str], path: Path, vocab_size: int = 4000) -> Path:
    """A byte-level BPE ``tokenizer.json`` (the kind of tokenizer pythia's is)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(path))
    return path


def make_dj_models(folder: Path, texts: list[str], code: list[str]) -> Path:
    """``en.sp.model``, ``en.arpa.bin`` (ARPA text: KenLM tells the formats apart by their header)
    and ``EleutherAI/pythia-6.9b-deduped/tokenizer.json`` in ``folder``, trained on ``texts`` (and
    the tokenizer on ``code`` too)."""
    import sentencepiece as spm

    folder.mkdir(parents=True, exist_ok=True)
    lines = [line for t in texts for line in t.splitlines() if line.strip()]
    sp_path = train_sentencepiece(lines, folder / "en.sp")
    sp = spm.SentencePieceProcessor()
    sp.load(str(sp_path))
    write_bigram_arpa([sp.encode_as_pieces(line) for line in lines], folder / "en.arpa.bin")
    train_bpe_tokenizer([*texts, *code], folder / PYTHIA / "tokenizer.json")
    return folder
