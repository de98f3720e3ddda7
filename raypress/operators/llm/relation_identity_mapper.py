"""``relation_identity_mapper``: Data-Juicer's relation identification between two named entities
of a text, asked of an OpenAI-compatible endpoint; the relation goes to the ``meta`` struct."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.llm.api import meta_keys as mk
from raypress.operators.llm.api.ops import LLMMapper, system_and_user
from raypress.operators.llm.api.params import ApiParams, api_model_field
from raypress.operators.registry import register


class RelationIdentityParams(ApiParams):
    api_model: str | None = api_model_field()
    source_entity: str = Field(min_length=1, description="the entity whose relation is asked (entity1)")
    target_entity: str = Field(min_length=1, description="the entity the relation is of (entity2)")
    output_key: str = Field(mk.ROLE_RELATION, description="meta field for the relation")
    system_prompt_template: str | None = Field(None, description="system prompt with {entity1} and {entity2}")
    input_template: str | None = Field(None, description="user message with {entity1}, {entity2} and {text}")
    output_pattern_template: str | None = Field(None, description="regex (verbose, dot matches newlines) with "
                                                "{entity1} and {entity2}; groups: reasoning, relation")
    drop_text: bool = Field(False, description="remove the text column from the output")


@register("relation_identity_mapper")
class RelationIdentityMapper(LLMMapper[RelationIdentityParams]):
    """Identify what target_entity is to source_entity in each text with an LLM into
    meta.role_relation (Data-Juicer's prompt; 分析推理 then 所以…是…的：relation)."""

    DEFAULT_SYSTEM_PROMPT_TEMPLATE = (
        "给定关于{entity1}和{entity2}的文本信息。"
        "判断{entity1}和{entity2}之间的关系。\n"
        "要求：\n"
        "- 关系用一个或多个词语表示，必要时可以加一个形容词来描述这段关系\n"
        "- 输出关系时不要参杂任何标点符号\n"
        "- 需要你进行合理的推理才能得出结论\n"
        "- 如果两个人物身份是同一个人，输出关系为：另一个身份\n"
        "- 输出格式为：\n"
        "分析推理：...\n"
        "所以{entity2}是{entity1}的：...\n"
        "- 注意输出的是{entity2}是{entity1}的什么关系，而不是{entity1}是{entity2}的什么关系"
    )
    DEFAULT_INPUT_TEMPLATE = "关于{entity1}和{entity2}的文本信息：\n```\n{text}\n```\n"
    DEFAULT_OUTPUT_PATTERN_TEMPLATE = r"""
        \s*分析推理：\s*(.*?)\s*
        \s*所以{entity2}是{entity1}的：\s*(.*?)\Z
    """

    def __init__(self, params: RelationIdentityParams, artifacts: dict | None = None):
        super().__init__(params, artifacts)
        p = self.params
        self.system_prompt = self.system_prompt_template.format(entity1=p.source_entity, entity2=p.target_entity)
        # the names are escaped (Data-Juicer inserts them raw): a '.' or a space in a name stays literal
        pattern = self.output_pattern_template.format(
            entity1=re.escape(p.source_entity), entity2=re.escape(p.target_entity))
        self.output_pattern = re.compile(pattern, re.VERBOSE | re.DOTALL)
        self.expected = f"output_pattern {pattern!r}"

    def meta_fields(self) -> dict[str, pa.DataType]:
        return {self.params.output_key: pa.string()}

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        p = self.params
        text = self.input_template.format(entity1=p.source_entity, entity2=p.target_entity, text=row[p.text_key])
        return system_and_user(self.system_prompt, text)

    def parse_output(self, raw: str) -> str | None:
        matches = self.output_pattern.findall(raw)
        return matches[-1][1].strip() or None if matches else None

    def row_outputs(self, row: dict[str, Any], parsed: str) -> dict[str, Any]:
        return {self.params.output_key: parsed}
