"""``generate_qa_from_text_mapper``: Data-Juicer's question-answer generation from a text, asked of
an OpenAI-compatible endpoint serving the model (Data-Juicer loads ``hf_model`` in process).

Rows stay one to one, as every raypress mapper's (the ledger follows each row through the DAG):
where Data-Juicer emits a row per pair, raypress writes the first pair into ``query`` /
``response`` and all of them (at most ``max_num``) into ``qa_pairs``; with ``max_num: 1`` that is
Data-Juicer's output.  A text that yields no pair is quarantined with the model's answer (Data-Juicer
drops it with a warning)."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from pydantic import Field, PositiveInt

from raypress.operators.llm.api.ops import LLMMapper
from raypress.operators.llm.api.params import HFModelParams, QAParams, api_model_field
from raypress.operators.registry import register

PAIR = pa.struct([("query", pa.string()), ("response", pa.string())])


class GenerateQAFromTextParams(QAParams, HFModelParams):
    hf_model: str | None = api_model_field("alibaba-pai/pai-qwen1_5-7b-doc2qa")
    max_num: PositiveInt | None = Field(None, description="most pairs kept per text (None: all)")
    output_pattern: str | None = Field(None, description="regex found repeatedly in the answer (dot matches "
                                       "newlines); groups: question, answer")
    qa_pairs_key: str = Field("qa_pairs", description="column for every pair found (a list of {query, response})")

    PATTERN_FLAGS = re.DOTALL


@register("generate_qa_from_text_mapper")
class GenerateQAFromTextMapper(LLMMapper[GenerateQAFromTextParams]):
    """Generate question-answer pairs from each text with an LLM (the text is the whole prompt, as in
    Data-Juicer; pairs parsed from Human:/Assistant: turns); the first pair -> query/response."""

    MODEL_FIELD = "hf_model"
    DEFAULT_OUTPUT_PATTERN = r"Human:(.*?)Assistant:(.*?)(?=Human|$)"

    def output_columns(self) -> dict[str, pa.DataType]:
        p = self.params
        return {p.query_key: pa.string(), p.response_key: pa.string(), p.qa_pairs_key: pa.list_(PAIR)}

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        return [{"role": "user", "content": row[self.params.text_key]}]

    def parse_output(self, raw: str) -> list[tuple[str, str]] | None:
        pairs = [(q.strip(), a.strip()) for q, a in self.output_pattern.findall(raw)]
        if self.params.max_num is not None:
            pairs = pairs[: self.params.max_num]
        return pairs or None

    def row_outputs(self, row: dict[str, Any], parsed: list[tuple[str, str]]) -> dict[str, Any]:
        p = self.params
        return {p.query_key: parsed[0][0], p.response_key: parsed[0][1],
                p.qa_pairs_key: [{"query": q, "response": a} for q, a in parsed]}
