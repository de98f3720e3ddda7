"""``extract_support_text_mapper``: Data-Juicer's support-text extraction — the passage of the text
that a summary (``meta.event_description`` by default) describes — asked of an OpenAI-compatible
endpoint; the passage goes to the ``meta`` struct (``support_text_key``).

The summary may be one string (Data-Juicer's rows) or a list of them (raypress's
``extract_event_mapper``): a list gets one request and one passage per summary.  As in
Data-Juicer, an empty answer (after ``try_num`` requests) falls back to the summary itself, and a
row without a summary keeps its meta as it is."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pydantic import Field

from raypress.operators.llm.api import meta_keys as mk
from raypress.operators.llm.api.ops import META_COL, LLMMapper, UnparseableResponse, system_and_user
from raypress.operators.llm.api.params import ExtractionParams
from raypress.operators.registry import register


class ExtractSupportTextParams(ExtractionParams):
    summary_key: str = Field(mk.EVENT_DESCRIPTION, description="meta field holding the summary (or a list of them)")
    support_text_key: str = Field(mk.SUPPORT_TEXT, description="meta field for the passage (a list for a list)")
    input_template: str | None = Field(None, description="user message, with {text} and {summary}")


@register("extract_support_text_mapper")
class ExtractSupportTextMapper(LLMMapper[ExtractSupportTextParams]):
    """Extract the passage of each text that its summary in meta describes with an LLM into
    meta.support_text (Data-Juicer's prompt; an empty answer falls back to the summary)."""

    DEFAULT_SYSTEM_PROMPT = (
        "你将扮演一个文本摘录助手的角色。你的主要任务是基于给定"
        "的文章（称为“原文”）以及对原文某个部分的简短描述或总结"
        "（称为“总结”），准确地识别并提取出与该总结相对应的原文"
        "片段。\n"
        "要求：\n"
        "- 你需要尽可能精确地匹配到最符合总结内容的那部分内容\n"
        "- 如果存在多个可能的答案，请选择最贴近总结意思的那个\n"
        "- 下面是一个例子帮助理解这一过程：\n"
        "### 原文：\n"
        "《红楼梦》是中国古典小说四大名著之一，由清代作家曹雪芹创"
        "作。它讲述了贾宝玉、林黛玉等人的爱情故事及四大家族的兴衰"
        "历程。书中通过复杂的人物关系展现了封建社会的各种矛盾冲突"
        "。其中关于贾府内部斗争的部分尤其精彩，特别是王熙凤与尤二"
        "姐之间的争斗，生动描绘了权力争夺下的女性形象。此外，《红"
        "楼梦》还以其精美的诗词闻名，这些诗词不仅增添了文学色彩，"
        "也深刻反映了人物的性格特点和命运走向。\n\n"
        "### 总结：\n"
        "描述了书中的两个女性角色之间围绕权力展开的竞争。\n\n"
        "### 原文摘录：\n"
        "其中关于贾府内部斗争的部分尤其精彩，特别是王熙凤与尤二姐"
        "之间的争斗，生动描绘了权力争夺下的女性形象。"
    )
    DEFAULT_INPUT_TEMPLATE = "### 原文：\n{text}\n\n" "### 总结：\n{summary}\n\n" "### 原文摘录：\n"
    expected = "a non-empty answer"

    def __init__(self, params: ExtractSupportTextParams, artifacts: dict | None = None):
        super().__init__(params, artifacts)
        self.summary_lists = False  # set per batch from the summary's Arrow type

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.text_key, META_COL)

    def meta_fields(self) -> dict[str, pa.DataType]:
        return {self.params.support_text_key: mk.STRINGS if self.summary_lists else pa.string()}

    def process_batch(self, table: pa.Table) -> pa.Table:
        meta = table.schema.field(META_COL).type if META_COL in table.column_names else None
        summary = meta.field(self.params.summary_key).type \
            if meta is not None and pa.types.is_struct(meta) and meta.get_field_index(self.params.summary_key) >= 0 \
            else pa.string()
        self.summary_lists = pa.types.is_list(summary) or pa.types.is_large_list(summary)
        return super().process_batch(table)

    def answer_row(self, row: dict[str, Any]) -> dict[str, Any]:
        done = self.present_meta(row)
        if done is not None:
            return done
        summary = (row.get(META_COL) or {}).get(self.params.summary_key)
        if isinstance(summary, str):
            return {self.params.support_text_key: self.support_text(row[self.params.text_key], summary)}
        if isinstance(summary, list) and all(isinstance(s, str) for s in summary):
            return {self.params.support_text_key: [self.support_text(row[self.params.text_key], s) for s in summary]}
        return {}  # no summary: Data-Juicer keeps the row as it is

    def support_text(self, text: str, summary: str) -> str:
        messages = system_and_user(self.system_prompt, self.input_template.format(text=text, summary=summary))
        try:
            return self.ask(messages, lambda raw: raw.strip() or None)
        except UnparseableResponse:
            return summary
