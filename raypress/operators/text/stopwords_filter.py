"""stopwords_filter (Data-Juicer): the share of stop words; too few means the text is not prose."""

from __future__ import annotations

from pydantic import Field

from raypress.operators.registry import register
from raypress.operators.text.templates.wordlist_ratio import WordListParams, WordListRatioFilter


class StopwordsParams(WordListParams):
    min_ratio: float = Field(default=0.3, description="keep samples whose stop-word ratio is >= min_ratio")
    max_ratio: float = Field(default=1.0, description="keep samples whose stop-word ratio is <= max_ratio")
    stopwords_dir: str | None = Field(
        default=None,
        description="directory of *stopwords*.json files ({lang: [words]}); None: Data-Juicer's default "
        "lists (BigScience's, shipped with raypress); 'stop-words': the larger lists of the stop-words package",
    )


@register("stopwords_filter", requires_when={"tokenization": {"sentencepiece": "text"}})
class StopwordsFilter(WordListRatioFilter[StopwordsParams]):
    """Keep samples whose share of stop words is within [min_ratio, max_ratio] (too few: not prose)."""

    stat = "stopwords_ratio"
    words_type = "stopwords"
    dir_param = "stopwords_dir"
