"""``llm_analysis_filter``: Data-Juicer's LLM judgement of each row — scores per dimension (1-5),
tags, flags, a rationale and a recommendation, as JSON — through its API path (``is_hf_model:
false``, an OpenAI-compatible endpoint); the mean of the required dimensions / 5 is the score kept
in [min_score, max_score].  ``llm_quality_score_filter`` and ``llm_difficulty_score_filter`` are
the same op with their own prompt, dimensions and stats.

Stats: the score (null when the answer has no ``dimension_scores``: the row is kept, as in
Data-Juicer) and the whole judgement as a JSON string (``*_record``; Data-Juicer also copies each
tag into its own stat, whose names depend on the answer: here they stay in the record).  An answer
without a JSON object, or missing a required dimension, is asked again, then quarantined."""

from __future__ import annotations

import json
import re
from typing import Any, ClassVar, TypeVar

from pydantic import Field, model_validator

from raypress.operators.llm.api.ops import LLMFilter, system_and_user
from raypress.operators.llm.api.params import HFModelParams, api_model_field
from raypress.operators.registry import register

# Data-Juicer's: a JSON object with at most one level of nested braces
OUTER_BRACES = re.compile(r"(\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\})")
ANALYSIS_PROMPT = """You are a meticulous data quality assessor for LLM training. Analyze each data sample across multiple quality dimensions and provide numerical scores, tags, and reasoning. Follow these guidelines:

1. Evaluation Dimensions
Score each dimension (1-5 scale: 1=lowest, 5=highest):
- Clarity: How easy is the sample to understand?
- Relevance: How relevant is the sample to the intended task or topic?
- Usefulness: How helpful or valuable is the information in the sample?
- Fluency: How natural and well-written is the sample (grammar, style)?

2. Tagging:
Assign descriptive tags to categorize the data sample (string or list of string).  Examples include:
- "Topic": The main subject of the sample (e.g., "Machine Learning", "Historical Event").
- "Style":  The writing style or genre (e.g., "Informational", "Narrative", "Technical").
3. Scoring Protocol
- Base scores and tags on concrete evidence from the text.
- Flag samples needing human review (confidence <90%).
- Compare with similar data points for consistency.
- Penalize hallucination/misinformation severely (if applicable).

4. Output Format
json
{
  "dimension_scores": {
    "clarity": ,
    "relevance": ,
    "usefulness": ,
    "fluency":
  },
  "tags": {
    "topic": ,
    "style":
  },
  "flags": ["syntax_error", "insufficient_information", ...],
  "rationale": "Concise analysis of quality dimensions and tagging decisions.",
  "recommendation": ["keep", "review", "discard"]
}

5. Special Instructions
- Prioritize accuracy and relevance over stylistic qualities.
- Contextualize cultural references appropriately.
- Clearly justify your scores, tags, and flags in the rationale.
- Response a json dict

Example Response:

json
{
  "dimension_scores": {
    "clarity": 4,
    "relevance": 5,
    "usefulness": 3,
    "fluency": 4
  },
  "tags": {
    "topic": "Artificial Intelligence",
    "style": "Informational"
  },
  "flags": ["minor_grammar_issues"],
  "rationale": "The text is highly relevant and generally well-written, but suffers from some minor grammar issues and could be more useful with additional examples.  The topic is clearly Artificial Intelligence, and the difficulty is appropriate for an intermediate audience.",
  "recommendation": "review"
}
"""


class LLMAnalysisParams(HFModelParams):
    api_or_hf_model: str | None = api_model_field("gpt-4o")
    min_score: float = Field(0.5, description="keep rows whose score >= this")
    max_score: float = Field(1.0, description="keep rows whose score <= this")
    is_hf_model: bool = Field(False, description="accepted for Data-Juicer recipes: raypress always asks the "
                              "endpoint, which serves the model under api_or_hf_model")
    input_keys: list[str] = Field(["text"], description="columns shown to the model (those a row lacks are left out)")
    field_names: list[str] = Field(["Text"], description="their names in the prompt, one per input key")
    system_prompt: str | None = Field(None, description="system prompt (default: the op's, Data-Juicer's)")
    input_template: str | None = Field(None, description="user message, with {data}")
    field_template: str | None = Field(None, description="one field, with {field_name} and {field_data}")
    dim_required_keys: list[str] | None = Field(None, description="dimensions averaged into the score "
                                                "(default: the op's)")

    @model_validator(mode="after")
    def _one_name_per_key(self) -> "LLMAnalysisParams":
        if len(self.input_keys) != len(self.field_names):
            raise ValueError("input_keys and field_names must correspond one to one")
        return self


AP = TypeVar("AP", bound=LLMAnalysisParams)


class LLMAnalysis(LLMFilter[AP]):
    """The shared body; subclasses name their params (``LLMAnalysis[...]``), stats and defaults."""

    MODEL_FIELD = "api_or_hf_model"
    honours_range_rule = True
    DEFAULT_SYSTEM_PROMPT: ClassVar[str] = ANALYSIS_PROMPT
    DEFAULT_INPUT_TEMPLATE = "# Data\n'''\n{data}\n'''\n\n# Response\njson\n"
    DEFAULT_FIELD_TEMPLATE = "**{field_name}**\n{field_data}"
    DEFAULT_DIM_REQUIRED_KEYS: ClassVar[list[str]] = ["clarity", "relevance", "usefulness", "fluency"]
    expected = "a JSON object with dimension_scores"

    def columns_read(self) -> tuple[str, ...]:
        return ()  # the input keys a row has are shown; Data-Juicer only warns about the others

    def fields_text(self, row: dict[str, Any]) -> str:
        """The row's input keys it has, each as ``field_template`` shows it."""
        p = self.params
        return "\n\n".join(self.field_template.format(field_name=name, field_data=row[key])
                           for key, name in zip(p.input_keys, p.field_names) if key in row)

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        return system_and_user(self.system_prompt, self.input_template.format(data=self.fields_text(row)))

    def parse_output(self, raw: str) -> tuple[float | None, dict] | None:
        """(score, judgement); None without a JSON object or with a required dimension missing."""
        match = OUTER_BRACES.search(raw)
        try:
            data = json.loads(match.group(1)) if match else None
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        scores = data.get("dimension_scores")
        if not scores or not self.dim_required_keys:
            return None, data  # Data-Juicer: no score, the row is kept
        values = [scores.get(key) if isinstance(scores, dict) else None for key in self.dim_required_keys]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return None
        return sum(values) / len(values) / 5, data

    def row_outputs(self, row: dict[str, Any], parsed: tuple[float | None, dict]) -> dict[str, Any]:
        score_stat, record_stat = self.stat_names
        return {score_stat: parsed[0], record_stat: json.dumps(parsed[1], ensure_ascii=False)}


@register("llm_analysis_filter")
class LLMAnalysisFilter(LLMAnalysis[LLMAnalysisParams]):
    """Keep rows whose LLM judgement (clarity, relevance, usefulness, fluency; 1-5, averaged / 5)
    lies in [min_score, max_score] (Data-Juicer's prompt; the judgement in stats as JSON)."""

    stat_names = ("llm_analysis_score", "llm_analysis_record")
    score_stat = "llm_analysis_score"
