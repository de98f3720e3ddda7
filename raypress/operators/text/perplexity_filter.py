"""perplexity_filter (Data-Juicer): KenLM perplexity of the sentencepiece-tokenised text.

Data-Juicer's computation, kept exactly: the text is cut into sentencepiece pieces, joined by
spaces, and scored line by line with KenLM (``<s>``/``</s>`` added per line); with ``L`` the sum of
the lines' log10 scores and ``N`` the pieces plus one ``</s>`` per line, the stat ``perplexity`` is
``round(10 ** (-L / N), 1)`` (0.0 for a text with no pieces).  Kept when
``min_ppl <= perplexity <= max_ppl``.

Data-Juicer downloads ``{lang}.arpa.bin`` and ``{lang}.sp.model`` (the Wikipedia models of
edugp/kenlm on the Hugging Face Hub) at run time; raypress never downloads, so the two files come
from ``model_path`` / ``sp_model_path``, else by name from the directory named by ``$RAYPRESS_DJ_MODELS``
or Data-Juicer's own model cache (``models.locate``).  Explicit paths are checked when the pipeline is
validated; files found by name before a local run starts Ray and when the op starts, and their
absence is an error that says how to provide them.  ``kenlm`` and ``sentencepiece`` are
imported only then.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import Field

from raypress.operators.base import TextParams
from raypress.operators.registry import register
from raypress.operators.shared.files import LocalFile
from raypress.operators.text.models.locate import KENLM_NAME, MODELS_ENV, SP_NAME, search_dirs
from raypress.operators.text.models.sentencepiece import load_sentencepiece
from raypress.operators.text.templates.range_filter import RangeTextFilter


class PerplexityParams(TextParams):
    lang: str = Field(default="en", description="language of the samples: picks {lang}.arpa.bin and {lang}.sp.model")
    min_ppl: float = Field(default=0, description="keep samples whose perplexity is >= min_ppl")
    max_ppl: float = Field(default=1500, description="keep samples whose perplexity is <= max_ppl")
    model_path: LocalFile | None = Field(
        default=None,
        description=f"local KenLM model (ARPA or binary); None: {KENLM_NAME} in ${MODELS_ENV} or "
        "Data-Juicer's model cache",
    )
    sp_model_path: LocalFile | None = Field(
        default=None,
        description=f"local sentencepiece model the KenLM model was trained on; None: {SP_NAME} in "
        f"${MODELS_ENV} or Data-Juicer's model cache",
    )


    def with_model_files(self, op: str) -> "PerplexityParams":
        lm, sp = self.model_files()
        return self.model_copy(update={"model_path": str(lm), "sp_model_path": str(sp)})

    def model_files(self) -> tuple[Path, Path]:
        """(KenLM model, sentencepiece model), or FileNotFoundError saying how to provide them."""
        dirs = search_dirs()
        found = []
        for given, pattern in ((self.model_path, KENLM_NAME), (self.sp_model_path, SP_NAME)):
            name = pattern.format(lang=self.lang)
            path = Path(given).expanduser() if given else next((d / name for d in dirs if (d / name).is_file()), None)
            if path is None or not path.is_file():
                raise FileNotFoundError(missing_models_message(self.lang, dirs))
            found.append(path)
        return found[0], found[1]


def missing_models_message(lang: str, dirs: list[Path]) -> str:
    kenlm_name, sp_name = KENLM_NAME.format(lang=lang), SP_NAME.format(lang=lang)
    return (f"perplexity_filter needs a KenLM model and its sentencepiece tokenizer for lang {lang!r}, and "
            f"raypress does not download them: set `model_path` (a KenLM .arpa/.bin file) and `sp_model_path` "
            f"(a sentencepiece .model file) in the op's `with:`, or put {kenlm_name} and {sp_name} in the "
            f"directory named by ${MODELS_ENV} (looked up: {', '.join(map(str, dirs))}). Data-Juicer uses the "
            f"Wikipedia models of edugp/kenlm on the Hugging Face Hub (wikipedia/{kenlm_name}, wikipedia/{sp_name})")


@lru_cache(maxsize=2)
def load_kenlm(path: str) -> Any:
    import kenlm

    return kenlm.Model(path)


def pieces_text(sp: Any, text: str) -> str:
    """The text as Data-Juicer scores it: its sentencepiece pieces joined by spaces."""
    return " ".join(sp.encode_as_pieces(text))


def perplexity(lm: Any, text: str) -> float:
    """Data-Juicer's perplexity of an already tokenised text (pieces joined by spaces)."""
    logits, length = 0.0, 0
    for line in text.splitlines():
        logits += lm.score(line)
        length += len(line.split()) + 1
    return round(10.0 ** (-logits / length), 1) if length else 0.0


@register("perplexity_filter", requires={"kenlm": "perplexity", "sentencepiece": "perplexity"})
class PerplexityFilter(RangeTextFilter[PerplexityParams]):
    """Keep samples whose KenLM perplexity (over sentencepiece pieces) is within [min_ppl, max_ppl];
    the models come from local paths (never downloaded)."""

    stat = "perplexity"
    min_param = "min_ppl"
    max_param = "max_ppl"
    stateful = True

    def __init__(self, params: PerplexityParams, artifacts=None):
        super().__init__(params, artifacts)
        lm_path, sp_path = params.model_files()
        self.sp = load_sentencepiece(str(sp_path))
        self.lm = load_kenlm(str(lm_path))

    def stat_value(self, text: str) -> float:
        return perplexity(self.lm, pieces_text(self.sp, text))
