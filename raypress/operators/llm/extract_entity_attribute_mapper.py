"""``extract_entity_attribute_mapper``: Data-Juicer's attribute extraction — for each asked entity
and attribute, a description and quoted examples from the text — asked of an OpenAI-compatible
endpoint; the results go to the ``meta`` struct as parallel lists (one entry per entity x
attribute, in that order)."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.llm.api import meta_keys as mk
from raypress.operators.llm.api.ops import LLMMapper
from raypress.operators.llm.api.params import ApiParams, api_model_field
from raypress.operators.registry import register


class ExtractEntityAttributeParams(ApiParams):
    api_model: str | None = api_model_field()
    query_entities: list[str] = Field(default_factory=list, description="entities asked about")
    query_attributes: list[str] = Field(default_factory=list, description="attributes asked for each entity")
    entity_key: str = Field(mk.MAIN_ENTITIES, description="meta field for the entities asked")
    attribute_key: str = Field(mk.ATTRIBUTES, description="meta field for the attributes asked")
    attribute_desc_key: str = Field(mk.ATTRIBUTE_DESCRIPTIONS, description="meta field for the descriptions")
    support_text_key: str = Field(mk.ATTRIBUTE_SUPPORT_TEXTS, description="meta field for the quoted examples")
    system_prompt_template: str | None = Field(None, description="system prompt with {entity} and {attribute}")
    input_template: str | None = Field(None, description="user message with {text}")
    attr_pattern_template: str | None = Field(None, description="regex (verbose, dot matches newlines) with "
                                              "{attribute}; group: the description")
    demo_pattern: str | None = Field(None, description="regex (verbose, dot matches newlines) of one quoted "
                                     "example; groups: number, example")
    drop_text: bool = Field(False, description="remove the text column from the output")

    PATTERN_FLAGS = re.VERBOSE | re.DOTALL


@register("extract_entity_attribute_mapper")
class ExtractEntityAttributeMapper(LLMMapper[ExtractEntityAttributeParams]):
    """Describe each asked attribute of each asked entity from the text, with quoted examples, using
    an LLM (Data-Juicer's prompt; ## attribute：… then ### 代表性示例摘录N blocks) into meta lists."""

    DEFAULT_SYSTEM_PROMPT_TEMPLATE = (
        "给定一段文本，从文本中总结{entity}的{attribute}，并且从原文摘录最能说明该{attribute}的代表性示例。\n"
        "要求：\n"
        "- 摘录的示例应该简短。\n"
        "- 遵循如下的回复格式：\n"
        "# {entity}\n"
        "## {attribute}：\n"
        "...\n"
        "### 代表性示例摘录1：\n"
        "```\n"
        "...\n"
        "```\n"
        "### 代表性示例摘录2：\n"
        "```\n"
        "...\n"
        "```\n"
        "...\n"
    )
    DEFAULT_INPUT_TEMPLATE = "# 文本\n```\n{text}\n```\n"
    DEFAULT_ATTR_PATTERN_TEMPLATE = r"\#\#\s*{attribute}：\s*(.*?)(?=\#\#\#|\Z)"
    DEFAULT_DEMON_PATTERN = r"\#\#\#\s*代表性示例摘录(\d+)：\s*```\s*(.*?)```\s*(?=\#\#\#|\Z)"
    DEFAULT_DEMO_PATTERN = DEFAULT_DEMON_PATTERN  # Data-Juicer's name above, the param's here

    def __init__(self, params: ExtractEntityAttributeParams, artifacts: dict | None = None):
        super().__init__(params, artifacts)
        self.expected = (f"a description matching {self.attr_pattern_template!r} and quoted examples matching "
                         f"{self.demo_pattern.pattern!r}")

    def meta_fields(self) -> dict[str, pa.DataType]:
        p = self.params
        return {p.entity_key: mk.STRINGS, p.attribute_key: mk.STRINGS, p.attribute_desc_key: mk.STRINGS,
                p.support_text_key: pa.list_(mk.STRINGS)}

    def answer_row(self, row: dict[str, Any]) -> dict[str, Any]:
        done = self.present_meta(row)
        if done is not None:
            return done
        p = self.params
        pairs = [(e, a) for e in p.query_entities for a in p.query_attributes]
        user = {"role": "user", "content": self.input_template.format(text=row[p.text_key])}
        answers = []
        for entity, attribute in pairs:
            system = {"role": "system", "content": self.system_prompt_template.format(entity=entity, attribute=attribute)}
            answers.append(self.ask([system, user], lambda raw, a=attribute: self.parse_output(raw, a)))
        return {p.entity_key: [e for e, _ in pairs], p.attribute_key: [a for _, a in pairs],
                p.attribute_desc_key: [desc for desc, _ in answers], p.support_text_key: [demos for _, demos in answers]}

    def parse_output(self, raw: str, attribute: str) -> tuple[str, list[str]] | None:
        """(description, examples); None unless both are there (Data-Juicer's test)."""
        # the name is escaped (Data-Juicer inserts it raw): a space in it stays literal in a verbose pattern
        pattern = re.compile(self.attr_pattern_template.format(attribute=re.escape(attribute)), re.VERBOSE | re.DOTALL)
        matches = pattern.findall(raw)
        description = matches[0].strip() if matches else ""
        demos = [demo.strip() for _, demo in self.demo_pattern.findall(raw) if demo.strip()]
        return (description, demos) if description and demos else None
