"""``sentence_augmentation_mapper``: Data-Juicer's sentence augmentation (it runs ``hf_model`` in
process), asked of an OpenAI-compatible endpoint serving that model; the augmented sentence goes to
``text_key_second``.  Data-Juicer's generation knobs become the request's ``max_tokens``,
``temperature`` and ``top_p``; beam search has no chat-API counterpart."""

from __future__ import annotations

from typing import Any, Literal

import pyarrow as pa
from pydantic import Field, PositiveInt

from raypress.operators.llm.api.ops import LLMMapper, system_and_user
from raypress.operators.llm.api.params import ApiParams, api_model_field
from raypress.operators.registry import register

DEFAULT_SYSTEM_PROMPT = "A chat between a curious user and an artificial \
    intelligence assistant. The assistant gives helpful, detailed, and \
        polite answers to the user's questions."


class SentenceAugmentationParams(ApiParams):
    hf_model: str | None = api_model_field("Qwen/Qwen2-7B-Instruct")
    system_prompt: str | None = Field(None, description="system prompt (default: Data-Juicer's)")
    task_sentence: str = Field(min_length=1, description="the instruction, after 'Here is a sentence: \"...\". '")
    max_new_tokens: PositiveInt = Field(256, description="sent as max_tokens")
    temperature: float = Field(0.2, ge=0)
    top_p: float | None = Field(None, gt=0, le=1)
    num_beams: Literal[1] = Field(1, description="beam search is not part of the chat API: 1 only")
    text_key_second: str = Field(min_length=1, description="column for the augmented sentence")


@register("sentence_augmentation_mapper")
class SentenceAugmentationMapper(LLMMapper[SentenceAugmentationParams]):
    """Write an augmented version of each sentence with an LLM into text_key_second (Data-Juicer's
    prompt: 'Here is a sentence: "…". ' + task_sentence; the answer stripped of quotes)."""

    MODEL_FIELD = "hf_model"
    DEFAULT_SYSTEM_PROMPT = DEFAULT_SYSTEM_PROMPT
    expected = "a non-empty answer"

    def output_columns(self) -> dict[str, pa.DataType]:
        return {self.params.text_key_second: pa.string()}

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        p = self.params
        return system_and_user(self.system_prompt, 'Here is a sentence: "' + row[p.text_key] + '". ' + p.task_sentence)

    def request_fields(self) -> dict[str, Any]:
        p = self.params
        knobs = {"max_tokens": p.max_new_tokens, "temperature": p.temperature,
                 **({"top_p": p.top_p} if p.top_p is not None else {})}
        return {**knobs, **p.sampling_params}

    def parse_output(self, raw: str) -> str | None:
        return raw.strip().strip('"') or None

    def row_outputs(self, row: dict[str, Any], parsed: str) -> dict[str, Any]:
        return {self.params.text_key_second: parsed}
