"""The MoE-CAP benchmark's numbers and files: each level scored and priced, the Report and the radar.

Why its own module: what a level *means* (accuracy by the chosen match, TTFT/TPOT percentiles,
throughput, USD per million tokens, per-phase S-MBU/S-MFU from its step records) and what the
Report holds (model and hardware blocks, cost constants, the dataset's skipped rows, samples,
warnings, ``cap_radar.png``) are separate from how the requests were sent (``levels.py``) and
from choosing the target (the ``moe_cap_benchmark`` op).  The arithmetic lives in
``accounting.py`` / ``metrics.py``; this module assembles it.
"""

from __future__ import annotations

from typing import Any

from raypress.artifacts import ReportArtifact
from raypress.models.moe_config import MoEConfig
from raypress.operators.base import RunContext
from raypress.operators.moe.cap.accounting import cost_per_million_tokens, param_counts
from raypress.operators.moe.cap.hardware import Hardware
from raypress.operators.moe.cap.levels import LevelRun
from raypress.operators.moe.cap.metrics import answer_match, latency_summary, normalise_answer, pass_utilisation, tpot
from raypress.operators.moe.cap.params import CapBenchmarkParams
from raypress.operators.moe.cap.radar import cap_radar
from raypress.operators.moe.cap.target import CompletionResult


SAMPLES = 5
SCORING = {"exact": "exact match of the first line, whitespace collapsed",
           "first_word": "exact match of the first whitespace-separated word"}


def level_metrics(run: LevelRun, pairs: list[tuple[str, str]], config: MoEConfig, dtype: str,
                  hardware: Hardware, p: CapBenchmarkParams, node_id: str) -> dict[str, Any]:
    """One level's numbers (one radar system); a RuntimeError naming the node when every request failed."""
    ok = [r for r in run.results if isinstance(r, CompletionResult)]
    errors = [r for r in run.results if not isinstance(r, CompletionResult)]
    if not ok:
        raise RuntimeError(f"moe_cap_benchmark node {node_id!r}: every request at concurrency "
                           f"{run.concurrency} failed; first error: {errors[0]!r}")
    correct = sum(isinstance(r, CompletionResult) and answer_match(r.text, answer, p.match)
                  for r, (_, answer) in zip(run.results, pairs))
    latency = latency_summary(
        [r.ttft for r in ok], [tpot(r.ttft, r.e2e, r.completion_tokens) for r in ok],
        [r.e2e for r in ok], [r.completion_tokens for r in ok], run.wall_seconds,
    )
    throughput = latency["throughput_tokens_per_s"]
    cost = cost_per_million_tokens(throughput, hardware, p.n_devices, p.amortisation_years, p.utilisation,
                                   p.usd_per_kwh)
    return {
        "system": f"c={run.concurrency}",
        "concurrency": run.concurrency,
        "errors": len(errors),
        "error_samples": [repr(e)[:300] for e in errors[:3]],
        "correct": int(correct),
        "accuracy": correct / len(pairs),
        **latency,
        "prompt_tokens": sum(r.prompt_tokens or 0 for r in ok),
        "cost_usd_per_mtok": cost,
        "prefill": pass_utilisation(config, run.steps, dtype, hardware, p.n_devices, "prefill"),
        "decode": pass_utilisation(config, run.steps, dtype, hardware, p.n_devices, "decode"),
        "steps": len(run.steps),
        "missed_steps": run.missed_steps,
    }


def event_fields(level: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of a level, for the run's ``cap_level`` event."""
    return {"concurrency": level["concurrency"], "accuracy": level["accuracy"], "errors": level["errors"],
            "throughput_tokens_per_s": level["throughput_tokens_per_s"], "ttft_p50_s": level["ttft_s"]["p50"],
            "tpot_p50_s": level["tpot_s"]["p50"], "cost_usd_per_mtok": level["cost_usd_per_mtok"],
            "prefill_s_mbu": level["prefill"]["s_mbu"], "decode_s_mbu": level["decode"]["s_mbu"],
            "decode_s_mfu": level["decode"]["s_mfu"]}


def config_summary(config: MoEConfig) -> dict[str, Any]:
    """The model's shape and its total / active-per-token parameter counts."""
    p = param_counts(config)
    active = p.layers * (p.dense_per_layer + p.top_k * p.expert) + p.lm_head + p.final_norm
    return {"architecture": config.architecture, "layers": config.num_hidden_layers,
            "hidden_size": config.hidden_size, "experts": config.num_local_experts,
            "top_k": config.num_experts_per_tok, "expert_intermediate_size": config.intermediate_size,
            "shared_expert_intermediate_size": config.shared_expert_intermediate_size,
            "vocab_size": config.vocab_size, "total_params": p.total, "active_params_per_token": active}


def hardware_block(hw: Hardware, n_devices: int, dtype: str) -> dict[str, Any]:
    """The peaks and prices the utilisations and costs were computed against, with their sources."""
    return {"name": hw.name, "peak_bandwidth_bytes_per_s": hw.peak_bandwidth, "peak_flops": dict(hw.peak_flops),
            "peak_flops_used": hw.flops(dtype), "dtype": dtype, "power_w": hw.power_w,
            "capital_usd": hw.capital_usd, "measured": hw.measured, "sources": dict(hw.sources),
            "n_devices": n_devices}


def write_report(levels: list[dict[str, Any]], first: LevelRun, pairs: list[tuple[str, str]], rows_given: int,
                 skipped: list[dict[str, Any]], info: dict[str, Any], config: MoEConfig, dtype: str,
                 hardware: Hardware, p: CapBenchmarkParams, ctx: RunContext,
                 choice: dict[str, Any] | None = None, others: list[dict[str, Any]] | None = None,
                 served: dict[str, Any] | None = None, systems_sampling: dict[str, Any] | None = None,
                 ) -> ReportArtifact:
    """Draw the CAP radar and save ``report.json`` under ``reports/<node>/``; the Report.  With a
    multiple-choice score (``choice``) the accuracy axis is its ``acc`` (the model's, the same at
    every level), else each level's generated-answer match.  ``served``: the target measured again on
    the systems' workload (``systems_sampling``), the row the other systems are compared with."""
    systems = {lv["system"]: {"accuracy": choice["acc"] if choice else lv["accuracy"],
                              "throughput": lv["throughput_tokens_per_s"],
                              "cost": lv["cost_usd_per_mtok"]} for lv in levels}
    radar = cap_radar(ctx.path("reports", ctx.node_id, "cap_radar.png"), systems,
                      title=f"MoE-CAP: {info.get('model')} on {hardware.name}")
    warnings = []
    device = str(info.get("device", ""))
    if hardware.measured and not info.get("threads"):
        warnings.append("the target does not say how many threads its engine runs with: the CPU peaks were "
                        "measured with this process's, which may differ")
    if hardware.measured == device.startswith("cuda"):
        warnings.append(f"utilisation is against {hardware.name} peaks but the engine runs on {device!r}")
    if skipped:
        warnings.append(f"{len(skipped)} of {rows_given} rows skipped (see dataset.skipped): "
                        f"their prompts do not fit the context of {info.get('max_len')} tokens")
    samples = []
    for result, (prompt, answer) in list(zip(first.results, pairs))[:SAMPLES]:
        text = result.text if isinstance(result, CompletionResult) else f"<error: {result!r}>"
        samples.append({"prompt": prompt[-300:], "answer": answer, "prediction": text,
                        "normalised": normalise_answer(text), "correct": answer_match(text, answer, p.match)})
    metrics = {
        "benchmark": "moe_cap",
        "target": {key: info.get(key) for key in ("model", "device", "dtype", "max_batch_size", "max_len")},
        "model": config_summary(config),
        "hardware": {**hardware_block(hardware, p.n_devices, dtype), "engine_threads": info.get("threads")},
        "cost_constants": {"usd_per_kwh": p.usd_per_kwh, "amortisation_years": p.amortisation_years,
                           "utilisation": p.utilisation, "power_w": hardware.power_w,
                           "capital_usd": hardware.capital_usd,
                           "model": "(n_devices x capital / (years x utilisation) + n_devices x power x "
                                    "usd_per_kwh) per generated token; idle power, host, cooling not included"},
        "dataset": {"rows": rows_given, "benchmarked": len(pairs), "skipped": skipped,
                    "prompt_key": p.prompt_key, "answer_key": p.answer_key, "scoring": SCORING[p.match]},
        "sampling": {"max_tokens": p.max_tokens, "temperature": p.temperature},
        "accuracy_choice": choice,
        **systems_block(levels, choice, others or [], hardware, ctx, served, systems_sampling),
        "accuracy_axis": "accuracy_choice.acc" if choice else "levels[].accuracy (generated answers)",
        "levels": levels,
        "radar": str(radar),
        "samples": samples,
        "warnings": warnings,
    }
    report = ReportArtifact(str(ctx.path("reports", ctx.node_id, "report.json")), metrics)
    report.save()
    return report


SYSTEM_AXES = ("accuracy", "throughput", "tpot", "s_mbu")
SYSTEM_LABELS = {"throughput": "Decode throughput\n(tokens/s)", "tpot": "TPOT\n(inverted: faster = out)",
                 "s_mbu": "Decode S-MBU"}


def systems_block(levels: list[dict[str, Any]], choice: dict[str, Any] | None, others: list[dict[str, Any]],
                  hardware: Hardware, ctx: RunContext, served: dict[str, Any] | None = None,
                  sampling: dict[str, Any] | None = None) -> dict[str, Any]:
    """The systems table and radar: the benchmarked target at its highest concurrency (``served``: its
    own run on the systems' workload, else its top level) beside the other systems at the same
    concurrency; axes that are separate measurements (accuracy, decode throughput, TPOT, decode
    S-MBU).  Cost per token is left off on one device: it is a constant over throughput."""
    if not others:
        return {}
    top = served or max(levels, key=lambda lv: lv["concurrency"])
    rows = [dict(top, system=f"raypress (served, c={top['concurrency']})", key="target", accuracy_choice=choice)]
    rows += others
    table = [{"system": r["system"], "concurrency": r["concurrency"],
              "accuracy": (r["accuracy_choice"] or {}).get("acc", r["accuracy"]) if r.get("accuracy_choice")
              else r["accuracy"],
              "throughput": r["throughput_tokens_per_s"], "tpot": r["tpot_s"]["p50"], "ttft": r["ttft_s"]["p50"],
              "s_mbu": r["decode"]["s_mbu"] or 0.0, "s_mfu": r["decode"]["s_mfu"] or 0.0,
              "cost": r["cost_usd_per_mtok"]} for r in rows]
    radar = cap_radar(ctx.path("reports", ctx.node_id, "cap_systems_radar.png"),
                      {row["system"]: row for row in table}, title=f"MoE-CAP systems on {hardware.name}",
                      axes=SYSTEM_AXES, labels=SYSTEM_LABELS)
    return {"systems": table, "systems_radar": str(radar), "systems_sampling": sampling,
            "systems_target": served,
            "systems_axes": {"plotted": list(SYSTEM_AXES),
                             "left_off": {"cost": "one device: USD per token is a constant / throughput, the "
                                                  "throughput axis again",
                                          "ttft": "in the table, not plotted (four axes keep the radar readable)"}},
            "systems_detail": others}
