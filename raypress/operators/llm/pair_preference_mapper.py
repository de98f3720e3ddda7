"""``pair_preference_mapper``: Data-Juicer's preference pairs — a rejected answer, opposite to the
row's answer, and the reason for it — asked of an OpenAI-compatible endpoint."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.llm.api.ops import LLMMapper, system_and_user
from raypress.operators.llm.api.params import QAParams, api_model_field
from raypress.operators.registry import register


class PairPreferenceParams(QAParams):
    api_model: str | None = api_model_field()
    system_prompt: str | None = Field(None, description="system prompt (default: Data-Juicer's)")
    input_template: str | None = Field(None, description="user message from {query}, {response} and optionally "
                                       "{reference} (the text column, '' when the row has none)")
    output_pattern: str | None = Field(None, description="regex matched at the answer's start (dot matches "
                                       "newlines); groups: rejected answer, reason")
    rejected_key: str = Field("rejected_response", description="column for the generated rejected answer")
    reason_key: str = Field("reason", description="column for the reason it was generated")

    PATTERN_FLAGS = re.DOTALL


@register("pair_preference_mapper")
class PairPreferenceMapper(LLMMapper[PairPreferenceParams]):
    """Generate a rejected answer (opposite in style, facts or stance) and its reason with an LLM,
    for preference pairs (Data-Juicer's prompt; 【回答】/【原因】 sections, both needed)."""

    DEFAULT_SYSTEM_PROMPT = (
        "你的任务是根据参考信息修改问答对中的回答，在语言风格、事实性、人物身份、立场等任一方面与原回答相反。"
        "必须按照以下标记格式输出，不要输出其他多余内容。\n"
        "【回答】\n"
        "生成的新回答\n"
        "【原因】\n"
        "生成该回答的原因"
    )
    DEFAULT_INPUT_TEMPLATE = (
        "【参考信息】\n" "{reference}\n" "\n" "以下是原始问答对：\n" "【问题】\n" "{query}\n" "【回答】\n" "{response}"
    )
    DEFAULT_OUTPUT_PATTERN = r".*?【回答】\s*(.*?)\s*【原因】\s*(.*)"

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.query_key, self.params.response_key)  # the text is optional (the reference)

    def output_columns(self) -> dict[str, pa.DataType]:
        return {self.params.rejected_key: pa.string(), self.params.reason_key: pa.string()}

    def build_input(self, row: dict[str, Any]) -> str:
        p = self.params
        return self.input_template.format_map({"query": row[p.query_key], "response": row[p.response_key],
                                               "reference": row.get(p.text_key) or ""})

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        return system_and_user(self.system_prompt, self.build_input(row))

    def parse_output(self, raw: str) -> tuple[str, str] | None:
        match = self.output_pattern.match(raw)
        if not match:
            return None
        rejected, reason = match.group(1).strip(), match.group(2).strip()
        return (rejected, reason) if rejected and reason else None

    def row_outputs(self, row: dict[str, Any], parsed: tuple[str, str]) -> dict[str, Any]:
        return {self.params.rejected_key: parsed[0], self.params.reason_key: parsed[1]}
