"""``optimize_qa_mapper``: Data-Juicer's question-answer optimisation, asked of an OpenAI-compatible
endpoint (Data-Juicer's API path, ``is_hf_model: false``).  ``optimize_query_mapper`` and
``optimize_response_mapper`` are the same op with their own prompt and answer."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field

from raypress.operators.llm.api.params import HFModelParams, QAParams, api_model_field
from raypress.operators.llm.api.qa import Pair, QARewrite, pair_or_none
from raypress.operators.registry import register


class OptimizeQAParams(QAParams, HFModelParams):
    api_or_hf_model: str | None = api_model_field("Qwen/Qwen2.5-7B-Instruct")
    is_hf_model: bool = Field(True, description="accepted for Data-Juicer recipes: raypress always asks the endpoint, "
                              "which serves the model under api_or_hf_model")
    system_prompt: str | None = Field(None, description="system prompt (default: Data-Juicer's)")
    input_template: str | None = Field(None, description="user message, one '{}' for the formatted pair")
    qa_pair_template: str | None = Field(None, description="the pair, '{}' for question then answer")
    output_pattern: str | None = Field(None, description="regex matched at the answer's start (dot matches newlines); "
                                       "groups: question, answer")

    PATTERN_FLAGS = re.DOTALL


class OptimizeQA(QARewrite[OptimizeQAParams]):
    """The shared body: messages from the row's question and answer; the parsed answer replaces them."""

    MODEL_FIELD = "api_or_hf_model"
    DEFAULT_SYSTEM_PROMPT = (
        "请优化输入的问答对，使【问题】和【回答】都更加详细、准确。"
        "必须按照以下标记格式，直接输出优化后的问答对：\n"
        "【问题】\n"
        "优化后的问题\n"
        "【回答】\n"
        "优化后的回答"
    )
    DEFAULT_INPUT_TEMPLATE = "以下是原始问答对：\n{}"
    DEFAULT_QA_PAIR_TEMPLATE = "【问题】\n{}\n【回答】\n{}"
    DEFAULT_OUTPUT_PATTERN = r".*?【问题】\s*(.*?)\s*【回答】\s*(.*)"

    def build_input(self, row: dict[str, Any]) -> str:
        p = self.params
        return self.input_template.format(self.qa_pair_template.format(row[p.query_key], row[p.response_key]))

    def parse_output(self, raw: str) -> Pair | None:
        match = self.output_pattern.match(raw)
        return pair_or_none(match.group(1).strip(), match.group(2).strip()) if match else None


@register("optimize_qa_mapper")
class OptimizeQAMapper(OptimizeQA):
    """Make question-answer pairs more detailed and accurate with an LLM (Data-Juicer's prompt; the
    answer's 【问题】/【回答】 sections replace the pair; an answer without them is quarantined)."""
