"""Per-request sampling settings and the batched sampler the engine runs once per step.

Why inverse-CDF sampling with one uniform per row: each request owns a ``torch.Generator`` and
draws exactly one number per generated token from it, so a seeded request produces the same
tokens whether it runs alone or next to 31 others (``torch.multinomial`` over a batch would mix
the rows' random streams). The filters follow the order Hugging Face and vLLM use: temperature,
then top-k, then top-p on what top-k kept; temperature 0 means greedy (argmax of the raw logits).
"""

from __future__ import annotations

import secrets

import torch
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, field_validator
from torch import Tensor


class SamplingParams(BaseModel):
    """How one request is decoded; invalid values raise ``pydantic.ValidationError`` (a ValueError)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_tokens: int = Field(16, ge=1, description="most tokens to generate (the context may stop it sooner)")
    temperature: float = Field(1.0, ge=0.0, le=2.0, description="0: greedy; otherwise logits / temperature")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="nucleus: keep the smallest set whose mass reaches top_p")
    top_k: int = Field(0, ge=0, description="keep the k most likely tokens; 0: no limit")
    seed: int | None = Field(None, ge=0, lt=2**63, description="seeds this request's own generator")
    stop: list[str] = Field(default_factory=list, description="stop strings; the output ends before the first")
    stop_token_ids: list[NonNegativeInt] = Field(default_factory=list, description="token ids that end generation (like EOS)")
    ignore_eos: bool = Field(False, description="keep generating past the end-of-sequence token")

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


def sample(
    logits: Tensor,
    temperature: Tensor,
    top_k: Tensor,
    top_p: Tensor,
    uniform: Tensor,
) -> Tensor:
    """One token id per row of ``logits (B, V)``.

    temperature/top_k/top_p ``(B,)`` per row (temperature 0: argmax); ``uniform (B,)`` in [0, 1):
    the row's random draw, mapped through the filtered distribution's CDF.
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
    cdf = torch.softmax(scaled, dim=-1).cumsum(dim=-1)
    target = uniform.to(logits.device, torch.float32)[:, None] * cdf[:, -1:]
    # right=True: the first index whose CDF exceeds the target, never a masked (zero-mass) token;
    # past the end only when rounding lifted the target to the total: take the top token then
    sampled_ids = torch.searchsorted(cdf, target, right=True).squeeze(1)
    sampled_ids = torch.where(sampled_ids < logits.shape[-1], sampled_ids, greedy_ids)
    return torch.where(sampled_rows, sampled_ids, greedy_ids)
