"""The numba few-rows MoE kernels (``raypress.kernels.moe_cpu``) against the definition, and when they run."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("numba")

from moe_fixtures import moe_definition, random_expert_weights  # noqa: E402
from raypress.kernels import moe, moe_cpu  # noqa: E402
from raypress.kernels.moe_reference import fused_moe_reference, topk_softmax_reference  # noqa: E402


ROUTINGS = {
    "one token, two experts": [[1, 3]],
    "one token, larger id first": [[3, 1]],
    "one token, same expert in both slots": [[2, 2]],
    "one token, k=1": [[3]],
    "an expert twice for one token": [[0, 0], [2, 0], [3, 0], [0, 2]],
    "five rows on one expert (a block of four and one more)": [[1], [1], [1], [1], [1]],
    "nine rows on one expert, k=2": [[0, 1], [0, 2], [0, 1], [0, 3], [0, 1], [0, 2], [0, 1], [0, 3], [0, 1]],
    "reversed, nothing consecutive": [[3, 2], [1, 0], [3, 1], [2, 0]],
}


@pytest.mark.parametrize("hidden,inter", [(32, 64), (40, 72)], ids=["block-multiple", "ragged-blocks"])
@pytest.mark.parametrize("routing", list(ROUTINGS), ids=list(ROUTINGS))
def test_kernels_match_definition(routing, hidden, inter):
    ids = torch.tensor(ROUTINGS[routing])
    num_tokens, k = ids.shape
    gen = torch.Generator().manual_seed(num_tokens * 10 + k)
    weights = torch.rand(num_tokens, k, generator=gen) + 0.1  # not renormalised: each slot's weight must count
    x = torch.randn(num_tokens, hidden, generator=gen)
    w13, w2 = random_expert_weights(4, hidden, inter)
    out = moe_cpu.fused_moe_few_rows(x, w13, w2, weights, ids)
    assert out.dtype == torch.float32 and out.shape == (num_tokens, hidden)
    torch.testing.assert_close(out.double(), moe_definition(x, w13, w2, weights, ids), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("num_tokens,k", [(1, 2), (7, 2), (16, 2), (37, 1), (32, 2)])
def test_skewed_routing_with_idle_experts_and_strided_rows(num_tokens, k):
    gen = torch.Generator().manual_seed(num_tokens)
    logits = torch.randn(num_tokens, 8, generator=gen)
    logits[:, 0] += 1.5
    logits[:, 3::2] -= 50.0  # experts 3, 5, 7 never win
    weights, ids = topk_softmax_reference(logits, k, renormalize=True)
    x = torch.randn(num_tokens, 2 * 48, generator=gen)[:, ::2]  # a strided view
    w13, w2 = random_expert_weights(8, 48, 80)
    out = moe_cpu.fused_moe_few_rows(x, w13, w2, weights, ids.int())
    torch.testing.assert_close(out, fused_moe_reference(x, w13, w2, weights, ids), atol=1e-5, rtol=1e-5)


def test_a_token_gets_the_same_result_alone_and_in_a_batch():
    """What greedy decoding needs: a row's output must not depend on the rows batched with it."""
    w13, w2 = random_expert_weights(8, 64, 96)
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(12, 64, generator=gen)
    weights, ids = topk_softmax_reference(torch.randn(12, 8, generator=gen), 2, renormalize=True)
    batched = moe_cpu.fused_moe_few_rows(x, w13, w2, weights, ids)
    for t in (0, 5, 11):
        alone = moe_cpu.fused_moe_few_rows(x[t:t + 1], w13, w2, weights[t:t + 1], ids[t:t + 1])
        torch.testing.assert_close(alone, batched[t:t + 1], atol=2e-6, rtol=2e-6)


def _spy_few_rows(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = moe_cpu.fused_moe_few_rows

    def spy(hidden, w13, w2, topk_weights, topk_ids):
        calls.append(topk_ids.numel())
        return real(hidden, w13, w2, topk_weights, topk_ids)

    monkeypatch.setattr(moe_cpu, "fused_moe_few_rows", spy)
    return calls


def test_model_path_takes_the_kernels_only_for_fp32_inference_on_few_rows(monkeypatch):
    w13, w2 = random_expert_weights(8, 32, 64)
    calls = _spy_few_rows(monkeypatch)
    limit = moe_cpu.MAX_ROWS_PER_EXPERT * 8 // 2  # tokens at k=2
    gen = torch.Generator().manual_seed(0)
    for num_tokens in (1, limit, limit + 1):
        weights, ids = topk_softmax_reference(torch.randn(num_tokens, 8, generator=gen), 2, renormalize=True)
        x = torch.randn(num_tokens, 32, generator=gen)
        with torch.inference_mode():
            out = moe.fused_moe(x, w13, w2, weights, ids, backend="torch")
        torch.testing.assert_close(out, fused_moe_reference(x, w13, w2, weights, ids), atol=1e-5, rtol=1e-5)
    assert calls == [2, 2 * limit]  # one more token: the sorted oneDNN path
    weights, ids = topk_softmax_reference(torch.randn(3, 8, generator=gen), 2, renormalize=True)
    x = torch.randn(3, 32, requires_grad=True)
    moe.fused_moe(x, w13, w2, weights, ids, backend="torch").sum().backward()  # autograd: torch path
    with torch.inference_mode():
        half = moe.fused_moe(x.detach().bfloat16(), w13.bfloat16(), w2.bfloat16(), weights, ids, backend="torch")
        monkeypatch.setattr(moe, "USE_NUMBA", False)
        moe.fused_moe(x.detach(), w13, w2, weights, ids, backend="torch")
    assert calls == [2, 2 * limit] and x.grad.abs().max() > 0 and half.dtype == torch.bfloat16


def test_threads_follow_torch():
    """The kernels use as many threads as torch's intra-op pool (Ray workers set it to their CPUs),
    and one thread's result equals two threads'."""
    import numba

    w13, w2 = random_expert_weights(8, 64, 128)
    ids = torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7]])
    weights = torch.full((4, 2), 0.5)
    x = torch.randn(4, 64)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        parallel = moe_cpu.fused_moe_few_rows(x, w13, w2, weights, ids)
        assert numba.get_num_threads() == 2 and torch.get_num_threads() == 2
        torch.set_num_threads(1)
        assert torch.equal(moe_cpu.fused_moe_few_rows(x, w13, w2, weights, ids), parallel)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


ONE_THREAD_PROCESS = """
import time, torch
torch.set_num_threads(1)
from raypress.kernels import moe_cpu
w13, w2 = torch.randn(8, 256, 64), torch.randn(8, 64, 128)
ids, weights, x = torch.tensor([[0, 1], [2, 3], [4, 5], [6, 7]]), torch.full((4, 2), 0.5), torch.randn(4, 64)
moe_cpu.fused_moe_few_rows(x, w13, w2, weights, ids)  # the first call loads (or compiles) the kernels
threads = torch.get_num_threads()
wall, cpu = time.perf_counter(), time.process_time()
for _ in range(2000):
    moe_cpu.fused_moe_few_rows(x, w13, w2, weights, ids)
print(threads, (time.process_time() - cpu) / (time.perf_counter() - wall))
"""


def test_a_one_thread_process_stays_on_one_thread_and_one_core():
    """In a fresh process (a serving replica given one CPU): numba's OpenMP launch, on the first
    kernel load, set the calling thread's OpenMP count to every core, so torch went on with two
    threads; and the parallel build, even at one thread, kept an OpenMP worker spinning (1.85
    cores busy). A loaded machine only lowers the measured ratio, so this cannot fail by load."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", ONE_THREAD_PROCESS], capture_output=True, text=True, timeout=300,
                         cwd=str(Path(__file__).resolve().parents[2]))
    assert out.returncode == 0, out.stderr[-2000:]
    threads, cores = out.stdout.split()
    assert int(threads) == 1
    assert float(cores) < 1.3, f"one thread's kernels kept {float(cores):.2f} cores busy"


def test_parameters_under_no_grad_and_bad_expert_ids():
    """Model weights are Parameters (requires_grad) even when serving; an id out of range is an
    error, not a read outside the weights."""
    w13, w2 = (torch.nn.Parameter(w) for w in random_expert_weights(4, 32, 64))
    ids = torch.tensor([[0, 3]])
    weights = torch.tensor([[0.7, 0.3]])
    x = torch.randn(1, 32)
    with torch.no_grad():
        out = moe_cpu.fused_moe_few_rows(x, w13, w2, weights, ids)
    torch.testing.assert_close(out.double(), moe_definition(x, w13.detach(), w2.detach(), weights, ids),
                               atol=1e-5, rtol=1e-5)
    for bad in ([[0, 4]], [[-1, 0]]):
        with pytest.raises(IndexError, match="outside"):
            moe_cpu.fused_moe_few_rows(x, w13.detach(), w2.detach(), weights, torch.tensor(bad))
