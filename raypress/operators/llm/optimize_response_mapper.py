"""``optimize_response_mapper``: ``optimize_qa_mapper`` that rewrites only the answer."""

from __future__ import annotations

from raypress.operators.llm.api.qa import Pair, pair_or_none
from raypress.operators.llm.optimize_qa_mapper import OptimizeQA
from raypress.operators.registry import register


@register("optimize_response_mapper")
class OptimizeResponseMapper(OptimizeQA):
    """Make the answer of a question-answer pair more detailed with an LLM, still answering the
    question; the whole answer (stripped) is the new answer."""

    DEFAULT_SYSTEM_PROMPT = "请优化问答对中的回答，将其更加详细具体，但仍可以回答原问题。只输出优化后的回答，不要输出多余内容。"

    def parse_output(self, raw: str) -> Pair | None:
        return pair_or_none(None, raw.strip())
