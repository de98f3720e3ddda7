"""Per-request sampling settings and the batched sampler the engine runs once per step.

Why inverse-CDF sampling with one uniform per row: each request owns a ``torch.Generator`` and
draws exactly one number per generated token from it, so a seeded request produces the same
tokens whether it runs alone or next to 31 others (``torch.multinomial`` over a batch would mix
the rows' random streams). The filters follow the order Hugging Face and vLLM use: temperature,
then top-k, then top-p on what top-k kept, then min-p; temperature 0 means greedy (argmax of the
raw logits).

Logprobs (``logprobs``, ``prompt_logprobs``) are always the model's own distribution, the
log-softmax of the raw logits at temperature 1, never the filtered sampling distribution: that is
what evaluation harnesses score with (and what vLLM returns by default), and it does not change
with a request's temperature or filters.
"""

from __future__ import annotations

import math
import secrets

import torch
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, field_validator, model_validator
from torch import Tensor

from raypress.inference.requests import TokenLogprob


MAX_LOGPROBS = 20  # most alternatives a request may ask for per position (OpenAI's limit)


def position_logprobs(logits: Tensor, token_ids: Tensor, k: int) -> list[TokenLogprob]:
    """``logits (N, V)`` raw, ``token_ids (N,)`` the token at each position: one ``TokenLogprob`` each."""
    logprobs = torch.log_softmax(logits.float(), dim=-1)
    chosen = logprobs.gather(-1, token_ids[:, None].to(logprobs.device)).squeeze(-1).tolist()
    ids = token_ids.tolist()
    if k <= 0:
        return [TokenLogprob(int(t), float(lp), []) for t, lp in zip(ids, chosen)]
    top = torch.topk(logprobs, min(k, logprobs.shape[-1]), dim=-1)
    top_ids, top_values = top.indices.tolist(), top.values.tolist()
    return [TokenLogprob(int(t), float(lp), list(zip(ti, tv)))
            for t, lp, ti, tv in zip(ids, chosen, top_ids, top_values)]


class SamplingParams(BaseModel):
    """How one request is decoded; invalid values raise ``pydantic.ValidationError`` (a ValueError)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int = Field(16, ge=0, description="most tokens to generate (the context may stop it sooner); "
                            "0: only prefill the prompt (prompt scoring; needs prompt_logprobs)")
    temperature: float = Field(1.0, ge=0.0, le=2.0, description="0: greedy; otherwise logits / temperature")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus: keep the smallest set whose mass reaches top_p")
    top_k: int = Field(0, ge=0, description="keep the k most likely tokens; 0: no limit")
    min_p: float = Field(0.0, ge=0.0, le=1.0, description="drop tokens whose probability is under min_p × the top one's")
    seed: int | None = Field(None, ge=0, lt=2**63, description="seeds this request's own generator")
    stop: list[str] = Field(default_factory=list, description="stop strings; the output ends before the first")
    stop_token_ids: list[NonNegativeInt] = Field(default_factory=list, description="token ids that end generation (like EOS)")
    ignore_eos: bool = Field(False, description="keep generating past the end-of-sequence token")
    logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS,
                                 description="per generated token: its logprob and the k most likely (None: none)")
    prompt_logprobs: int | None = Field(None, ge=0, le=MAX_LOGPROBS,
                                        description="per prompt token after the first: its logprob and the top k")

    @field_validator("stop", mode="before")
    @classmethod
    def _one_stop_string(cls, value: object) -> object:
        """OpenAI accepts a single string or a list; ``None`` means no stop strings."""
        if value is None:
            return []
        return [value] if isinstance(value, str) else value

    @field_validator("stop")
    @classmethod
    def _non_empty(cls, value: list[str]) -> list[str]:
        if any(s == "" for s in value):
            raise ValueError("stop strings must not be empty")
        return value

    @model_validator(mode="after")
    def _zero_tokens_only_to_score(self) -> "SamplingParams":
        """A request that generates nothing is only useful for its prompt's logprobs."""
        if self.max_tokens == 0 and self.prompt_logprobs is None:
            raise ValueError("max_tokens 0 only scores a prompt: it needs prompt_logprobs")
        return self

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def make_generator(self) -> torch.Generator:
        """This request's random stream: from ``seed`` when given, else from the OS."""
        seed = self.seed if self.seed is not None else secrets.randbits(63)
        return torch.Generator(device="cpu").manual_seed(seed)


def top_k_filter(logits: Tensor, top_k: Tensor) -> Tensor:
    """Set all but each row's ``top_k`` largest logits to -inf; ``top_k (B,)``, 0 keeps the row whole.

    Ties at the k-th value are all kept (the threshold is a value, as in HF's ``TopKLogitsWarper``).
    """
    vocab = logits.shape[-1]
    k = torch.where(top_k <= 0, vocab, top_k.clamp(max=vocab)).to(logits.device)
    kth = torch.sort(logits, dim=-1, descending=True).values.gather(-1, (k - 1)[:, None])
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, top_p: Tensor) -> Tensor:
    """Keep each row's smallest most-likely set whose probability reaches ``top_p (B,)``; mask the rest.

    The most likely token always survives, so ``top_p`` close to 0 degrades to greedy.
    """
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits.float(), dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs  # probability of the tokens ranked above each one
    drop_sorted = mass_before >= top_p.to(logits.device, torch.float32)[:, None]
    drop_sorted[:, 0] = False
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))


def min_p_filter(logits: Tensor, min_p: Tensor) -> Tensor:
    """vLLM's min-p: mask tokens whose probability is under ``min_p (B,)`` × the row's top probability.

    In logits: ``p_i < min_p · p_max`` ⇔ ``l_i − l_max < log(min_p)`` (no softmax needed); the
    ratio is the same before and after top-k/top-p renormalise, so the order of the filters does
    not matter. ``min_p`` 0 keeps the row whole; the top token always survives.
    """
    min_p = min_p.to(logits.device, torch.float32)
    log_min_p = torch.where(min_p > 0, torch.log(min_p.clamp(min=1e-30)), -math.inf)
    top = logits.max(dim=-1, keepdim=True).values
    return logits.masked_fill(logits - top < log_min_p[:, None], float("-inf"))


def sample(
    logits: Tensor,
    temperature: Tensor,
    top_k: Tensor,
    top_p: Tensor,
    uniform: Tensor,
    min_p: Tensor | None = None,
) -> Tensor:
    """One token id per row of ``logits (B, V)``.

    temperature/top_k/top_p/min_p ``(B,)`` per row (temperature 0: argmax); ``uniform (B,)`` in
    [0, 1): the row's random draw, mapped through the filtered distribution's CDF.
    """
    logits = logits.float()
    greedy_ids = logits.argmax(dim=-1)
    temperature = temperature.to(logits.device, torch.float32)
    sampled_rows = temperature > 0
    if not bool(sampled_rows.any()):
        return greedy_ids
    scaled = logits / torch.where(sampled_rows, temperature, 1.0)[:, None]
    if bool((top_k > 0).any()):
        scaled = top_k_filter(scaled, top_k)
    if bool((top_p < 1.0).any()):
        scaled = top_p_filter(scaled, top_p)
    if min_p is not None and bool((min_p > 0).any()):
        scaled = min_p_filter(scaled, min_p)
    cdf = torch.softmax(scaled, dim=-1).cumsum(dim=-1)
    target = uniform.to(logits.device, torch.float32)[:, None] * cdf[:, -1:]
    # right=True: the first index whose CDF exceeds the target, never a masked (zero-mass) token;
    # past the end only when rounding lifted the target to the total: take the top token then
    sampled_ids = torch.searchsorted(cdf, target, right=True).squeeze(1)
    sampled_ids = torch.where(sampled_ids < logits.shape[-1], sampled_ids, greedy_ids)
    return torch.where(sampled_rows, sampled_ids, greedy_ids)
