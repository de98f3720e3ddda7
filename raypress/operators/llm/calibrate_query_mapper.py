"""``calibrate_query_mapper``: ``calibrate_qa_mapper`` that rewrites only the question."""

from __future__ import annotations

from raypress.operators.llm.api.qa import Pair, pair_or_none
from raypress.operators.llm.calibrate_qa_mapper import CalibrateQA
from raypress.operators.registry import register


@register("calibrate_query_mapper")
class CalibrateQueryMapper(CalibrateQA):
    """Calibrate the question of a question-answer pair against the reference text with an LLM;
    the whole answer (stripped) is the new question, an empty one is asked again then quarantined."""

    # the spaces are Data-Juicer's: its source continues the line inside the string literal
    DEFAULT_SYSTEM_PROMPT = ("请根据提供的【参考信息】对问答对中的【问题】进行校准，        "
                             "使其更加详细、准确，且仍可以由原答案回答。只输出校准后的问题，不要输出多余内容。")

    def parse_output(self, raw: str) -> Pair | None:
        return pair_or_none(raw.strip(), None)
