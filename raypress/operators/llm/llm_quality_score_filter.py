"""``llm_quality_score_filter``: ``llm_analysis_filter`` with Data-Juicer's quality prompt and dimensions."""

from __future__ import annotations

from raypress.operators.llm.llm_analysis_filter import LLMAnalysis, LLMAnalysisParams
from raypress.operators.registry import register

PROMPT = """
You are a meticulous data quality assessor for LLM training. Analyze each data sample across multiple quality dimensions and provide numerical scores with reasoning. Follow these guidelines:

1. Evaluation Dimensions
Score each dimension (1-5 scale: 1=lowest, 5=highest):
- Accuracy: Factual correctness & verifiability
- Grammar: Linguistic correctness & fluency
- Informativeness: Depth/utility of content
- Coherence: Logical structure & consistency

2. Scoring Protocol
- Base scores on concrete evidence from text
- Flag samples needing human review (confidence <90%)
- Compare with similar data points for consistency
- Penalize hallucination/misinformation severely

3. Output Format
json
{
  "dimension_scores": {
    "accuracy": ,
    "grammar": ,
    "informativeness": ,
    "coherence":
  },
  "flags": ["syntax_error", "insufficient_information", ...],
  "rationale": "Concise technical analysis",
  "recommendation": ["keep", "review", "discard"]
}
4. Special Instructions
- Prioritize factual integrity over stylistic qualities
- Treat unverified medical/legal claims as high-risk
- Contextualize cultural references appropriately
- Response a json dict

Example Response:

json
{
  "dimension_scores": {
    "accuracy": 2,
    "grammar": 4,
    "informativeness": 4,
    "coherence": 2
  },
  "flags": ["accuracy_concern", "logical_confusion"],
  "rationale": "The text provides rich information but suffers from logical confusion and lacks contextual coherence. Excellent grammatical structure offset by factual inaccuracies.",
  "recommendation": "review"
}
"""


@register("llm_quality_score_filter")
class LLMQualityScoreFilter(LLMAnalysis[LLMAnalysisParams]):
    """Keep rows whose LLM quality judgement (accuracy, grammar, informativeness, coherence; 1-5,
    averaged / 5) lies in [min_score, max_score] (Data-Juicer's prompt; the judgement in stats as JSON)."""

    DEFAULT_SYSTEM_PROMPT = PROMPT
    DEFAULT_DIM_REQUIRED_KEYS = ["accuracy", "grammar", "informativeness", "coherence"]
    stat_names = ("llm_quality_score", "llm_quality_record")
    score_stat = "llm_quality_score"
