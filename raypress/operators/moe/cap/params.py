"""The ``moe_cap_benchmark`` op's parameters, apart from the op so that the report writer
(``cap/report.py``), which the op imports, can name them without an import cycle."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PositiveInt, model_validator

from raypress.operators.base import Params


class CapBenchmarkParams(Params):
    prompt_key: str = Field("prompt", description="column holding the prompt text")
    answer_key: str = Field("answer", description="column holding the reference answer")
    match: Literal["exact", "first_word"] = Field("exact", description="exact: first lines equal (whitespace "
                                                  "collapsed); first_word: first words equal (cloze answers)")
    limit: int = Field(64, ge=1, description="most rows benchmarked")
    concurrency: list[PositiveInt] = Field(default_factory=lambda: [1, 8], min_length=1,
                                   description="requests in flight, one level (radar system) each")
    max_tokens: int = Field(32, ge=1, description="completion tokens per request")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="0: greedy")
    hardware: str = Field("cpu", description='"cpu" (measured here at start), "H200", "H100" or "A100"')
    n_devices: int = Field(1, ge=1, description="devices the model runs on (utilisation and cost)")
    usd_per_kwh: float = Field(0.15, gt=0, description="energy price (MoE-CAP's constant)")
    amortisation_years: float = Field(3.0, gt=0, description="capital spread over this many years")
    utilisation: float = Field(1.0, gt=0, le=1, description="fraction of those years spent serving")
    power_w: float | None = Field(None, gt=0, description="override the hardware's power draw (W)")
    capital_usd: float | None = Field(None, gt=0, description="override the hardware's price (USD)")
    api_key_env: str | None = Field(None, description="env var holding the endpoint's bearer token "
                                    "(None: the endpoint Report's api_key_env)")
    timeout_s: float = Field(600.0, gt=0, description="per-request timeout")
    choices: int = Field(0, ge=0, description="log-likelihood multiple choice with this many choices per "
                         "question, built from the rows' `choice_text_key` (0: off; the accuracy axis is "
                         "then the generated answers' match)")
    choice_text_key: str = Field("text", description="column of held-out text the questions are made from")
    choice_questions: int = Field(200, ge=1, description="most multiple-choice questions")
    context_words: int = Field(24, ge=1, description="words of context per question")
    continuation_words: int = Field(6, ge=1, description="words per choice")
    windows_per_text: int = Field(0, ge=0, description="most questions per held-out text, from its consecutive "
                                  "non-overlapping windows of context_words + continuation_words words, taken "
                                  "round-robin over the texts up to choice_questions (0: every window; 1: one "
                                  "question per text, its opening words)")
    systems: list[Literal["engine", "kernels_off", "hf_generate"]] = Field(
        default_factory=list, description="other systems run in this process on the same checkpoint and prompts "
        "at the highest concurrency, for the systems radar: engine (the raypress engine in process: what the "
        "served path costs), kernels_off (the raypress engine with the torch expert path), hf_generate "
        "(Hugging Face transformers' generate, static batches)")
    systems_max_tokens: int | None = Field(
        None, ge=1, description="completion tokens per request in the systems comparison, the served target "
        "measured once more with them (None: max_tokens). Throughput and TPOT are decode measures: a request of "
        "a few tokens is over before its way in (HTTP, Serve's proxy, the replica) is paid once, so short "
        "answers compare the ways in, not the systems")
    systems_requests: int = Field(0, ge=0, description="requests in the systems comparison: the prompts that fit "
                                  "with systems_max_tokens, repeated in order up to this many (0: each once); "
                                  "several waves at the top concurrency measure a steady stream, not one burst")

    @model_validator(mode="after")
    def _choices(self) -> "CapBenchmarkParams":
        if self.choices == 1:
            raise ValueError("choices must be 0 (off) or at least 2")
        return self
