"""MoE-CAP arithmetic by hand, hardware table and CPU measurement, cost, and the radar PNG."""

from __future__ import annotations

import math
import time
from dataclasses import replace

import pytest

from raypress.operators.moe.cap.radar import cap_radar, normalise
from raypress.operators.moe.cap.hardware import HARDWARE, Hardware, get_hardware, gpu_entry, measure_cpu
from raypress.operators.moe.cap.accounting import (
    SeqPass,
    attention_pairs,
    bytes_per_element,
    cost_breakdown,
    cost_per_million_tokens,
    decode_batch,
    distinct_experts,
    forward_cost,
    param_counts,
    prefill_batch,
    utilisation,
)
from raypress.models.moe_config import MoEConfig

# V=10, H=4, I=6 per expert, L=2 layers, 2 query heads, 1 KV head, head_dim 2, E=4 experts, top-2.
TINY = MoEConfig(
    vocab_size=10,
    hidden_size=4,
    intermediate_size=6,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    head_dim=2,
    num_local_experts=4,
    num_experts_per_tok=2,
)


def test_param_counts_by_hand() -> None:
    p = param_counts(TINY)
    # q: 4x(2*2)=16, k: 4x(1*2)=8, v: 8, o: (2*2)x4=16
    assert p.attention == 16 + 8 + 8 + 16 == 48
    assert p.router == 4 * 4 == 16
    assert p.expert == 3 * 4 * 6 == 72
    assert p.shared == 0
    assert p.norms == 2 * 4 == 8
    assert p.embedding == p.lm_head == 10 * 4 == 40
    # 2 layers x (48 + 16 + 4*72 + 8) + final norm 4 + embedding 40 + untied head 40
    assert p.total == 2 * (48 + 16 + 288 + 8) + 4 + 40 + 40 == 804
    assert param_counts(replace(TINY, tie_word_embeddings=True)).total == 804 - 40


def test_qwen2_moe_shared_expert_gate_and_qkv_bias() -> None:
    cfg = replace(
        TINY, architecture="qwen2_moe", attention_bias=True, shared_expert_intermediate_size=8, shared_expert_gate=True
    )
    p = param_counts(cfg)
    assert p.attention == 48 + (4 + 2 + 2)  # q/k/v biases: 2*2 + 1*2 + 1*2
    assert p.shared == 3 * 4 * 8 + 4 == 100  # SwiGLU 3*H*I_s + H x 1 sigmoid gate


def _hf_numel(model_type: str, cfg: MoEConfig) -> int:
    transformers = pytest.importorskip("transformers")
    common = dict(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads,
        num_experts_per_tok=cfg.num_experts_per_tok,
        tie_word_embeddings=cfg.tie_word_embeddings,
    )
    if model_type == "mixtral":
        hf_cfg = transformers.MixtralConfig(
            intermediate_size=cfg.intermediate_size, num_local_experts=cfg.num_local_experts,
            head_dim=cfg.dim_per_head, **common,
        )
        model = transformers.MixtralForCausalLM(hf_cfg)
    else:
        hf_cfg = transformers.Qwen2MoeConfig(
            moe_intermediate_size=cfg.intermediate_size, intermediate_size=cfg.intermediate_size,
            shared_expert_intermediate_size=cfg.shared_expert_intermediate_size,
            num_experts=cfg.num_local_experts, decoder_sparse_step=1, mlp_only_layers=[], **common,
        )
        model = transformers.Qwen2MoeForCausalLM(hf_cfg)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("tied", [False, True])
def test_param_counts_match_hf_mixtral_and_qwen2_moe(tied: bool) -> None:
    mixtral = replace(TINY, tie_word_embeddings=tied)
    assert param_counts(mixtral).total == _hf_numel("mixtral", mixtral)
    qwen = replace(
        TINY, architecture="qwen2_moe", attention_bias=True, shared_expert_intermediate_size=8,
        shared_expert_gate=True, head_dim=None, tie_word_embeddings=tied,
    )
    assert param_counts(qwen).total == _hf_numel("qwen2_moe", qwen)


def test_decode_pass_by_hand() -> None:
    # Two sequences with 5 and 3 cached tokens, one new token each; layer 0 ran 3 experts, layer 1 ran 2.
    cost = cost_breakdown(TINY, decode_batch([5, 3]), [3, 2], dtype_bytes=2, kv_dtype_bytes=2)
    # weights: 2 layers x (attn 48 + router 16 + norms 8) = 144; experts (3+2) x 72 = 360;
    # LM head 40 + final norm 4 = 44  ->  548 params x 2 bytes
    assert cost.weight_bytes == (144 + 360 + 44) * 2 == 1096
    assert cost.expert_bytes == 360 * 2
    assert cost.embedding_bytes == 2 * 4 * 2  # 2 tokens x H x 2 bytes
    # KV per token: 2 layers x (K,V) x 1 kv head x head_dim 2 x 2 bytes = 16
    assert cost.kv_read_bytes == (5 + 3) * 16 == 128
    assert cost.kv_write_bytes == 2 * 16 == 32
    assert cost.bytes == 1096 + 16 + 128 + 32 == 1272
    # per token: 2 layers x 2 x (attn 48 + router 16 + top-2 x 72) = 832 (norms are not matmuls);
    # 2 tokens; + LM head 2 x 40 per sequence
    assert cost.linear_flops == 2 * 832 + 2 * 2 * 40 == 1824
    # pairs: (5+1) + (3+1) = 10; per pair and layer 2*2*heads 2*head_dim 2 = 16; 2 layers
    assert cost.attention_flops == 10 * 16 * 2 == 320
    assert forward_cost(TINY, decode_batch([5, 3]), [3, 2], 2, 2) == (1272, 1824 + 320)


def test_prefill_pass_by_hand_and_differs_from_decode() -> None:
    # One 4-token prompt, nothing cached; 4 experts in layer 0, 3 in layer 1.
    cost = cost_breakdown(TINY, prefill_batch([4]), [4, 3], dtype_bytes=2, kv_dtype_bytes=2)
    assert cost.weight_bytes == (144 + 7 * 72 + 44) * 2 == 1384
    assert cost.embedding_bytes == 4 * 4 * 2
    assert cost.kv_read_bytes == 0
    assert cost.kv_write_bytes == 4 * 16
    assert cost.bytes == 1384 + 32 + 0 + 64 == 1480
    assert cost.linear_flops == 4 * 832 + 2 * 40  # logits for the last position only
    assert cost.attention_flops == (1 + 2 + 3 + 4) * 16 * 2 == 320  # causal: 10 pairs
    every = cost_breakdown(TINY, prefill_batch([4]), [4, 3], 2, 2, logits="all")
    assert every.linear_flops - cost.linear_flops == 3 * 2 * 40
    # Decoding the 4th token after a 3-token prefix reads the cache instead of writing 4 tokens' KV.
    decode = cost_breakdown(TINY, decode_batch([3]), [2, 2], 2, 2)
    assert decode.kv_read_bytes == 3 * 16 and decode.kv_write_bytes == 16
    assert decode.attention_flops == 4 * 16 * 2  # one query, 4 keys
    assert decode.flops < cost.flops


def test_attention_flops_per_sequence_not_per_batch() -> None:
    two = cost_breakdown(TINY, prefill_batch([4, 4]), [4, 4], 2, 2).attention_flops
    one = cost_breakdown(TINY, prefill_batch([8]), [4, 4], 2, 2).attention_flops
    assert two == 2 * 10 * 32 and one == 36 * 32  # 8*9/2 = 36 causal pairs in one sequence
    assert attention_pairs(SeqPass(new_tokens=3, context=5)) == 3 * 5 + 6


def test_distinct_experts_change_bytes_exactly() -> None:
    top1 = replace(TINY, num_experts_per_tok=1)
    batch = decode_batch([7, 7, 7, 7])
    one = forward_cost(top1, batch, [1, 1], 2, 2)
    every = forward_cost(top1, batch, [4, 4], 2, 2)
    assert every[0] - one[0] == (4 - 1) * 72 * 2 * 2  # (E-1) x expert params x bytes x layers
    assert every[1] == one[1]  # FLOPs follow top-k, not how many distinct experts ran


def test_distinct_experts_from_counts_and_validation() -> None:
    torch = pytest.importorskip("torch")
    assert distinct_experts([[0, 3, 0, 1], torch.tensor([2, 2, 2, 0])]) == [2, 3]
    with pytest.raises(ValueError):
        forward_cost(TINY, decode_batch([1]), [3, 2], 2, 2)  # one token, top-2: at most 2 experts
    with pytest.raises(ValueError):
        forward_cost(TINY, decode_batch([1, 1]), [1, 2], 2, 2)  # top-2 needs >= 2
    with pytest.raises(ValueError):
        forward_cost(TINY, decode_batch([1]), [2], 2, 2)  # one count per layer
    assert bytes_per_element("bfloat16") == 2 and bytes_per_element("float32") == 4


def test_s_mbu_s_mfu_for_given_latency() -> None:
    box = Hardware(name="box", peak_bandwidth=1e9, peak_flops={"bf16": 4e9}, power_w=100.0, capital_usd=1000.0)
    bytes_, flops = forward_cost(TINY, decode_batch([5, 3]), [3, 2], 2, 2)  # (1272, 2144), see above
    u = utilisation(bytes_, flops, latency_s=1e-6, hardware=box, n_devices=2)
    assert u["s_mbu"] == pytest.approx(1272 / 1e-6 / (2 * 1e9)) == pytest.approx(0.636)
    assert u["s_mfu"] == pytest.approx(2144 / 1e-6 / (2 * 4e9)) == pytest.approx(0.268)
    h200 = utilisation(4.8e12, 989e12, 1.0, HARDWARE["H200"], dtype="bfloat16")
    assert h200 == {"s_mbu": pytest.approx(1.0), "s_mfu": pytest.approx(1.0)}
    with pytest.raises(KeyError):
        utilisation(1.0, 1.0, 1.0, HARDWARE["A100"], dtype="fp8")


def test_hardware_table_states_sources() -> None:
    h200 = HARDWARE["H200"]
    assert (h200.peak_bandwidth, h200.flops("bf16"), h200.power_w) == (4.8e12, 989e12, 700.0)
    assert (HARDWARE["H100"].peak_bandwidth, HARDWARE["H100"].flops("bf16")) == (3.35e12, 989e12)
    assert (HARDWARE["A100"].peak_bandwidth, HARDWARE["A100"].flops("bf16"), HARDWARE["A100"].power_w) == (
        2.039e12, 312e12, 400.0,
    )
    for entry in HARDWARE.values():
        assert set(entry.sources) == {"peak_bandwidth", "peak_flops", "power_w", "capital_usd"}
    assert gpu_entry("NVIDIA H200").name == "H200"
    assert get_hardware("h200") is h200 and get_hardware("NVIDIA H100 80GB HBM3").name == "H100"
    assert gpu_entry("NVIDIA A100-SXM4-80GB").name == "A100"
    with pytest.raises(KeyError):
        gpu_entry("NVIDIA GH200 480GB")


def test_measure_cpu_is_positive_finite_and_quick() -> None:
    pytest.importorskip("torch")
    start = time.perf_counter()
    cpu = measure_cpu(power_w=95.0)
    took = time.perf_counter() - start
    assert took < 5.0  # ~1-1.5 s with the default budgets; the slack is for oversubscribed shared cores
    assert cpu.measured and cpu.power_w == 95.0 and "95" in cpu.sources["power_w"]
    for value in (cpu.peak_bandwidth, cpu.flops("fp32"), cpu.flops("bf16")):
        assert math.isfinite(value) and value > 0
    assert 1e8 < cpu.peak_bandwidth < 1e13  # 0.1 GB/s .. 10 TB/s: a copy, not a cache hit or a bug
    assert 1e8 < cpu.flops("fp32") < 1e14


def test_cpu_peaks_are_measured_at_the_engine_s_thread_count() -> None:
    """A replica runs with num_cpus threads (1 by default) while the benchmark's process may have
    more: the peaks must be measured with the engine's count, and this process's left as it was."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen: list[int] = []
        import raypress.operators.moe.cap.hardware as hw

        real = hw.measure_copy_bandwidth
        hw.measure_copy_bandwidth = lambda n: (seen.append(torch.get_num_threads()), real(n))[1]
        try:
            one = measure_cpu(dtypes=("fp32",), copy_bytes=8 << 20, threads=1)
        finally:
            hw.measure_copy_bandwidth = real
        assert seen == [1] and one.name == "CPU (1 threads)" and "1 torch threads" in one.sources["peak_flops"]
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_cost_per_million_tokens_by_hand() -> None:
    # H200: 35,000 USD over 3 x 365 x 86,400 s = 3.6995e-4 USD/s; 0.7 kW x 0.15 USD/kWh / 3600 = 2.9167e-5 USD/s
    capital = 35_000 / (3 * 365 * 86_400)
    energy = 0.7 * 0.15 / 3600
    expected = (capital + energy) / 1000 * 1e6
    assert expected == pytest.approx(0.39911, rel=1e-4)
    assert cost_per_million_tokens(1000.0, HARDWARE["H200"]) == pytest.approx(expected)
    # Two devices, half the time busy: capital doubles twice over, energy doubles.
    both = cost_per_million_tokens(1000.0, HARDWARE["H200"], n_devices=2, utilisation=0.5)
    assert both == pytest.approx((4 * capital + 2 * energy) / 1000 * 1e6)


def test_radar_normalisation_and_png(tmp_path) -> None:
    systems = {
        "ours-cpu": {"accuracy": 0.4, "throughput": 50.0, "cost": 2.0},
        "ours-h200": {"accuracy": 0.4, "throughput": 2000.0, "cost": 0.5},
    }
    scores = normalise(systems)
    assert scores["ours-cpu"] == {"accuracy": 1.0, "throughput": 0.025, "cost": 0.25}
    assert scores["ours-h200"] == {"accuracy": 1.0, "throughput": 1.0, "cost": 1.0}
    out = cap_radar(tmp_path / "fig" / "cap.png", systems)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
