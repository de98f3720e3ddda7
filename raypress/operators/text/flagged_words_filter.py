"""flagged_words_filter (Data-Juicer): the share of flagged (obscene) words."""

from __future__ import annotations

from pydantic import Field

from raypress.operators.registry import register
from raypress.operators.text.templates.wordlist_ratio import WordListParams, WordListRatioFilter


class FlaggedWordsParams(WordListParams):
    min_ratio: float = Field(default=0.0, description="keep samples whose flagged-word ratio is >= min_ratio")
    max_ratio: float = Field(default=0.045, description="keep samples whose flagged-word ratio is <= max_ratio")
    flagged_words_dir: str | None = Field(
        default=None,
        description="directory of *flagged_words*.json files ({lang: [words]}); None: Data-Juicer's "
        "default lists (BigScience's, shipped with raypress); 'better-profanity': that package's larger English list",
    )


@register("flagged_words_filter", requires_when={"tokenization": {"sentencepiece": "text"}})
class FlaggedWordsFilter(WordListRatioFilter[FlaggedWordsParams]):
    """Keep samples whose share of flagged (obscene) words is within [min_ratio, max_ratio]."""

    stat = "flagged_words_ratio"
    words_type = "flagged_words"
    dir_param = "flagged_words_dir"
