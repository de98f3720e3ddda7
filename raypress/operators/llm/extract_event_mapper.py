"""``extract_event_mapper``: Data-Juicer's plot-event extraction, asked of an OpenAI-compatible
endpoint; events and their characters go to the ``meta`` struct.

Rows stay one to one (the ledger follows each row): where Data-Juicer emits a row per event with
one description and its character list, raypress keeps the row and writes the lists, in the
answer's order — ``event_description`` a list of descriptions, ``relevant_characters`` a list of
character lists.  ``extract_support_text_mapper`` takes either form."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.llm.api import meta_keys as mk
from raypress.operators.llm.api.ops import LLMMapper, system_and_user
from raypress.operators.llm.api.params import ExtractionParams
from raypress.operators.llm.api.text import split_text_by_punctuation
from raypress.operators.registry import register


class ExtractEventParams(ExtractionParams):
    event_desc_key: str = Field(mk.EVENT_DESCRIPTION, description="meta field for the event descriptions")
    relevant_char_key: str = Field(mk.RELEVANT_CHARACTERS, description="meta field for each event's characters")
    output_pattern: str | None = Field(None, description="regex (verbose, dot matches newlines) of one event; groups: "
                                       "number, description, characters")


@register("extract_event_mapper")
class ExtractEventMapper(LLMMapper[ExtractEventParams]):
    """Summarise each text's plot into events and their characters with an LLM (Data-Juicer's prompt;
    ### 情节N sections) into meta.event_description / meta.relevant_characters, as lists."""

    DEFAULT_SYSTEM_PROMPT = (
        "给定一段文本，对文本的情节进行分点总结，并抽取与情节相关的人物。\n"
        "要求：\n"
        "- 尽量不要遗漏内容，不要添加文本中没有的情节，符合原文事实\n"
        "- 联系上下文说明前因后果，但仍然需要符合事实\n"
        "- 不要包含主观看法\n"
        "- 注意要尽可能保留文本的专有名词\n"
        "- 注意相关人物需要在对应情节中出现\n"
        "- 只抽取情节中的主要人物，不要遗漏情节的主要人物\n"
        "- 总结格式如下：\n"
        "### 情节1：\n"
        "- **情节描述**： ...\n"
        "- **相关人物**：人物1，人物2，人物3，...\n"
        "### 情节2：\n"
        "- **情节描述**： ...\n"
        "- **相关人物**：人物1，人物2，...\n"
        "### 情节3：\n"
        "- **情节描述**： ...\n"
        "- **相关人物**：人物1，...\n"
        "...\n"
    )
    DEFAULT_INPUT_TEMPLATE = "# 文本\n```\n{text}\n```\n"
    DEFAULT_OUTPUT_PATTERN = r"""
        \#\#\#\s*情节(\d+)：\s*
        -\s*\*\*情节描述\*\*\s*：\s*(.*?)\s*
        -\s*\*\*相关人物\*\*\s*：\s*(.*?)(?=\#\#\#|\Z)
    """

    def meta_fields(self) -> dict[str, pa.DataType]:
        return {self.params.event_desc_key: mk.STRINGS, self.params.relevant_char_key: pa.list_(mk.STRINGS)}

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        return system_and_user(self.system_prompt, self.input_template.format(text=row[self.params.text_key]))

    def parse_output(self, raw: str) -> tuple[list[str], list[list[str]]] | None:
        events, characters = [], []
        for _, description, names in self.output_pattern.findall(raw):
            names = split_text_by_punctuation(names)
            if names:
                events.append(description)
                characters.append(names)
        return (events, characters) if events else None

    def row_outputs(self, row: dict[str, Any], parsed: tuple[list[str], list[list[str]]]) -> dict[str, Any]:
        return {self.params.event_desc_key: parsed[0], self.params.relevant_char_key: parsed[1]}
