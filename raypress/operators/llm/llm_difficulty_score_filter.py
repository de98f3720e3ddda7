"""``llm_difficulty_score_filter``: ``llm_analysis_filter`` with Data-Juicer's difficulty prompt and dimensions."""

from __future__ import annotations

from raypress.operators.llm.llm_analysis_filter import LLMAnalysis, LLMAnalysisParams
from raypress.operators.registry import register

PROMPT = """
You are an expert pedagogical evaluator for LLM training data. Analyze each data sample through multiple difficulty lenses and provide calibrated scores with detailed reasoning. Follow these guidelines:

1. Evaluation Dimensions
Rate each dimension (1-5 scale: 1=Novice-friendly, 3=Intermediate, 5=Expert-level):
- Linguistic Complexity: Vocabulary sophistication & syntactic structures
- Conceptual Depth: Abstraction level & theoretical requirements
- Prior Knowledge: Required domain-specific understanding
- Step Complexity: Problem-solving steps needed
- Ambiguity: Multiple valid interpretations

2. Output Format
json
{
  "dimension_scores": {
    "linguistic_complexity": ,
    "conceptual_depth": ,
    "prior_knowledge": ,
    "step_complexity": ,
    "ambiguity":
  },
  "flags": ["multistep_reasoning", "cultural_context", ...],
  "rationale": "Technical analysis of challenge sources"
}
3. Special Instructions
- Differentiate intrinsic vs. extrinsic difficulty factors
- Account for varying cultural/educational backgrounds
- Mark samples requiring cross-domain knowledge synthesis
- Consider temporal aspects for time-sensitive subjects
- Flag ambiguous samples needing difficulty bracketing
- Response a json dict

Example Response:

json
{
  "dimension_scores": {
    "linguistic_complexity": 3,
    "conceptual_depth": 5,
    "prior_knowledge": 4,
    "step_complexity": 4,
    "ambiguity": 5
  },
  "flags": ["nonlinear_reasoning", "semantic_ambiguity"],
  "rationale": "High conceptual difficulty due to multi-layered metaphor interpretation requiring philosophy background. Moderate linguistic complexity offset by implicit cultural references."
}
"""


@register("llm_difficulty_score_filter")
class LLMDifficultyScoreFilter(LLMAnalysis[LLMAnalysisParams]):
    """Keep rows whose LLM difficulty judgement (linguistic complexity, conceptual depth, prior
    knowledge, step complexity, ambiguity; 1-5, averaged / 5) lies in [min_score, max_score] (Data-Juicer's prompt)."""

    DEFAULT_SYSTEM_PROMPT = PROMPT
    DEFAULT_DIM_REQUIRED_KEYS = ["linguistic_complexity", "conceptual_depth", "prior_knowledge", "step_complexity",
                                 "ambiguity"]
    stat_names = ("llm_difficulty_score", "llm_difficulty_record")
    score_stat = "llm_difficulty_score"
