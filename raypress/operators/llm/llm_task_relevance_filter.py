"""``llm_task_relevance_filter``: ``llm_analysis_filter`` judging how relevant each row is to a
downstream task — described by ``task_desc`` and/or shown by ``valid_dataset`` examples, put ahead
of the row in the user message — and keeping rows whose relevance is at least ``min_score``.

Data-Juicer's other way to give the task (calling ``prepare_valid_feature`` on the op object) has
no pipeline counterpart: a pipeline gives ``task_desc`` or ``valid_dataset``, and validation says
so when it gives neither."""

from __future__ import annotations

from typing import Any, Sequence

from pydantic import Field, PositiveInt, model_validator

from raypress.operators.llm.llm_analysis_filter import LLMAnalysis, LLMAnalysisParams
from raypress.operators.registry import register

PROMPT = """
You are a meticulous data quality assessor for LLM training. Evaluate whether each data sample is beneficial for improving model performance on a downstream task.
The downstream task will be characterized by a task description or/and some validation data in the user query.

1. Evaluation Dimensions
Score each dimension (1-5 scale: 1=lowest, 5=highest):
- Topical Relevance: Does the content or theme of the sample relate to those seen in the validation set?
- Linguistic Style Match: Does the style, tone, and complexity of the sample resemble those in the validation set?
- Task Match: If the validation examples are from a task (e.g., summarization, classification, etc.), is the sample solving a similar task?
- Knowledge Alignment: Is the type of knowledge or reasoning required in the sample aligned with that in the validation set?
- Potential Utility: If this sample were added to the training data, is it likely to improve generalization to the validation set?

2. Output Format
json
{
  "dimension_scores": {
    "topical_relevance": ,
    "linguistic_style_match": ,
    "task_match": ,
    "knowledge_alignment": ,
    "potential_utility": ,
  },
  "flags": ["topical_mismatch", "task_irrelevant", ...],
  "rationale": "Technical analysis of the relevance",
}
3. Special Instructions
- Focus on **alignment with the validation examples**, not general quality.
- If the sample is entirely unrelated to the validation set (e.g., different topic, domain, or task), assign a score of 1 and explain briefly.
- If the validation examples are ambiguous, make a **conservative judgment** based on their shared patterns.
- Be consistent in your rating scale across evaluations.
- Do **not** make up or reinterpret the sample content; base all reasoning on the actual text.
- Avoid overrating stylistically impressive but **task-irrelevant** samples.

Example Response:

json
{
  "dimension_scores": {"topical_relevance": 2, "linguistic_style_match": 4, "task_match": 2, "knowledge_alignment": 2, "potential_utility": 2},
  "flags": ["topical_mismatch"],
  "rationale": "The text provides rich information about American history, while the validation tasks is on multistep reasoning to solve challenging math problems."
}
"""


class LLMTaskRelevanceParams(LLMAnalysisParams):
    valid_dataset: list[dict[str, Any]] | None = Field(None, description="examples of the task's data (rows with "
                                                       "the input keys)")
    task_desc: str | None = Field(None, description="what the task is")
    n_shot: PositiveInt | None = Field(None, description="examples of valid_dataset shown (None: all)")

    @model_validator(mode="after")
    def _the_task_is_given(self) -> "LLMTaskRelevanceParams":
        if not self.valid_dataset and not self.task_desc:
            raise ValueError("give the task: task_desc, valid_dataset (examples of its data), or both")
        return self


@register("llm_task_relevance_filter")
class LLMTaskRelevanceFilter(LLMAnalysis[LLMTaskRelevanceParams]):
    """Keep rows an LLM judges relevant to a task (topic, style, task, knowledge, utility; 1-5, averaged
    / 5, at least min_score), given by task_desc and/or valid_dataset examples (Data-Juicer's prompt)."""

    DEFAULT_SYSTEM_PROMPT = PROMPT
    DEFAULT_DIM_REQUIRED_KEYS = ["topical_relevance", "linguistic_style_match", "task_match", "knowledge_alignment",
                                 "potential_utility"]
    stat_names = ("llm_task_relevance", "llm_task_relevance_record")
    score_stat = "llm_task_relevance"

    def __init__(self, params: LLMTaskRelevanceParams, artifacts: dict | None = None):
        super().__init__(params, artifacts)
        p = self.params
        block = f"# Task Description\n{p.task_desc}\n\n" if p.task_desc is not None else ""
        if p.valid_dataset:
            shown = [self.fields_text(example) for example in p.valid_dataset[: p.n_shot or len(p.valid_dataset)]]
            block += "# Validation Data\n" + "\n\n".join(f"'''\n{text}\n'''" for text in shown) + "\n\n"
        self.valid_info = block

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        messages = super().build_messages(row)
        messages[1]["content"] = self.valid_info + messages[1]["content"]
        return messages

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        return [None if score is None else self.range_rule.reason(score, self.score_stat, self.params.min_score, None)
                for score in stats[self.score_stat]]
