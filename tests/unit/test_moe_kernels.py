"""MoE kernels: the torch references, the CPU path, and every Triton kernel in interpret mode.

Triton decides interpret vs compile when it is first imported, so this module sets
``TRITON_INTERPRET=1`` before anything imports triton. If triton was already imported in
compiled mode (another module got there first), the in-process Triton tests skip and
``test_triton_kernels_in_fresh_interpreter`` reruns them in a subprocess instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

if "triton" not in sys.modules:
    os.environ["TRITON_INTERPRET"] = "1"

import pytest
import torch
from moe_fixtures import moe_definition, random_expert_weights

from raypress.kernels import moe
from raypress.kernels.moe_reference import (
    fused_moe_reference,
    moe_align_block_size_reference,
    routing_matrix,
    topk_softmax_reference,
)

INTERPRET_READY = os.environ.get("TRITON_INTERPRET") == "1"
H, I = 32, 64  # tiny: interpret mode runs every program in Python


@pytest.fixture
def tri():
    """The Triton module, in interpret mode."""
    pytest.importorskip("triton")
    if not INTERPRET_READY:
        pytest.skip("triton was imported in compiled mode; see test_triton_kernels_in_fresh_interpreter")
    from raypress.kernels import moe_triton

    return moe_triton


def skewed_routing(num_tokens: int, num_experts: int, k: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Router logits with uneven load: half the experts (odd ids from 3 up) never win, expert 0 wins often."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(num_tokens, num_experts, generator=gen)
    logits[:, 0] += 1.5
    logits[:, 3::2] -= 50.0
    weights, ids = topk_softmax_reference(logits, k, renormalize=True)
    return logits, weights, ids


def expert_weights(num_experts: int, dtype: torch.dtype, seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    w13, w2 = random_expert_weights(num_experts, H, I, seed)
    return w13.to(dtype), w2.to(dtype)


# ------------------------------------------------------------------------- references
def test_reference_matches_definition_and_skips_unrouted_experts():
    _, weights, ids = skewed_routing(9, 8, 2, seed=3)
    assert not torch.isin(torch.tensor([3, 5, 7]), ids).any()  # the routing really is uneven
    x = torch.randn(9, H, generator=torch.Generator().manual_seed(4))
    w13, w2 = expert_weights(8, torch.float32)
    expected = moe_definition(x, w13, w2, weights, ids)
    torch.testing.assert_close(fused_moe_reference(x, w13, w2, weights, ids).double(), expected, atol=1e-5, rtol=1e-5)


def test_reference_matches_hugging_face_mixtral_experts():
    transformers = pytest.importorskip("transformers")
    from transformers.models.mixtral.modeling_mixtral import MixtralExperts

    cfg = transformers.MixtralConfig(hidden_size=H, intermediate_size=I, num_local_experts=4, num_experts_per_tok=2)
    cfg._experts_implementation = "eager"
    experts = MixtralExperts(cfg)
    w13, w2 = expert_weights(4, torch.float32)
    with torch.no_grad():
        experts.gate_up_proj.copy_(w13)
        experts.down_proj.copy_(w2)
        _, weights, ids = skewed_routing(11, 4, 2, seed=5)
        x = torch.randn(11, H)
        hf = experts(x, ids, weights)
    torch.testing.assert_close(fused_moe_reference(x, w13, w2, weights, ids), hf, atol=1e-5, rtol=1e-5)


def test_topk_reference_renormalises_and_orders():
    logits = torch.tensor([[0.0, 2.0, 1.0, -1.0]])
    weights, ids = topk_softmax_reference(logits, 2, renormalize=True)
    assert ids.tolist() == [[1, 2]]
    torch.testing.assert_close(weights, torch.softmax(torch.tensor([[2.0, 1.0]]), -1))
    raw, _ = topk_softmax_reference(logits, 2, renormalize=False)
    torch.testing.assert_close(raw, torch.softmax(logits, -1)[:, [1, 2]])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("num_tokens,num_experts,k", [(1, 8, 2), (16, 8, 2), (300, 8, 2), (5, 4, 1), (7, 60, 4)])
@pytest.mark.parametrize("renormalize", [True, False])
def test_cpu_topk_softmax_matches_reference(dtype, num_tokens, num_experts, k, renormalize):
    logits = torch.randn(num_tokens, num_experts, generator=torch.Generator().manual_seed(num_tokens)).to(dtype)
    weights, ids = moe.topk_softmax(logits, k, renormalize, backend="torch")
    ref_w, ref_i = topk_softmax_reference(logits, k, renormalize)
    assert weights.dtype == torch.float32 and ids.dtype == torch.int64
    assert torch.equal(ids, ref_i)
    torch.testing.assert_close(weights, ref_w, atol=1e-6, rtol=1e-5)
    if renormalize:
        torch.testing.assert_close(weights.sum(-1), torch.ones(num_tokens))


def test_cpu_topk_softmax_gradient_matches_reference():
    logits = torch.randn(6, 8, generator=torch.Generator().manual_seed(2))
    probe = torch.linspace(-1, 1, 12).reshape(6, 2)
    grads = []
    for fn in (lambda lg: moe.topk_softmax(lg, 2, True, backend="torch"), lambda lg: topk_softmax_reference(lg, 2, True)):
        leaf = logits.clone().requires_grad_(True)
        (fn(leaf)[0] * probe).sum().backward()
        grads.append(leaf.grad)
    assert grads[0].abs().max() > 0
    torch.testing.assert_close(grads[0], grads[1], atol=1e-6, rtol=1e-5)


def test_align_reference_layout():
    ids = torch.tensor([[2, 0], [2, 1], [0, 2]])  # pairs 0..5 -> experts 2,0,2,1,0,2; expert 3 unused
    sorted_ids, expert_ids, total = moe_align_block_size_reference(ids, block_size=4, num_experts=4)
    s = 6  # sentinel = T*k
    assert total.tolist() == [12]
    assert sorted_ids.tolist()[:12] == [1, 4, s, s, 3, s, s, s, 0, 2, 5, s]
    assert sorted_ids.numel() == 6 + 4 * 3 and (sorted_ids[12:] == s).all()
    assert expert_ids.tolist() == [0, 1, 2, -1, -1]


# ------------------------------------------------------------------------- CPU torch path
@pytest.mark.parametrize("num_tokens", [0, 1, 5, 37])
@pytest.mark.parametrize("num_experts,k", [(4, 1), (8, 2)])
def test_cpu_path_matches_reference_fp32(num_tokens, num_experts, k):
    _, weights, ids = skewed_routing(num_tokens, num_experts, k, seed=num_tokens)
    x = torch.randn(num_tokens, H, generator=torch.Generator().manual_seed(7))
    w13, w2 = expert_weights(num_experts, torch.float32)
    out = moe.fused_moe(x, w13, w2, weights, ids, backend="torch")
    assert out.shape == (num_tokens, H) and out.dtype == torch.float32
    torch.testing.assert_close(out, fused_moe_reference(x, w13, w2, weights, ids), atol=1e-5, rtol=1e-5)


def test_cpu_path_low_precision_and_int32_ids():
    _, weights, ids = skewed_routing(37, 8, 2, seed=8)
    x = torch.randn(37, H)
    w13, w2 = expert_weights(8, torch.bfloat16)
    out = moe.fused_moe(x.bfloat16(), w13, w2, weights, ids.int(), backend="torch")
    assert out.dtype == torch.bfloat16
    expected = fused_moe_reference(x.bfloat16().float(), w13.float(), w2.float(), weights, ids)
    torch.testing.assert_close(out.float(), expected, atol=3e-2, rtol=3e-2)


def test_cpu_path_gradients_match_reference():
    _, weights, ids = skewed_routing(7, 4, 2, seed=12)
    w13, w2 = expert_weights(4, torch.float32)
    x = torch.randn(7, H)
    grads = []
    for fn in (moe.fused_moe_torch, fused_moe_reference):
        leaves = [t.clone().requires_grad_(True) for t in (x, w13, w2, weights)]
        (fn(*leaves, ids) * torch.linspace(-1, 1, H)).sum().backward()
        grads.append([leaf.grad for leaf in leaves])
    for got, expected in zip(*grads):
        assert got.abs().max() > 0
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)


def test_cpu_path_with_and_without_onednn_agree(monkeypatch):
    _, weights, ids = skewed_routing(150, 8, 2, seed=13)
    counts = torch.bincount(ids.reshape(-1), minlength=8)
    assert counts.max() > moe.FEW_ROWS and ((counts > 1) & (counts <= moe.FEW_ROWS)).any()  # both shapes
    w13, w2 = expert_weights(8, torch.float32)
    x = torch.randn(150, H)
    assert moe._use_onednn(x, w13, w2, autograd=False) == moe.onednn_linear_available()
    assert not moe._use_onednn(x, w13, w2, autograd=True)
    with torch.inference_mode():
        fast = moe.fused_moe_torch(x, w13, w2, weights, ids)
        monkeypatch.setattr(moe, "USE_ONEDNN", False)
        plain = moe.fused_moe_torch(x, w13, w2, weights, ids)
    torch.testing.assert_close(fast, plain, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(fast, fused_moe_reference(x, w13, w2, weights, ids), atol=1e-5, rtol=1e-5)


def _spy_small_path(monkeypatch) -> list[int]:
    """Record the pair count of every call that takes the small-batch path (numba kernels off)."""
    monkeypatch.setattr(moe, "USE_NUMBA", False)  # those kernels are tested in test_moe_cpu_kernels.py
    calls: list[int] = []
    real = moe._fused_moe_small

    def spy(hidden, w13, w2, topk_weights, topk_ids, onednn):
        calls.append(topk_ids.numel())
        return real(hidden, w13, w2, topk_weights, topk_ids, onednn)

    monkeypatch.setattr(moe, "_fused_moe_small", spy)
    return calls


SMALL_ROUTINGS = {
    "one token, two experts, smaller id first": [[1, 3]],
    "one token, larger id first": [[3, 1]],
    "one token, same expert in both slots": [[2, 2]],
    "one token, k=1": [[3]],
    "uneven, an expert twice for one token": [[0, 0], [2, 0], [3, 0], [0, 2]],
    "every token one expert, k=1": [[1], [1], [1], [1], [1]],
    "reversed, nothing consecutive": [[3, 2], [1, 0], [3, 1], [2, 0]],
}


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.bfloat16, 3e-2)])
@pytest.mark.parametrize("routing", list(SMALL_ROUTINGS), ids=list(SMALL_ROUTINGS))
def test_cpu_small_batch_path_matches_definition(monkeypatch, routing, dtype, tol):
    ids = torch.tensor(SMALL_ROUTINGS[routing])
    num_tokens, k = ids.shape
    gen = torch.Generator().manual_seed(num_tokens * 10 + k)
    weights = torch.rand(num_tokens, k, generator=gen) + 0.1  # not renormalised: each slot's weight must count
    x = torch.randn(num_tokens, H, generator=gen).to(dtype)
    w13, w2 = expert_weights(4, dtype)
    calls = _spy_small_path(monkeypatch)
    with torch.inference_mode():
        out = moe.fused_moe(x, w13, w2, weights, ids.int(), backend="torch")
    assert calls == [ids.numel()]
    assert out.dtype == dtype and out.shape == (num_tokens, H)
    expected = moe_definition(x.float(), w13.float(), w2.float(), weights, ids)
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)


@pytest.mark.parametrize("num_tokens,k", [(1, 2), (16, 2), (37, 1), (32, 2)])
def test_cpu_small_batch_path_agrees_with_sorted_path(monkeypatch, num_tokens, k):
    """Same inputs through both CPU paths (the sorted one forced by SMALL_PAIRS=0), skewed routing, strided rows."""
    _, weights, ids = skewed_routing(num_tokens, 8, k, seed=20 + num_tokens)
    x = torch.randn(num_tokens, 2 * H, generator=torch.Generator().manual_seed(21))[:, ::2]
    w13, w2 = expert_weights(8, torch.float32)
    calls = _spy_small_path(monkeypatch)
    with torch.inference_mode():
        small = moe.fused_moe_torch(x, w13, w2, weights, ids)
        monkeypatch.setattr(moe, "SMALL_PAIRS", 0)
        sorted_path = moe.fused_moe_torch(x, w13, w2, weights, ids)
    assert calls == [num_tokens * k]
    torch.testing.assert_close(small, sorted_path, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(small, fused_moe_reference(x, w13, w2, weights, ids), atol=1e-5, rtol=1e-5)


def test_cpu_small_batch_path_only_for_few_pairs_without_grad(monkeypatch):
    w13, w2 = expert_weights(8, torch.float32)
    calls = _spy_small_path(monkeypatch)
    limit = moe.SMALL_PAIRS // 2  # tokens at k=2
    for num_tokens in (limit, limit + 1):
        _, weights, ids = skewed_routing(num_tokens, 8, 2, seed=num_tokens)
        x = torch.randn(num_tokens, H)
        with torch.inference_mode():
            out = moe.fused_moe_torch(x, w13, w2, weights, ids)
        torch.testing.assert_close(out, fused_moe_reference(x, w13, w2, weights, ids), atol=1e-5, rtol=1e-5)
    assert calls == [moe.SMALL_PAIRS]  # one more pair takes the sorted path
    _, weights, ids = skewed_routing(3, 8, 2, seed=3)
    x = torch.randn(3, H, requires_grad=True)
    moe.fused_moe_torch(x, w13, w2, weights, ids).sum().backward()  # autograd: the sorted path
    assert calls == [moe.SMALL_PAIRS] and x.grad.abs().max() > 0


def test_auto_backend_on_cpu_is_torch_and_env_overrides(monkeypatch):
    x = torch.zeros(2, H)
    monkeypatch.delenv(moe.BACKEND_ENV, raising=False)
    assert moe.resolve_backend(x) == "torch"
    monkeypatch.setenv(moe.BACKEND_ENV, "reference")
    assert moe.resolve_backend(x) == "reference"
    assert moe.resolve_backend(x, backend="torch") == "torch"
    with pytest.raises(ValueError, match="unknown MoE backend"):
        moe.resolve_backend(x, backend="cuda")
    with pytest.raises(ValueError, match="no backward"):
        moe.resolve_backend(x, backend="triton", needs_grad=True)


def test_training_never_routes_to_triton(monkeypatch):
    """Auto on a (pretend) CUDA tensor picks Triton for inference only: its kernels have no backward."""
    monkeypatch.delenv(moe.BACKEND_ENV, raising=False)
    monkeypatch.setattr(moe, "triton_available", lambda: True)
    cuda_like = SimpleNamespace(is_cuda=True)  # resolve_backend only asks the tensor this
    assert moe.resolve_backend(cuda_like) == "triton"
    assert moe.resolve_backend(cuda_like, needs_grad=True) == "torch"


# ------------------------------------------------------------------------- Triton (interpret)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("num_tokens,num_experts,k", [(1, 4, 1), (5, 8, 2), (37, 8, 2), (37, 4, 1)])
@pytest.mark.parametrize("renormalize", [True, False])
def test_triton_topk_softmax(tri, dtype, num_tokens, num_experts, k, renormalize):
    logits = torch.randn(num_tokens, num_experts, generator=torch.Generator().manual_seed(num_tokens)).to(dtype)
    weights, ids = tri.topk_softmax(logits, k, renormalize)
    ref_w, ref_i = topk_softmax_reference(logits, k, renormalize)
    assert weights.dtype == torch.float32 and ids.dtype == torch.int32
    assert torch.equal(ids.long(), ref_i)
    torch.testing.assert_close(weights, ref_w, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("num_tokens,num_experts,k,block_size", [(1, 4, 1, 16), (5, 8, 2, 16), (37, 8, 2, 16), (37, 4, 1, 4), (300, 8, 2, 16)])
def test_triton_align_block_size(tri, num_tokens, num_experts, k, block_size):
    _, _, ids = skewed_routing(num_tokens, num_experts, k, seed=num_tokens + 1)
    got = tri.moe_align_block_size(ids.int(), block_size, num_experts)
    ref = moe_align_block_size_reference(ids, block_size, num_experts)
    for name, a, b in zip(("sorted_token_ids", "expert_ids", "num_tokens_post_padded"), got, ref):
        assert a.dtype == torch.int32 and torch.equal(a, b), name
    sorted_ids, expert_ids, total = ref  # the layout's invariants, on the reference both match
    used = int(total)
    assert used % block_size == 0
    real = sorted_ids[:used][sorted_ids[:used] < ids.numel()].long()
    assert sorted(real.tolist()) == list(range(ids.numel()))  # each pair exactly once
    block_of_row = expert_ids[:used // block_size].repeat_interleave(block_size)
    rows = sorted_ids[:used] < ids.numel()
    assert torch.equal(block_of_row[rows].long(), ids.reshape(-1)[sorted_ids[:used][rows].long()])


SMALL_TILES = dict(block_m=16, block_n_up=32, block_n_down=16, block_k=16)  # 2 K steps over H, 2 N tiles over I


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 3e-3)])
@pytest.mark.parametrize("num_tokens,num_experts,k", [(1, 4, 1), (1, 8, 2), (5, 8, 2), (37, 8, 2), (37, 4, 1)])
@pytest.mark.parametrize("tiles", ["default", "small"])
def test_triton_fused_moe(tri, dtype, tol, num_tokens, num_experts, k, tiles):
    _, weights, ids = skewed_routing(num_tokens, num_experts, k, seed=num_tokens + k)
    x = torch.randn(num_tokens, H, generator=torch.Generator().manual_seed(9)).to(dtype)
    w13, w2 = expert_weights(num_experts, dtype)
    config = tri.MoEKernelConfig(**SMALL_TILES) if tiles == "small" else None
    out = tri.fused_moe(x, w13, w2, weights, ids.int(), config=config)
    expected = fused_moe_reference(x.float(), w13.float(), w2.float(), weights, ids)
    assert out.dtype == dtype and out.shape == (num_tokens, H)
    torch.testing.assert_close(out.float(), expected, atol=tol, rtol=tol)


def test_triton_fused_moe_strided_hidden_via_dispatch(tri, monkeypatch):
    monkeypatch.setenv(moe.BACKEND_ENV, "triton")
    logits, _, _ = skewed_routing(13, 8, 2, seed=11)
    weights, ids = moe.topk_softmax(logits, 2, renormalize=True)
    assert ids.dtype == torch.int32  # came from the Triton gating kernel
    wide = torch.randn(13, 2 * H)
    x = wide[:, ::2]  # non-contiguous rows and columns
    w13, w2 = expert_weights(8, torch.float32)
    out = moe.fused_moe(x, w13, w2, weights, ids)
    torch.testing.assert_close(out, fused_moe_reference(x, w13, w2, weights, ids), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out, moe.fused_moe(x, w13, w2, weights, ids, backend="torch"), atol=1e-5, rtol=1e-5)


def test_triton_kernels_in_fresh_interpreter():
    """Only when triton was imported before this module could turn interpret mode on."""
    pytest.importorskip("triton")
    if INTERPRET_READY:
        pytest.skip("interpret mode is on in this process; the Triton tests above ran here")
    env = dict(os.environ, TRITON_INTERPRET="1")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", __file__, "-q", "-o", "addopts=", "-p", "no:cacheprovider",
         "-k", "triton and not fresh_interpreter"],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]


def test_routing_matrix_places_weights():
    dense = routing_matrix(torch.tensor([[0.7, 0.3]]), torch.tensor([[2, 0]]), 4)
    torch.testing.assert_close(dense, torch.tensor([[0.3, 0.0, 0.7, 0.0]]))
