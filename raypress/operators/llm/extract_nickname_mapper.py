"""``extract_nickname_mapper``: Data-Juicer's nickname extraction (who calls whom what), asked of an
OpenAI-compatible endpoint; the relations go to the ``meta`` struct (``nickname_key``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.llm.api import meta_keys as mk
from raypress.operators.llm.api.ops import LLMMapper, system_and_user
from raypress.operators.llm.api.params import ExtractionParams
from raypress.operators.llm.api.text import dedupe
from raypress.operators.registry import register


class ExtractNicknameParams(ExtractionParams):
    nickname_key: str = Field(mk.NICKNAME, description="meta field for the nickname relations")
    output_pattern: str | None = Field(None, description="regex (verbose, dot matches newlines) of one relation; "
                                       "groups: number, speaker, addressee, speaker again, addressee again, nickname")


@register("extract_nickname_mapper")
class ExtractNicknameMapper(LLMMapper[ExtractNicknameParams]):
    """Extract who calls whom by which nickname with an LLM into meta.nickname (Data-Juicer's prompt;
    ### 称呼方式N sections, the speaker and addressee named twice as a check)."""

    DEFAULT_SYSTEM_PROMPT = (
        "给定你一段文本，你的任务是将人物之间的称呼方式（昵称）提取出来。\n"
        "要求：\n"
        "- 需要给出说话人对被称呼人的称呼，不要搞反了。\n"
        "- 相同的说话人和被称呼人最多给出一个最常用的称呼。\n"
        "- 请不要输出互相没有昵称的称呼方式。\n"
        "- 输出格式如下：\n"
        "```\n"
        "### 称呼方式1\n"
        "- **说话人**：...\n"
        "- **被称呼人**：...\n"
        "- **...对...的昵称**：...\n"
        "### 称呼方式2\n"
        "- **说话人**：...\n"
        "- **被称呼人**：...\n"
        "- **...对...的昵称**：...\n"
        "### 称呼方式3\n"
        "- **说话人**：...\n"
        "- **被称呼人**：...\n"
        "- **...对...的昵称**：...\n"
        "...\n"
        "```\n"
    )
    DEFAULT_INPUT_TEMPLATE = "# 文本\n```\n{text}\n```\n"
    DEFAULT_OUTPUT_PATTERN = r"""
        \#\#\#\s*称呼方式(\d+)\s*
        -\s*\*\*说话人\*\*\s*：\s*(.*?)\s*
        -\s*\*\*被称呼人\*\*\s*：\s*(.*?)\s*
        -\s*\*\*(.*?)对(.*?)的昵称\*\*\s*：\s*(.*?)(?=\#\#\#|\Z) # for double check
    """

    def meta_fields(self) -> dict[str, pa.DataType]:
        return {self.params.nickname_key: pa.list_(mk.RELATION_TYPE_ARROW)}

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        return system_and_user(self.system_prompt, self.input_template.format(text=row[self.params.text_key]))

    def parse_output(self, raw: str) -> list[dict[str, Any]] | None:
        found = []
        for _, speaker, addressee, speaker_again, addressee_again, nickname in self.output_pattern.findall(raw):
            if speaker.strip() != speaker_again.strip() or addressee.strip() != addressee_again.strip():
                continue  # the answer contradicts itself
            speaker, addressee, nickname = speaker.strip(), addressee.strip(), nickname.strip()
            if addressee == nickname:  # a name, not a nickname
                continue
            if speaker and addressee and nickname:
                found.append((speaker, addressee, nickname))
        return [{mk.SOURCE_ENTITY: s, mk.TARGET_ENTITY: t, mk.RELATION_DESCRIPTION: n,
                 mk.RELATION_KEYWORDS: ["nickname"], mk.RELATION_STRENGTH: None}
                for s, t, n in dedupe(found)] or None

    def row_outputs(self, row: dict[str, Any], parsed: list[dict[str, Any]]) -> dict[str, Any]:
        return {self.params.nickname_key: parsed}
