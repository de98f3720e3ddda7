"""``calibrate_response_mapper``: ``calibrate_qa_mapper`` that rewrites only the answer."""

from __future__ import annotations

from raypress.operators.llm.api.qa import Pair, pair_or_none
from raypress.operators.llm.calibrate_qa_mapper import CalibrateQA
from raypress.operators.registry import register


@register("calibrate_response_mapper")
class CalibrateResponseMapper(CalibrateQA):
    """Calibrate the answer of a question-answer pair against the reference text with an LLM;
    the whole answer (stripped) is the new answer, an empty one is asked again then quarantined."""

    # the spaces are Data-Juicer's: its source continues the line inside the string literal
    DEFAULT_SYSTEM_PROMPT = ("请根据提供的【参考信息】对问答对中的【回答】进行校准，        "
                             "使其更加详细、准确，且仍可以回答原问题。只输出校准后的回答，不要输出多余内容。")

    def parse_output(self, raw: str) -> Pair | None:
        return pair_or_none(None, raw.strip())
