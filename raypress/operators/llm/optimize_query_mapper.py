"""``optimize_query_mapper``: ``optimize_qa_mapper`` that rewrites only the question."""

from __future__ import annotations

from raypress.operators.llm.api.qa import Pair, pair_or_none
from raypress.operators.llm.optimize_qa_mapper import OptimizeQA
from raypress.operators.registry import register


@register("optimize_query_mapper")
class OptimizeQueryMapper(OptimizeQA):
    """Make the question of a question-answer pair more specific with an LLM, still answerable by the
    answer; the whole answer (stripped) is the new question."""

    DEFAULT_SYSTEM_PROMPT = "优化问答对中的【问题】，将其更加详细具体，但仍可以由原答案回答。只输出优化后的【问题】，不要输出多余内容。"

    def parse_output(self, raw: str) -> Pair | None:
        return pair_or_none(raw.strip(), None)
