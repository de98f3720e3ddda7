"""MoE-CAP benchmark summaries: S-MBU / S-MFU per phase from step records (numbers by hand),
exact-match normalisation, latency distributions and throughput."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from raypress.operators.moe.cap.metrics import (
    distribution,
    exact_match,
    latency_summary,
    normalise_answer,
    pass_utilisation,
    phase_passes,
    tpot,
)
from raypress.operators.moe.cap.hardware import Hardware
from raypress.models.moe_config import MoEConfig
from raypress.inference.stats import StepRecord

# V=10, H=4, I=6, L=2, 2 query heads, 1 KV head, head_dim 2, E=4, top-2 (as in test_moe_cap).
# Per layer: attention 48, router 16, norms 8 -> dense 72; one expert 3*4*6 = 72.
# LM head 40 + final norm 4 = 44.  fp32: 4 bytes; KV per token = 2 layers * 2 * 1 * 2 * 4 = 32 bytes.
# Linear FLOPs per token = 2 * 2 layers * (48 + 16 + 2*72) = 832; LM head row 2*40 = 80.
# Attention FLOPs per (query, key) pair = 2 * 2 * 2 heads * 2 dims * 2 layers = 32.
TINY = MoEConfig(
    vocab_size=10, hidden_size=4, intermediate_size=6, num_hidden_layers=2, num_attention_heads=2,
    num_key_value_heads=1, head_dim=2, num_local_experts=4, num_experts_per_tok=2,
)
TOY = Hardware(name="toy", peak_bandwidth=1000.0, peak_flops={"fp32": 2000.0}, power_w=1.0, capital_usd=1.0)


def _record(step: int, **fields: object) -> StepRecord:
    base: dict[str, object] = dict(
        step=step, started=0.0, seconds=1.0, admitted=0, prefill_tokens=0, prefill_seconds=0.0, batch_size=0,
        decode_context_tokens=0, decode_seconds=0.0, new_tokens=0, finished=0, queue_depth=0, running=0,
        prefill_experts=[], decode_experts=[], prefill_lengths=[], decode_contexts=[],
    )
    base.update(fields)
    return StepRecord(**base)  # type: ignore[arg-type]


RECORDS = [
    # step 0: prefill of prompts of 3 and 1 tokens, then a decode of both (contexts 3 and 1)
    _record(0, admitted=2, prefill_tokens=4, prefill_seconds=0.5, prefill_experts=[3, 4], prefill_lengths=[3, 1],
            batch_size=2, decode_seconds=0.25, decode_experts=[2, 3], decode_contexts=[3, 1]),
    # step 1: decode only, contexts 4 and 2
    _record(1, batch_size=2, decode_seconds=0.75, decode_experts=[2, 2], decode_contexts=[4, 2]),
    # step 2: a failed decode forward (no experts recorded) and no admission: no pass of either phase
    _record(2, batch_size=2, decode_seconds=0.1, decode_experts=[], decode_contexts=[5, 3]),
]


def test_prefill_pass_by_hand() -> None:
    (p,) = phase_passes(TINY, RECORDS, "fp32", TOY, 1, "prefill")
    # weights: 2*72 dense + 72*(3+4) experts + 44 head = 692 params = 2768 B; embeddings 4 tokens*4*4 = 64;
    # KV read 0; KV written 4*32 = 128
    assert p.bytes == 2768 + 64 + 0 + 128 == 2960
    # linear 832*4 + 80*2 logit rows = 3488; attention pairs 3*4/2 + 1 = 7 -> 224
    assert p.flops == 3488 + 224 == 3712
    assert (p.tokens, p.batch_size, p.seconds, p.step) == (4, 2, 0.5, 0)
    assert p.s_mbu == pytest.approx(2960 / 0.5 / 1000)  # 5.92
    assert p.s_mfu == pytest.approx(3712 / 0.5 / 2000)  # 3.712


def test_a_fused_step_counts_in_neither_phase() -> None:
    """New prompts packed into the decode forward: its time cannot be split between the phases."""
    fused = _record(3, admitted=1, prefill_tokens=2, prefill_experts=[2, 2], prefill_lengths=[2], batch_size=2,
                    decode_seconds=0.3, decode_forward_seconds=0.25, decode_experts=[3, 3],
                    decode_contexts=[6, 4], fused=True)
    records = [*RECORDS, fused]
    for phase, passes in (("prefill", 1), ("decode", 2)):
        assert len(phase_passes(TINY, records, "fp32", TOY, 1, phase)) == passes
        summary = pass_utilisation(TINY, records, "fp32", TOY, 1, phase)
        assert (summary["passes"], summary["fused_passes"]) == (passes, 1)
        assert (summary["fused_sequences"], summary["fused_tokens"]) == ((1, 2) if phase == "prefill" else (2, 2))
    as_json = asdict(fused)  # a server's /raypress/v1/steps gives dicts
    assert pass_utilisation(TINY, [as_json], "fp32", TOY, 1, "decode")["fused_passes"] == 1


def test_decode_passes_by_hand() -> None:
    first, second = phase_passes(TINY, RECORDS, "fp32", TOY, 1, "decode")
    # weights 144 + 72*5 + 44 = 548 params = 2192 B; embeddings 2*16 = 32; KV read (3+1)*32 = 128; write 64
    assert first.bytes == 2192 + 32 + 128 + 64 == 2416
    # linear 832*2 + 80*2 = 1824; pairs (3+1) + (1+1) = 6 -> 192
    assert first.flops == 1824 + 192 == 2016
    # weights 144 + 72*4 + 44 = 476 params = 1904 B; KV read (4+2)*32 = 192
    assert second.bytes == 1904 + 32 + 192 + 64 == 2192
    assert second.flops == 1824 + (5 + 3) * 32 == 2080
    assert first.s_mbu == pytest.approx(9.664)
    assert second.s_mfu == pytest.approx(2080 / 0.75 / 2000)


def test_pass_utilisation_summary_time_weighted_and_median() -> None:
    decode = pass_utilisation(TINY, RECORDS, "float32", TOY, 1, "decode")
    assert decode["passes"] == 2 and decode["tokens"] == 4 and decode["mean_batch_size"] == 2
    assert decode["seconds"] == pytest.approx(1.0)
    assert (decode["bytes"], decode["flops"]) == (2416 + 2192, 2016 + 2080)
    assert decode["s_mbu"] == pytest.approx(4608 / 1.0 / 1000)  # Σbytes / Σseconds / peak
    assert decode["s_mfu"] == pytest.approx(4096 / 1.0 / 2000)
    assert decode["s_mbu_median"] == pytest.approx((9.664 + 2192 / 0.75 / 1000) / 2)
    assert decode["s_mfu_median"] == pytest.approx((4.032 + 2080 / 0.75 / 2000) / 2)
    assert decode["mean_distinct_experts"] == pytest.approx(2.25)
    assert decode["distinct_experts_per_layer"] == pytest.approx([2.0, 2.5])
    two = pass_utilisation(TINY, RECORDS, "fp32", TOY, 2, "decode")  # two devices halve the utilisation
    assert two["s_mbu"] == pytest.approx(decode["s_mbu"] / 2) and two["s_mfu"] == pytest.approx(decode["s_mfu"] / 2)
    prefill = pass_utilisation(TINY, RECORDS, "fp32", TOY, 1, "prefill")
    assert prefill["passes"] == 1 and prefill["tokens"] == 4
    assert prefill["s_mbu"] == pytest.approx(5.92) == prefill["s_mbu_median"]


def test_dict_records_equal_dataclasses_and_empty_phase() -> None:
    as_dicts = [asdict(r) for r in RECORDS]
    assert pass_utilisation(TINY, as_dicts, "fp32", TOY, 1, "decode") == pass_utilisation(
        TINY, RECORDS, "fp32", TOY, 1, "decode")
    empty = pass_utilisation(TINY, RECORDS[1:], "fp32", TOY, 1, "prefill")
    assert empty["passes"] == 0 and empty["s_mbu"] is None and empty["mean_batch_size"] is None
    with pytest.raises(ValueError, match="phase"):
        pass_utilisation(TINY, RECORDS, "fp32", TOY, 1, "train")  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="bf16"):  # the toy has no bf16 peak
        pass_utilisation(TINY, RECORDS, "bf16", TOY, 1, "decode")


def test_normalise_and_exact_match() -> None:
    assert normalise_answer("  4\nquestion: 3 + 4 =") == "4"
    assert normalise_answer("\n\n  Paris   is\tnice \n x") == "Paris is nice"
    assert normalise_answer(7) == "7"
    assert exact_match(" 4 \n5", "4")
    assert exact_match("New  York", "New York")
    assert not exact_match("4.", "4")
    assert not exact_match("paris", "Paris")  # case-sensitive
    assert not exact_match("", "4")


def test_latency_distributions_and_throughput() -> None:
    d = distribution([0.1, 0.2, None, 0.3, 0.4])
    assert d["n"] == 4
    assert d["mean"] == pytest.approx(0.25) and d["p50"] == pytest.approx(0.25)
    assert d["p90"] == pytest.approx(0.37) and d["p99"] == pytest.approx(0.397)  # linear interpolation
    assert distribution([None])["p50"] is None
    assert tpot(0.5, 2.5, 5) == pytest.approx(0.5)  # (2.5 - 0.5) / 4
    assert tpot(0.5, 0.5, 1) is None and tpot(None, 1.0, 3) is None
    s = latency_summary([0.1, 0.3], [0.05, None], [1.0, 2.0], [10, 20], wall_seconds=2.0)
    assert s["completion_tokens"] == 30 and s["throughput_tokens_per_s"] == pytest.approx(15.0)
    assert s["requests"] == 2 and s["requests_per_s"] == pytest.approx(1.0)
    assert s["ttft_s"]["mean"] == pytest.approx(0.2) and s["tpot_s"]["n"] == 1
    assert s["e2e_s"]["p50"] == pytest.approx(1.5)
    with pytest.raises(ValueError):
        latency_summary([], [], [], [], wall_seconds=0.0)


def test_passes_are_timed_by_their_forward_alone_when_the_record_has_it() -> None:
    """A step's ``decode_seconds`` also hold sampling and handing tokens to requests; S-MBU divides
    by the forward's own time when the record carries it (a dict from a server's JSON too)."""
    timed = _record(1, batch_size=2, decode_seconds=0.75, decode_forward_seconds=0.5, decode_experts=[2, 2],
                    decode_contexts=[4, 2])
    (with_forward,) = phase_passes(TINY, [timed], "fp32", TOY, 1, "decode")
    (whole_step,) = phase_passes(TINY, [RECORDS[1]], "fp32", TOY, 1, "decode")
    (from_json,) = phase_passes(TINY, [asdict(timed)], "fp32", TOY, 1, "decode")
    assert with_forward.seconds == from_json.seconds == 0.5 and whole_step.seconds == 0.75
    assert with_forward.s_mbu == pytest.approx(whole_step.s_mbu * 0.75 / 0.5)
