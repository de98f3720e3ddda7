"""MoE-CAP benchmark summaries: per-phase S-MBU / S-MFU from engine step records, exact match, latencies.

Why a separate module from ``accounting``: that one prices *one* forward pass from the config;
this one turns what a benchmark observed (the engine's ``StepRecord``s, client-side request
timings, completions) into the numbers a Report shows.  Pure functions on plain data (records as
dataclasses or the dicts a server sends), so the same code scores an in-process engine and a
remote endpoint.

Choices worth knowing:
- A step holds at most one prefill forward and one decode forward; each is one *pass*.  A *fused*
  step (new prompts packed into the decode forward: ``StepRecord.fused``) is neither phase alone, so
  it is left out of both phases' utilisation and counted (``fused_passes``).  Bytes and
  FLOPs count the real tokens only: the engine right-pads a prefill batch, and the padding's
  attention work is overhead, not useful work (MoE-CAP charges useful work).  The KV cache is
  stored in the weights' dtype, so ``dtype`` sets both byte widths.
- Utilisation is given two ways: time-weighted (Σ bytes / Σ seconds / peak, what the machine
  achieved over the run) and the median per pass (robust to a few slow passes on shared cores).
- Percentiles are numpy's linear interpolation (as vLLM's serving benchmark reports them).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from raypress.operators.moe.cap.hardware import Hardware
from raypress.operators.moe.cap.accounting import bytes_per_element, cost_breakdown, decode_batch, prefill_batch, utilisation
from raypress.models.moe_config import MoEConfig

Phase = Literal["prefill", "decode"]
PERCENTILES = (50, 90, 99)


def _get(record: Any, name: str) -> Any:
    """A field of a StepRecord given as a dataclass or as a dict (a server's JSON)."""
    return record[name] if isinstance(record, Mapping) else getattr(record, name)


def is_fused(record: Any) -> bool:
    """The step ran its new prompts inside the decode forward (records of older servers lack the field)."""
    return bool(record.get("fused", False) if isinstance(record, Mapping) else getattr(record, "fused", False))


def _pass_seconds(record: Any, phase: str) -> float:
    """The forward pass's own time (``<phase>_forward_seconds``), without the sampling and the hand-off
    of tokens the step's ``<phase>_seconds`` also hold; records without it (older servers) give that."""
    forward = record.get(f"{phase}_forward_seconds") if isinstance(record, Mapping) else \
        getattr(record, f"{phase}_forward_seconds", None)
    return float(forward) if forward else float(_get(record, f"{phase}_seconds"))


@dataclass(frozen=True)
class PassCost:
    """One forward pass as the benchmark saw it: its work, its time, its utilisations."""

    step: int
    batch_size: int  # sequences in the pass
    tokens: int  # new tokens processed
    seconds: float
    bytes: int
    flops: int
    distinct_experts: tuple[int, ...]  # per layer
    s_mbu: float
    s_mfu: float


def phase_passes(
    config: MoEConfig,
    step_records: Iterable[Any],
    dtype: object,
    hardware: Hardware,
    n_devices: int,
    phase: Phase,
) -> list[PassCost]:
    """Every pass of ``phase`` that ran in ``step_records``, priced with ``accounting.cost_breakdown``.

    A prefill ran when ``admitted > 0`` and ``prefill_experts`` is non-empty (a failed forward
    leaves it empty); a decode when ``batch_size > 0`` and ``decode_experts`` is non-empty.
    """
    if phase not in ("prefill", "decode"):
        raise ValueError(f"phase must be 'prefill' or 'decode', got {phase!r}")
    width = bytes_per_element(dtype)
    passes: list[PassCost] = []
    for record in step_records:
        if is_fused(record):
            continue
        if phase == "prefill":
            ran = _get(record, "admitted") > 0 and bool(_get(record, "prefill_experts"))
            if not ran:
                continue
            batch = prefill_batch(_get(record, "prefill_lengths"))
            experts, seconds = _get(record, "prefill_experts"), _pass_seconds(record, "prefill")
        else:
            ran = _get(record, "batch_size") > 0 and bool(_get(record, "decode_experts"))
            if not ran:
                continue
            batch = decode_batch(_get(record, "decode_contexts"))
            experts, seconds = _get(record, "decode_experts"), _pass_seconds(record, "decode")
        cost = cost_breakdown(config, batch, experts, width, width, logits="last")
        util = utilisation(cost.bytes, cost.flops, seconds, hardware, n_devices, dtype)
        passes.append(
            PassCost(
                step=int(_get(record, "step")),
                batch_size=len(batch),
                tokens=cost.tokens,
                seconds=seconds,
                bytes=cost.bytes,
                flops=cost.flops,
                distinct_experts=tuple(int(e) for e in experts),
                s_mbu=util["s_mbu"],
                s_mfu=util["s_mfu"],
            )
        )
    return passes


def pass_utilisation(
    config: MoEConfig,
    step_records: Iterable[Any],
    dtype: object,
    hardware: Hardware,
    n_devices: int,
    phase: Phase,
) -> dict[str, Any]:
    """Summary of one phase over ``step_records``: passes, tokens, seconds, mean batch size,
    S-MBU / S-MFU time-weighted and median per pass, distinct experts per layer.

    With no pass of that phase the counts are 0 and the ratios ``None``.
    """
    step_records = list(step_records)
    fused = [r for r in step_records if is_fused(r)]
    passes = phase_passes(config, step_records, dtype, hardware, n_devices, phase)
    seconds = sum(p.seconds for p in passes)
    total_bytes = sum(p.bytes for p in passes)
    total_flops = sum(p.flops for p in passes)
    summary: dict[str, Any] = {
        "phase": phase,
        "passes": len(passes),
        # left out: new prompts and decode rows in one forward; the sequences of this phase they held
        "fused_passes": len(fused),
        "fused_sequences": sum(_get(r, "admitted" if phase == "prefill" else "batch_size") for r in fused),
        "fused_tokens": sum(_get(r, "prefill_tokens" if phase == "prefill" else "batch_size") for r in fused),
        "tokens": sum(p.tokens for p in passes),
        "seconds": seconds,
        "bytes": total_bytes,
        "flops": total_flops,
        "mean_batch_size": None,
        "s_mbu": None,
        "s_mfu": None,
        "s_mbu_median": None,
        "s_mfu_median": None,
        "mean_distinct_experts": None,
        "distinct_experts_per_layer": None,
    }
    if not passes:
        return summary
    peak_bw = n_devices * hardware.peak_bandwidth
    peak_flops = n_devices * hardware.flops(dtype)
    per_layer = np.asarray([p.distinct_experts for p in passes], dtype=float)
    summary.update(
        mean_batch_size=statistics.fmean(p.batch_size for p in passes),
        s_mbu=total_bytes / seconds / peak_bw,
        s_mfu=total_flops / seconds / peak_flops,
        s_mbu_median=statistics.median(p.s_mbu for p in passes),
        s_mfu_median=statistics.median(p.s_mfu for p in passes),
        mean_distinct_experts=float(per_layer.mean()),
        distinct_experts_per_layer=per_layer.mean(axis=0).tolist(),
    )
    return summary


# ---- accuracy ------------------------------------------------------------------------------------

_SPACES = re.compile(r"\s+")


def normalise_answer(text: object) -> str:
    """The first non-blank line of ``text`` with runs of whitespace collapsed to one space.

    Why cut at the newline: a small model keeps writing after its answer (often the next question
    of a few-shot prompt); the answer is the first line.
    """
    first = str(text).strip().split("\n", 1)[0]
    return _SPACES.sub(" ", first).strip()


def exact_match(prediction: object, reference: object) -> bool:
    """Normalised prediction equals normalised reference (case-sensitive)."""
    return normalise_answer(prediction) == normalise_answer(reference)


def first_word(text: object) -> str:
    """The first whitespace-separated word of ``text`` (what a next-word cloze answer is)."""
    words = str(text).split()
    return words[0] if words else ""


MATCHERS = {"exact": exact_match, "first_word": lambda p, r: first_word(p) == first_word(r)}


def answer_match(prediction: object, reference: object, mode: str = "exact") -> bool:
    """``"exact"``: normalised first lines equal; ``"first_word"``: first words equal (a cloze
    continuation keeps writing after the word it was asked for)."""
    return bool(MATCHERS[mode](prediction, reference))


# ---- latency -------------------------------------------------------------------------------------


def tpot(ttft: float | None, e2e: float, completion_tokens: int) -> float | None:
    """Client-side time per output token after the first: (e2e - TTFT) / (tokens - 1).

    ``None`` with fewer than two tokens or no first token (as vLLM's benchmark counts it).
    """
    if ttft is None or completion_tokens < 2:
        return None
    return (e2e - ttft) / (completion_tokens - 1)


def distribution(values: Iterable[float | None]) -> dict[str, float | int | None]:
    """``n``, ``mean``, ``p50``, ``p90``, ``p99`` of the values that are not ``None``."""
    data = np.asarray([v for v in values if v is not None], dtype=float)
    out: dict[str, float | int | None] = {"n": int(data.size), "mean": float(data.mean()) if data.size else None}
    for q in PERCENTILES:
        out[f"p{q}"] = float(np.percentile(data, q)) if data.size else None
    return out


def latency_summary(
    ttft: Sequence[float | None],
    tpot_s: Sequence[float | None],
    e2e: Sequence[float],
    completion_tokens: Sequence[int],
    wall_seconds: float,
) -> dict[str, Any]:
    """TTFT / TPOT / end-to-end distributions (seconds) and throughput of one batch of requests.

    Throughput = all completion tokens / ``wall_seconds`` from the first request sent to the last
    one finished (not the sum of request times: concurrent requests overlap).
    """
    if wall_seconds <= 0:
        raise ValueError(f"wall_seconds must be > 0, got {wall_seconds}")
    tokens = int(sum(completion_tokens))
    return {
        "requests": len(e2e),
        "completion_tokens": tokens,
        "wall_seconds": wall_seconds,
        "throughput_tokens_per_s": tokens / wall_seconds,
        "requests_per_s": len(e2e) / wall_seconds,
        "ttft_s": distribution(ttft),
        "tpot_s": distribution(tpot_s),
        "e2e_s": distribution(e2e),
    }
