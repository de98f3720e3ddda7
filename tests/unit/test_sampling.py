"""Sampling: the filters on known distributions, inverse-CDF draws, greedy, parameter validation."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from raypress.inference.sampling import SamplingParams, sample, top_k_filter, top_p_filter


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _logits_of(probs: list[float]) -> torch.Tensor:
    return torch.tensor([[math.log(p) for p in probs]])


def test_top_k_keeps_the_k_largest_per_row():
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0], [0.0, 1.0, 2.0, 3.0]])
    out = top_k_filter(logits, torch.tensor([2, 0]))
    assert torch.isinf(out[0]).tolist() == [True, False, False, True]
    assert torch.equal(out[1], logits[1])  # 0 = no limit
    assert torch.equal(out[0, 1:3], logits[0, 1:3])  # kept values are untouched


def test_top_k_larger_than_vocab_keeps_everything():
    logits = torch.tensor([[0.5, -1.0, 2.0]])
    assert torch.equal(top_k_filter(logits, torch.tensor([10])), logits)


def test_top_p_keeps_the_smallest_set_reaching_p():
    # token order deliberately not sorted: probabilities 0.15, 0.5, 0.05, 0.3
    logits = _logits_of([0.15, 0.5, 0.05, 0.3]).repeat(3, 1)
    out = top_p_filter(logits, torch.tensor([0.7, 0.5, 1.0]))
    assert torch.isfinite(out[0]).tolist() == [False, True, False, True]  # 0.5 + 0.3 >= 0.7
    assert torch.isfinite(out[1]).tolist() == [False, True, False, False]  # 0.5 alone reaches 0.5
    assert torch.isfinite(out[2]).all()


def test_top_p_tiny_keeps_the_top_token():
    out = top_p_filter(_logits_of([0.2, 0.5, 0.3]), torch.tensor([1e-6]))
    assert torch.isfinite(out).tolist() == [[False, True, False]]


def test_temperature_zero_is_argmax():
    logits = torch.randn(5, 50, generator=torch.Generator().manual_seed(0))
    ids = sample(logits, torch.zeros(5), torch.zeros(5, dtype=torch.long), torch.ones(5), torch.rand(5))
    assert torch.equal(ids, logits.argmax(dim=-1))


def test_inverse_cdf_draws_follow_the_distribution():
    probs = [0.5, 0.3, 0.2]
    n = 1000
    uniform = (torch.arange(n) + 0.5) / n  # evenly spaced draws: counts must match probs exactly
    ids = sample(_logits_of(probs).repeat(n, 1), torch.ones(n), torch.zeros(n, dtype=torch.long), torch.ones(n), uniform)
    assert torch.bincount(ids, minlength=3).tolist() == [500, 300, 200]


def test_sampling_respects_filters_and_temperature():
    n = 1000
    uniform = (torch.arange(n) + 0.5) / n
    logits = _logits_of([0.4, 0.1, 0.3, 0.2]).repeat(n, 1)
    top_k = sample(logits, torch.ones(n), torch.full((n,), 2), torch.ones(n), uniform)
    assert set(top_k.tolist()) == {0, 2}
    assert torch.bincount(top_k, minlength=4)[0].item() == round(n * 0.4 / 0.7)
    top_p = sample(logits, torch.ones(n), torch.zeros(n, dtype=torch.long), torch.full((n,), 0.85), uniform)
    assert set(top_p.tolist()) == {0, 2, 3}  # 0.4 + 0.3 + 0.2 >= 0.85; the 0.1 token is cut
    # a high temperature flattens: the 0.1 token gains mass
    hot = sample(logits, torch.full((n,), 2.0), torch.zeros(n, dtype=torch.long), torch.ones(n), uniform)
    cold = sample(logits, torch.ones(n), torch.zeros(n, dtype=torch.long), torch.ones(n), uniform)
    assert (hot == 1).sum() > (cold == 1).sum() == 100


def test_mixed_greedy_and_sampled_rows():
    logits = torch.tensor([[0.0, 5.0, 1.0], [0.0, 5.0, 1.0]])
    uniform = torch.tensor([0.999, 0.001])  # the sampled row's draw lands on token 0
    ids = sample(logits, torch.tensor([0.0, 1.0]), torch.zeros(2, dtype=torch.long), torch.ones(2), uniform)
    assert ids.tolist() == [1, 0]


def test_params_defaults_and_stop_normalisation():
    params = SamplingParams(stop="END")
    assert params.stop == ["END"]
    assert params.max_tokens == 16 and params.temperature == 1.0 and not params.greedy
    assert SamplingParams(temperature=0).greedy
    assert SamplingParams(stop=None).stop == []


@pytest.mark.parametrize(
    "bad",
    [
        {"max_tokens": -1},
        {"max_tokens": 0},
        {"temperature": -0.5},
        {"temperature": 3.0},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"top_k": -2},
        {"seed": -1},
        {"stop": ["ok", ""]},
        {"stop_token_ids": [-3]},
        {"frequency_penalty": 1.0},
    ],
)
def test_params_reject_bad_values(bad):
    with pytest.raises(ValidationError):
        SamplingParams(**bad)


def test_seeded_generators_repeat():
    a = SamplingParams(seed=7).make_generator()
    b = SamplingParams(seed=7).make_generator()
    assert torch.equal(torch.rand(4, generator=a), torch.rand(4, generator=b))
