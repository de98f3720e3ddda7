"""``calibrate_qa_mapper``: Data-Juicer's question-answer calibration against the reference text,
asked of an OpenAI-compatible endpoint.  ``calibrate_query_mapper`` and
``calibrate_response_mapper`` are the same op with their own prompt and answer."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from raypress.operators.llm.api.params import QAParams, api_model_field
from raypress.operators.llm.api.qa import Pair, QARewrite, pair_or_none
from raypress.operators.registry import register


class CalibrateQAParams(QAParams):
    api_model: str | None = api_model_field()
    system_prompt: str | None = Field(None, description="system prompt (default: Data-Juicer's)")
    input_template: str | None = Field(None, description="user message from {reference} and {qa_pair}")
    reference_template: str | None = Field(None, description="the reference text's section, one '{}'")
    qa_pair_template: str | None = Field(None, description="the pair's section, '{}' for question then answer")
    output_pattern: str | None = Field(None, description="regex matched at the answer's start; groups: question, "
                                       "answer")


class CalibrateQA(QARewrite[CalibrateQAParams]):
    """The shared body: messages from the row's text, question and answer; the parsed answer replaces them."""

    DEFAULT_SYSTEM_PROMPT = (
        "请根据提供的【参考信息】对【问题】和【回答】进行校准，使其更加详细、准确。\n"
        "按照以下格式输出：\n"
        "【问题】\n"
        "校准后的问题\n"
        "【回答】\n"
        "校准后的回答"
    )
    DEFAULT_INPUT_TEMPLATE = "{reference}\n{qa_pair}"
    DEFAULT_REFERENCE_TEMPLATE = "【参考信息】\n{}"
    DEFAULT_QA_PAIR_TEMPLATE = "【问题】\n{}\n【回答】\n{}"
    DEFAULT_OUTPUT_PATTERN = r"【问题】\s*(.*?)\s*【回答】\s*(.*)"

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.text_key, *super().columns_read())

    def build_input(self, row: dict[str, Any]) -> str:
        p = self.params
        reference = self.reference_template.format(row[p.text_key])
        qa_pair = self.qa_pair_template.format(row[p.query_key], row[p.response_key])
        return self.input_template.format(reference=reference, qa_pair=qa_pair)

    def parse_output(self, raw: str) -> Pair | None:
        """(question, answer) from the answer's start (``re.match``, as Data-Juicer); None when neither."""
        match = self.output_pattern.match(raw)
        return pair_or_none(match.group(1).strip(), match.group(2).strip()) if match else None


@register("calibrate_qa_mapper")
class CalibrateQAMapper(CalibrateQA):
    """Calibrate question-answer pairs against the reference text with an LLM (Data-Juicer's prompt;
    the answer's 【问题】/【回答】 sections replace the pair).

    An answer without them is asked again up to ``try_num`` times, then the row is quarantined with it."""
