"""The MoE transformer without Hugging Face: expert path, routing, KV-cache decoding, losses, training."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F

from moe_fixtures import tiny_config
from raypress.models.kv_cache import KVCache
from raypress.models.moe import (
    MoEForCausalLM,
    PackedBlock,
    default_expert_fn,
    load_balancing_loss,
    route,
    sorted_moe,
)
from raypress.models.moe_config import MoEConfig

MIXTRAL_LIKE = tiny_config(vocab_size=96, eos_token_id=None, max_position_embeddings=4096)
QWEN_LIKE = MoEConfig(
    **{
        **MIXTRAL_LIKE.to_dict(),
        "architecture": "qwen2_moe",
        "intermediate_size": 24,
        "norm_topk_prob": False,
        "shared_expert_intermediate_size": 40,
        "shared_expert_gate": True,
        "attention_bias": True,
        "num_experts_per_tok": 1,
        "sliding_window": 5,
        "tie_word_embeddings": True,
    }
)


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny tensors gain nothing from threads, and on a shared machine OpenMP spinning costs seconds."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _model(config: MoEConfig, seed: int = 0) -> MoEForCausalLM:
    torch.manual_seed(seed)
    return MoEForCausalLM(config).eval()


def _dense_reference(hidden, w13, w2, weights, ids):
    """Every expert on every token, then pick: slow but obviously right."""
    inter = w2.shape[2]
    gate_up = torch.einsum("th,enh->ten", hidden, w13)
    act = F.silu(gate_up[..., :inter]) * gate_up[..., inter:]
    per_expert = torch.einsum("tei,ehi->teh", act, w2)  # (T, E, H)
    picked = per_expert.gather(1, ids[..., None].expand(-1, -1, hidden.shape[1]))
    return (picked * weights[..., None]).sum(dim=1)


@pytest.mark.parametrize("top_k", [1, 2])
def test_sorted_moe_matches_dense_reference_with_uneven_routing(top_k):
    torch.manual_seed(1)
    tokens, hidden, inter, experts = 13, 16, 24, 5
    x = torch.randn(tokens, hidden, requires_grad=True)
    w13 = torch.randn(experts, 2 * inter, hidden, requires_grad=True)
    w2 = torch.randn(experts, hidden, inter, requires_grad=True)
    # uneven: expert 0 takes most pairs, expert 3 none
    ids = torch.tensor([[0, 1], [0, 2], [0, 4], [1, 0], [0, 2]] * 2 + [[4, 0], [0, 1], [2, 0]])[:, :top_k]
    weights = torch.rand(tokens, top_k)
    got = sorted_moe(x, w13, w2, weights, ids)
    want = _dense_reference(x, w13, w2, weights, ids)
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4)
    grads_got = torch.autograd.grad(got.square().sum(), (x, w13, w2))
    grads_want = torch.autograd.grad(want.square().sum(), (x, w13, w2))
    for g, w in zip(grads_got, grads_want):
        assert torch.allclose(g, w, atol=1e-3, rtol=1e-4)
    assert torch.count_nonzero(grads_got[1][3]) == 0  # the idle expert gets no gradient


def test_sorted_moe_handles_no_tokens():
    no_ids = torch.zeros(0, 2, dtype=torch.long)
    out = sorted_moe(torch.zeros(0, 8), torch.ones(3, 4, 8), torch.ones(3, 8, 2), torch.zeros(0, 2), no_ids)
    assert out.shape == (0, 8)


def test_route_renormalises_only_when_asked():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0]])
    probs = torch.softmax(logits, dim=-1)
    weights, ids = route(logits, 2, renormalize=False)
    assert ids.tolist() == [[0, 1]]
    assert torch.allclose(weights, probs[:, :2])
    weights, _ = route(logits, 2, renormalize=True)
    assert torch.allclose(weights, probs[:, :2] / probs[:, :2].sum())


def test_load_balancing_loss_is_top_k_for_a_uniform_router_and_larger_when_skewed():
    uniform = [torch.zeros(10, 4), torch.zeros(6, 4)]
    assert load_balancing_loss(uniform, num_experts=4, top_k=2).item() == pytest.approx(2.0)
    skewed = [torch.tensor([[5.0, 4.0, 0.0, 0.0]]).repeat(8, 1)]
    assert load_balancing_loss(skewed, num_experts=4, top_k=2).item() > 3.0


@pytest.mark.parametrize("config", [MIXTRAL_LIKE, QWEN_LIKE], ids=["mixtral", "qwen2_moe_window_tied"])
def test_cached_decode_step_by_step_matches_full_forward(config):
    model = _model(config)
    ids = torch.randint(0, config.vocab_size, (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        full = model(ids)
        cache = KVCache.for_config(config, num_slots=1, max_len=16)
        slot = cache.allocate()
        steps = [model(ids[:, :4], kv_cache=cache, slots=torch.tensor([slot]))]  # prefill 4, then one at a time
        steps += [model(ids[:, t : t + 1], kv_cache=cache, slots=torch.tensor([slot])) for t in range(4, 12)]
    assert cache.lengths[slot].item() == 12
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)


def test_batch_of_different_lengths_with_cache_equals_each_alone():
    config = QWEN_LIKE
    model = _model(config, seed=3)
    gen = torch.Generator().manual_seed(4)
    prompts = [torch.randint(0, config.vocab_size, (n,), generator=gen) for n in (7, 3)]
    continuations = torch.randint(0, config.vocab_size, (2, 4), generator=gen)

    def alone(i: int) -> torch.Tensor:
        cache = KVCache.for_config(config, num_slots=1, max_len=16)
        out = [model(prompts[i][None], kv_cache=cache)[:, -1]]
        out += [model(continuations[i, t].view(1, 1), kv_cache=cache)[:, -1] for t in range(4)]
        return torch.cat(out)

    with torch.no_grad():
        expected = [alone(0), alone(1)]
        cache = KVCache.for_config(config, num_slots=4, max_len=16)
        cache.allocate()  # slot 0 busy with someone else: the batch uses slots 1 and 2
        slots = torch.tensor([cache.allocate(), cache.allocate()])
        padded = torch.zeros(2, 7, dtype=torch.long)
        padded[0], padded[1, :3] = prompts[0], prompts[1]
        lengths = torch.tensor([7, 3])
        logits = model(padded, kv_cache=cache, slots=slots, input_lengths=lengths)
        counts = model.last_expert_counts
        got = [[logits[0, 6]], [logits[1, 2]]]
        for t in range(4):
            step = model(continuations[:, t : t + 1], kv_cache=cache, slots=slots)
            got[0].append(step[0, 0])
            got[1].append(step[1, 0])
    assert cache.lengths.tolist() == [0, 11, 7, 0]
    for i in range(2):
        assert torch.allclose(torch.stack(got[i]), expected[i], atol=1e-5)
    # padding is neither computed nor counted: 10 real prompt tokens x top-1 per layer
    assert len(counts) == config.num_hidden_layers
    assert [int(c.sum()) for c in counts] == [10, 10]


@pytest.mark.parametrize("config", [MIXTRAL_LIKE, QWEN_LIKE], ids=["mixtral", "qwen2_moe_window_tied"])
def test_packed_forward_of_a_decode_batch_and_new_prompts_equals_separate_forwards(config):
    """The engine's fused step: decode rows and right-padded new prompts in one forward give the
    logits, cache contents and expert counts that a decode forward and a prefill forward give."""
    model = _model(config, seed=5)
    gen = torch.Generator().manual_seed(6)
    running = [torch.randint(0, config.vocab_size, (n,), generator=gen) for n in (6, 9, 2)]
    prompts = [torch.randint(0, config.vocab_size, (n,), generator=gen) for n in (4, 7)]
    next_tokens = torch.randint(0, config.vocab_size, (3, 1), generator=gen)
    padded = torch.zeros(2, 7, dtype=torch.long)
    padded[0, :4], padded[1] = prompts[0], prompts[1]
    lengths = torch.tensor([4, 7])

    with torch.no_grad():
        # the running sequences sit in slots 0, 2, 4 and the new prompts take 1 and 3 (interleaved)
        cache = KVCache.for_config(config, num_slots=6, max_len=32)
        for slot in range(5):
            cache.allocate()
        decode_slots, prefill_slots = torch.tensor([0, 2, 4]), torch.tensor([1, 3])
        for slot, ids in zip(decode_slots.tolist(), running):
            model(ids[None], kv_cache=cache, slots=torch.tensor([slot]))
        separate_cache = KVCache.for_config(config, num_slots=6, max_len=32)
        separate_cache.k.copy_(cache.k)
        separate_cache.v.copy_(cache.v)
        separate_cache.lengths.copy_(cache.lengths)
        expected_decode = model(next_tokens, kv_cache=separate_cache, slots=decode_slots)[:, 0]
        decode_counts = [c.clone() for c in model.last_expert_counts]
        expected_prefill = model(padded, kv_cache=separate_cache, slots=prefill_slots, input_lengths=lengths,
                                 logits_at=lengths - 1)
        prefill_counts = [c.clone() for c in model.last_expert_counts]

        got_decode, got_prefill = model.forward_packed(
            [PackedBlock(next_tokens, decode_slots), PackedBlock(padded, prefill_slots, lengths)], cache)
    assert torch.allclose(got_decode, expected_decode, atol=1e-5)
    assert torch.allclose(got_prefill, expected_prefill, atol=1e-5)
    assert cache.lengths.tolist() == separate_cache.lengths.tolist() == [7, 4, 10, 7, 3, 0]
    for slot, length in enumerate(cache.lengths.tolist()):
        assert torch.allclose(cache.k[:, slot, :, :length], separate_cache.k[:, slot, :, :length], atol=1e-5)
        assert torch.allclose(cache.v[:, slot, :, :length], separate_cache.v[:, slot, :, :length], atol=1e-5)
    blocks = model.last_block_expert_counts
    assert [c.tolist() for c in blocks[0]] == [c.tolist() for c in decode_counts]
    assert [c.tolist() for c in blocks[1]] == [c.tolist() for c in prefill_counts]
    top_k = config.num_experts_per_tok
    assert [int(c.sum()) for c in model.last_expert_counts] == [(3 + 11) * top_k] * config.num_hidden_layers


@pytest.mark.parametrize("slots,path", [([1, 2, 3], "range"), ([5, 1, 3], "span with idle places"),
                                         ([0, 7, 4], "gather")])
def test_every_cache_read_path_equals_each_sequence_alone(slots, path, monkeypatch):
    """A batch reads its cached keys/values as a view of its slots' range (slots exactly a range, or
    a range at most twice the batch with idle places, rows in any order) or gathers them (a sparse
    batch); prefill and decode give each sequence's own logits either way."""
    config = MIXTRAL_LIKE
    model = _model(config, seed=11)
    gen = torch.Generator().manual_seed(12)
    lengths = [5, 2, 4]
    prompts = [torch.randint(0, config.vocab_size, (n,), generator=gen) for n in lengths]
    steps = torch.randint(0, config.vocab_size, (3, 3), generator=gen)
    reads = {"read": 0, "read_span": 0}
    for name in reads:
        original = getattr(KVCache, name)
        monkeypatch.setattr(KVCache, name, lambda self, *a, _o=original, _n=name: reads.__setitem__(_n, reads[_n] + 1)
                            or _o(self, *a))

    def alone(i: int) -> torch.Tensor:
        cache = KVCache.for_config(config, num_slots=1, max_len=16)
        out = [model(prompts[i][None], kv_cache=cache)[:, -1]]
        out += [model(steps[i, t].view(1, 1), kv_cache=cache)[:, -1] for t in range(3)]
        return torch.cat(out)

    with torch.no_grad():
        expected = [alone(i) for i in range(3)]
        reads.update(read=0, read_span=0)
        cache = KVCache.for_config(config, num_slots=8, max_len=16)
        padded = torch.zeros(3, 5, dtype=torch.long)
        for row, prompt in enumerate(prompts):
            padded[row, : len(prompt)] = prompt
        index = torch.tensor(slots)
        logits = model(padded, kv_cache=cache, slots=index, input_lengths=torch.tensor(lengths))
        got = [[logits[row, n - 1]] for row, n in enumerate(lengths)]
        for t in range(3):
            step = model(steps[:, t : t + 1], kv_cache=cache, slots=index)
            for row in range(3):
                got[row].append(step[row, 0])
    for row in range(3):
        torch.testing.assert_close(torch.stack(got[row]), expected[row], atol=1e-5, rtol=1e-5)
    layers_x_passes = config.num_hidden_layers * 4
    assert reads == ({"read": layers_x_passes, "read_span": 0} if path == "gather"
                     else {"read": 0, "read_span": layers_x_passes})


def test_slots_are_handed_out_lowest_first():
    """Freed slots are reused lowest first, so the slots in use stay a compact range."""
    cache = KVCache.for_config(MIXTRAL_LIKE, num_slots=6, max_len=4)
    assert [cache.allocate() for _ in range(5)] == [0, 1, 2, 3, 4]
    cache.free(3)
    cache.free(1)
    assert [cache.allocate(), cache.allocate(), cache.allocate()] == [1, 3, 5]


def test_padded_forward_without_cache_matches_each_sequence_alone():
    model = _model(MIXTRAL_LIKE, seed=5)
    ids = torch.randint(0, 96, (2, 9), generator=torch.Generator().manual_seed(6))
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 5:] = 0
    with torch.no_grad():
        batched = model(ids, attention_mask=mask)
        first, second = model(ids[:1]), model(ids[1:, :5])
    assert torch.isfinite(batched).all()
    assert torch.allclose(batched[0], first[0], atol=1e-5)
    assert torch.allclose(batched[1, :5], second[0], atol=1e-5)


def test_expert_counts_report_distinct_experts_of_the_batch():
    model = _model(MIXTRAL_LIKE, seed=7)
    with torch.no_grad():
        model(torch.randint(0, 96, (3, 5)))
    for counts in model.last_expert_counts:
        assert counts.shape == (4,)
        assert int(counts.sum()) == 3 * 5 * 2
    with torch.no_grad():
        model(torch.tensor([[11]]))
    assert [int((c > 0).sum()) for c in model.last_expert_counts] == [2, 2]  # one token, top-2


def test_kv_cache_slots_and_overflow():
    cache = KVCache.for_config(MIXTRAL_LIKE, num_slots=2, max_len=4)
    assert cache.nbytes == 2 * 2 * 2 * 4 * 2 * 8 * 4  # k+v, layers, slots, len, kv heads, head dim, fp32
    a, b = cache.allocate(), cache.allocate()
    assert (a, b) == (0, 1) and cache.num_free == 0
    with pytest.raises(RuntimeError, match="full"):
        cache.allocate()
    cache.free(a)
    with pytest.raises(ValueError, match="not allocated"):
        cache.free(a)
    model = _model(MIXTRAL_LIKE)
    with torch.no_grad(), pytest.raises(ValueError, match="max_len"):
        model(torch.zeros(1, 5, dtype=torch.long), kv_cache=cache, slots=torch.tensor([b]))


def test_expert_fn_hook_is_used_for_inference_and_sorted_path_for_training():
    model = _model(MIXTRAL_LIKE)
    calls = []

    def spy(hidden, w13, w2, weights, ids):
        calls.append(hidden.shape[0])
        return sorted_moe(hidden, w13, w2, weights, ids)

    model.set_expert_fn(spy)
    ids = torch.randint(0, 96, (2, 3))
    with torch.no_grad():
        model(ids)
    assert calls == [6, 6]
    model.train()
    model(ids, labels=ids).backward()
    assert calls == [6, 6]
    try:
        from raypress.kernels.moe import fused_moe
    except ImportError:
        fused_moe = sorted_moe
    assert default_expert_fn() is fused_moe
    # the default inference kernels and the differentiable training path give the same logits
    model.set_expert_fn(None)
    model.eval()
    with torch.no_grad():
        inference = model(ids)
    assert torch.allclose(model(ids), inference, atol=1e-5)


def test_aux_loss_is_positive_and_differentiable_and_total_loss_adds_it():
    model = _model(MIXTRAL_LIKE, seed=8).train()
    ids = torch.randint(0, 96, (2, 8), generator=torch.Generator().manual_seed(9))
    loss = model(ids, labels=ids)
    assert model.last_aux_loss.item() > 0
    expected = model.last_lm_loss + MIXTRAL_LIKE.router_aux_loss_coef * model.last_aux_loss
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)
    # the aux loss sends gradient to the routers: d(loss)/d(router) changes with its coefficient
    heavy = MoEForCausalLM(replace(MIXTRAL_LIKE, router_aux_loss_coef=1.0)).train()
    heavy.load_state_dict(model.state_dict())
    loss.backward()
    heavy(ids, labels=ids).backward()
    for light_layer, heavy_layer in zip(model.layers, heavy.layers):
        aux_grad = heavy_layer.moe.router.weight.grad - light_layer.moe.router.weight.grad
        assert aux_grad.abs().max() > 1e-4


def test_training_steps_reduce_loss_on_a_tiny_batch():
    model = _model(QWEN_LIKE, seed=10).train()
    ids = torch.randint(0, 96, (4, 16), generator=torch.Generator().manual_seed(11))
    labels = ids.clone()
    labels[:, :2] = -100
    losses = []
    for _ in range(15):  # plain SGD by hand: torch.optim's first use imports dynamo (seconds)
        model.zero_grad()
        loss = model(ids, labels=labels)
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param.add_(param.grad, alpha=-0.5)
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_tied_embeddings_share_one_matrix():
    model = _model(QWEN_LIKE)
    assert model.lm_head is None
    names = {n for n, _ in model.named_parameters()}
    assert "lm_head.weight" not in names and "layers.0.attn.qkv_proj.bias" in names


def test_logits_at_returns_only_the_asked_positions():
    torch.manual_seed(0)
    model = MoEForCausalLM(MIXTRAL_LIKE).eval()
    ids = torch.randint(0, MIXTRAL_LIKE.vocab_size, (3, 7))
    lengths = torch.tensor([7, 2, 5])
    with torch.no_grad():
        full = model(ids, input_lengths=lengths)
        last = model(ids, input_lengths=lengths, logits_at=lengths - 1)
    assert last.shape == (3, MIXTRAL_LIKE.vocab_size)
    torch.testing.assert_close(last, full[torch.arange(3), lengths - 1])
