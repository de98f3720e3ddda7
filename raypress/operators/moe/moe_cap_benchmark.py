"""`moe_cap_benchmark`: MoE-CAP (cost, accuracy, performance) of a served or loaded MoE model -> Report.

For each concurrency level the stage sends every prompt/answer row whose prompt fits the target's
context (counted by the target's own tokenizer first; the others are listed in the Report with
their token count, as benchmark_serving-style harnesses prune them) with at most that many
requests in flight, times each request on the client side from its stream (TTFT, TPOT, end to
end), scores the completions by exact match, and reads the engine's step records of that level alone to price
every prefill and decode forward pass (``cap.metrics.pass_utilisation``: S-MBU, S-MFU).  Each
level is one "system" of the CAP radar (accuracy, throughput, USD per million tokens).

Two targets behind one protocol (``cap.target.BenchmarkTarget``), so the numbers mean the same either way:

- ``endpoint`` input (``serve_llm``'s Report): ``cap.http_client.HttpTarget`` streams
  ``POST /v1/completions`` from the live server and reads ``/raypress/v1/engine``,
  ``/raypress/v1/steps`` and ``/raypress/v1/tokenize``;
- ``model`` input (a Model dir): ``cap.in_process.InProcessTarget`` runs an ``Engine`` in this process.

Client-side timings include HTTP and event-loop overhead for an endpoint; the step records
(server-side forward times) do not, so S-MBU/S-MFU are about the engine and TTFT/TPOT are about
what a user sees.  One warm-up request runs first and is left out of every number.  Hardware
``"cpu"`` is measured on the machine running this stage: right for the in-process target and
for a server on the same host, not for a remote one (name its GPU instead).

This module chooses the target, selects the rows and drives the levels; ``cap/levels.py`` runs
one level, ``cap/report.py`` scores it and writes the Report and the radar.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
from collections.abc import Coroutine, Sequence
from typing import Any, ClassVar, TypeVar


from raypress.artifacts import Artifact, ReportArtifact
from raypress.models.moe_config import MoEConfig
from raypress.operators.base import Resources, RunContext, Stage
from raypress.operators.moe.cap.choice_scoring import ChoiceQuestion, build_questions, pairs_of, score
from raypress.operators.moe.cap.hardware import Hardware, get_hardware, with_costs
from raypress.operators.moe.cap.http_client import HttpTarget
from raypress.operators.moe.cap.in_process import InProcessTarget
from raypress.operators.moe.cap.levels import SETTLE_S, run_level
from raypress.operators.moe.cap.report import event_fields, level_metrics, write_report
from raypress.operators.moe.cap.systems import NAMES as SYSTEM_NAMES, engine_level, hf_generate_level
from raypress.operators.moe.cap.target import BenchmarkTarget
from raypress.operators.moe.cap.params import CapBenchmarkParams
from raypress.operators.registry import register
from raypress.schema import ArtifactType

T = TypeVar("T")
WARMUP_TOKENS = 4


# ---- rows ---------------------------------------------------------------------------------------------


def _rows_to_pairs(rows: Sequence[dict[str, Any]], prompt_key: str, answer_key: str) -> list[tuple[str, str]]:
    if not rows:
        raise ValueError("the data input has no rows to benchmark")
    missing = [k for k in (prompt_key, answer_key) if k not in rows[0]]
    if missing:
        raise ValueError(f"rows have no column(s) {missing}; columns: {sorted(rows[0])}")
    return [(str(r[prompt_key]), "" if r[answer_key] is None else str(r[answer_key])) for r in rows]


def split_by_context(counts: Sequence[int], max_tokens: int, max_len: int,
                     row_ids: Sequence[Any]) -> tuple[list[int], list[dict[str, Any]]]:
    """``(indices that fit, skipped rows)``: a row fits when its prompt is not empty and the prompt
    plus ``max_tokens`` completion tokens fit ``max_len`` (what the server accepts, and what lets
    every benchmarked request generate the same number of tokens). Skipped rows keep their id,
    token count and reason, so the Report accounts for every row it was given."""
    keep: list[int] = []
    skipped: list[dict[str, Any]] = []
    for index, (count, row_id) in enumerate(zip(counts, row_ids, strict=True)):
        if count == 0:
            reason = "the prompt is empty"
        elif count + max_tokens > max_len:
            reason = f"{count} prompt + {max_tokens} completion tokens exceed the context of {max_len}"
        else:
            keep.append(index)
            continue
        skipped.append({"row": index, "id": row_id, "prompt_tokens": count, "reason": reason})
    return keep, skipped


def systems_workload(pairs: Sequence[tuple[str, str]], counts: Sequence[int], max_tokens: int, max_len: int,
                     requests: int) -> list[tuple[str, str]]:
    """The systems comparison's requests: the pairs whose prompt leaves room for ``max_tokens``
    completion tokens, in order, repeated up to ``requests`` (0: each once)."""
    fit = [pair for pair, count in zip(pairs, counts, strict=True) if count + max_tokens <= max_len]
    if not fit:
        return []
    return [fit[k % len(fit)] for k in range(max(requests, len(fit)) if requests else len(fit))]


def _plain_id(value: Any) -> int | str:
    """A row id the Report's JSON can hold (Ray Data hands numpy scalars back)."""
    value = value.item() if hasattr(value, "item") else value
    return value if isinstance(value, (int, str)) else str(value)


def _run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run``, also from a thread that already runs an event loop (then on a fresh thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


# ---- the stage ------------------------------------------------------------------------------------


@register("moe_cap_benchmark", requires={"torch": "moe", "safetensors": "moe", "tokenizers": "moe",
                                         "matplotlib": "moe"},
          requires_when={"systems": {"transformers": "dev"}})  # hf_generate loads the checkpoint with it
class MoECapBenchmark(Stage[CapBenchmarkParams]):
    """MoE-CAP benchmark of a served endpoint or a Model: accuracy, TTFT/TPOT/throughput, S-MBU/S-MFU, cost -> Report.

    Input ``data`` (prompt/answer rows) plus exactly one of ``endpoint`` (serve_llm's Report) or
    ``model`` (a Model dir, run in-process).  Writes ``report.json`` and ``cap_radar.png``."""

    inputs: ClassVar[dict[str, ArtifactType]] = {
        "data": ArtifactType.DATASET, "endpoint": ArtifactType.REPORT, "model": ArtifactType.MODEL,
    }
    optional_inputs: ClassVar[frozenset[str]] = frozenset({"endpoint", "model"})  # exactly one of them
    output: ClassVar[ArtifactType] = ArtifactType.REPORT
    resources: ClassVar[Resources] = Resources(num_cpus=1)

    # -- choosing the target --------------------------------------------------------------------

    def check_inputs(self, inputs: dict[str, Artifact], node_id: str) -> str:
        """``"endpoint"`` or ``"model"``; a ValueError naming the node for any other combination."""
        if "data" not in inputs:
            raise ValueError(f"moe_cap_benchmark node {node_id!r}: the `data` input (prompt/answer rows) is required")
        given = [slot for slot in ("endpoint", "model") if slot in inputs]
        if len(given) != 1:
            what = "both" if given else "neither"
            raise ValueError(f"moe_cap_benchmark node {node_id!r}: give exactly one of the inputs `endpoint` "
                             f"(serve_llm's Report) or `model` (a Model dir); got {what}")
        return given[0]

    def make_target(self, inputs: dict[str, Artifact], node_id: str) -> BenchmarkTarget:
        p = self.params
        if self.check_inputs(inputs, node_id) == "model":
            device = "cpu"
            if p.hardware.lower() != "cpu":
                import torch

                if not torch.cuda.is_available():
                    raise ValueError(f"moe_cap_benchmark node {node_id!r}: hardware {p.hardware!r} needs a CUDA "
                                     "device for the in-process model; use hardware: cpu")
                device = "cuda"
            return InProcessTarget(inputs["model"].path, max_batch_size=max(p.concurrency), device=device)
        metrics = inputs["endpoint"].metrics  # type: ignore[union-attr]
        self.model_path = metrics.get("model_path")  # the checkpoint the other systems load
        if not metrics.get("url") or not metrics.get("model"):
            raise ValueError(f"moe_cap_benchmark node {node_id!r}: the endpoint Report has no `url`/`model` "
                             f"(keys: {sorted(metrics)})")
        env = p.api_key_env or metrics.get("api_key_env")
        key = None
        if env:
            key = os.environ.get(env)
            if not key:
                raise ValueError(f"moe_cap_benchmark node {node_id!r}: the endpoint needs a bearer token from "
                                 f"${env}, which is not set")
        return HttpTarget(metrics["url"], metrics["model"], key, p.timeout_s)

    # -- running ----------------------------------------------------------------------------------

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ReportArtifact:
        p = self.params
        self.check_inputs(inputs, ctx.node_id)
        rows = inputs["data"].ds.take(max(p.limit, p.choice_questions if p.choices else 0))  # type: ignore[union-attr]
        _rows_to_pairs(rows[: p.limit], p.prompt_key, p.answer_key)  # bad rows fail before a model loads
        self.questions(rows, ctx.node_id)
        return self.benchmark(rows, self.make_target(inputs, ctx.node_id), ctx)

    def questions(self, rows: Sequence[dict[str, Any]], node_id: str) -> list[ChoiceQuestion]:
        """The multiple-choice questions made from the rows' held-out text ([] when ``choices`` is 0)."""
        p = self.params
        if not p.choices:
            return []
        if rows and p.choice_text_key not in rows[0]:
            raise ValueError(f"moe_cap_benchmark node {node_id!r}: choices={p.choices} needs the rows' "
                             f"{p.choice_text_key!r} column (held-out text); columns: {sorted(rows[0])}")
        texts = [(str(_plain_id(row.get("id", index))), str(row[p.choice_text_key] or ""))
                 for index, row in enumerate(rows)]
        try:
            return build_questions(texts, p.choices, p.context_words, p.continuation_words,
                                   windows_per_text=p.windows_per_text, limit=p.choice_questions)
        except ValueError as exc:
            raise ValueError(f"moe_cap_benchmark node {node_id!r}: {exc}") from None

    def benchmark(self, rows: Sequence[dict[str, Any]], target: BenchmarkTarget, ctx: RunContext) -> ReportArtifact:
        """Every level over ``rows`` (the first ``limit``) against ``target``, which is closed at the end;
        writes the Report and the radar."""
        p = self.params
        try:
            questions = self.questions(rows, ctx.node_id)
            rows = list(rows)[: p.limit]
            pairs = _rows_to_pairs(rows, p.prompt_key, p.answer_key)
        except ValueError:
            _run_coroutine(target.aclose())
            raise
        row_ids = [_plain_id(row.get("id", index)) for index, row in enumerate(rows)]
        return _run_coroutine(self._benchmark(pairs, row_ids, target, ctx, questions))

    def hardware(self, info: dict[str, Any]) -> Hardware:
        """The peaks and prices: a CPU is measured here with the engine's own torch thread count
        (``info["threads"]``), before any request (the CPU is quiet)."""
        p = self.params
        threads = info.get("threads") if str(info.get("device", "cpu")).startswith("cpu") else None
        hardware = get_hardware(p.hardware, int(threads) if threads else None)
        if p.power_w is not None or p.capital_usd is not None:
            hardware = with_costs(hardware, p.power_w or hardware.power_w, p.capital_usd or hardware.capital_usd,
                                  f"parameter override (power_w={p.power_w}, capital_usd={p.capital_usd})")
        return hardware

    async def _benchmark(self, pairs: list[tuple[str, str]], row_ids: list[Any], target: BenchmarkTarget,
                         ctx: RunContext, questions: Sequence[ChoiceQuestion] = ()) -> ReportArtifact:
        p = self.params
        try:
            info = await asyncio.to_thread(target.engine_info)
            hardware = await asyncio.to_thread(self.hardware, info)
            config = MoEConfig.from_dict(info["config"])
            dtype = str(info["dtype"])
            hardware.flops(dtype)  # fail now, not after the run, when the table lacks the model's dtype
            counts = await asyncio.to_thread(target.count_tokens, [prompt for prompt, _ in pairs])
            keep, skipped = split_by_context(counts, p.max_tokens, int(info["max_len"]), row_ids)
            if not keep:
                raise ValueError(f"moe_cap_benchmark node {ctx.node_id!r}: none of the {len(pairs)} prompts fits "
                                 f"the target's context with max_tokens={p.max_tokens}; first: {skipped[0]['reason']}")
            if skipped:
                ctx.event("cap_skipped", rows=len(skipped), of=len(pairs), first=skipped[0]["reason"])
            rows_given = len(pairs)
            pairs = [pairs[index] for index in keep]
            kept_counts = [counts[index] for index in keep]
            questions = await asyncio.to_thread(self.fitting_questions, target, questions, int(info["max_len"]), ctx)
            await target.complete(pairs[0][0], min(WARMUP_TOKENS, p.max_tokens), p.temperature)
            await asyncio.sleep(SETTLE_S)
            mark = max((int(s["step"]) for s in await asyncio.to_thread(target.steps_since, -1)), default=-1)
            prompts = [prompt for prompt, _ in pairs]
            levels, runs = [], []
            for concurrency in p.concurrency:
                run = await run_level(target, prompts, concurrency, p.max_tokens, p.temperature, p.timeout_s, mark)
                mark = max([mark] + [int(s["step"]) for s in run.steps])
                level = level_metrics(run, pairs, config, dtype, hardware, p, ctx.node_id)
                levels.append(level)
                runs.append(run)
                ctx.event("cap_level", **event_fields(level))
            choice = None
            if questions:  # after the levels: scoring passes must not appear in their step records
                lls = await asyncio.to_thread(target.loglikelihoods, pairs_of(questions))
                choice = score(questions, lls)
                ctx.event("cap_choice_accuracy", acc=choice["acc"], acc_norm=choice["acc_norm"],
                          chance=choice["chance"], questions=choice["questions"])
            workload, served = pairs, None
            if p.systems and (p.systems_max_tokens or p.systems_requests):
                workload = self._systems_workload(pairs, kept_counts, int(info["max_len"]), ctx)
                # past the scoring passes: they must not appear in this level's step records either
                mark = max([mark] + [int(s["step"]) for s in await asyncio.to_thread(target.steps_since, mark)])
                run = await run_level(target, [prompt for prompt, _ in workload], max(p.concurrency),
                                      self._systems_tokens, p.temperature, p.timeout_s, mark)
                served = level_metrics(run, workload, config, dtype, hardware, p, ctx.node_id)
        finally:
            await target.aclose()
        others = await self._other_systems(target, workload, questions, info, config, dtype, hardware, ctx)
        return write_report(levels, runs[0], pairs, rows_given, skipped, info, config, dtype, hardware, p, ctx,
                            choice, others, served, self._systems_sampling(workload))

    @property
    def _systems_tokens(self) -> int:
        return self.params.systems_max_tokens or self.params.max_tokens

    def _systems_workload(self, pairs: list[tuple[str, str]], counts: list[int], max_len: int,
                          ctx: RunContext) -> list[tuple[str, str]]:
        """``systems_workload`` for this node's settings; an error naming the node when no prompt fits."""
        workload = systems_workload(pairs, counts, self._systems_tokens, max_len, self.params.systems_requests)
        if not workload:
            raise ValueError(f"moe_cap_benchmark node {ctx.node_id!r}: no prompt leaves room for "
                             f"systems_max_tokens={self._systems_tokens} in the target's context of {max_len}")
        return workload

    def _systems_sampling(self, workload: list[tuple[str, str]]) -> dict[str, Any]:
        """What the systems were measured on, for the Report."""
        return {"max_tokens": self._systems_tokens, "requests": len(workload),
                "distinct_prompts": len(set(workload)), "concurrency": max(self.params.concurrency)}

    def fitting_questions(self, target: BenchmarkTarget, questions: Sequence[ChoiceQuestion], max_len: int,
                          ctx: RunContext) -> list[ChoiceQuestion]:
        """The questions whose context + every choice fits the target's context (counted by its own
        tokenizer); the others are left out and counted in an event, as prompts that do not fit are."""
        if not questions:
            return []
        counts = iter(target.count_tokens([q.context + c for q in questions for c in q.choices]))
        fit = [q for q in questions if max([next(counts) for _ in q.choices]) < max_len]
        if len(fit) < len(questions):
            ctx.event("cap_choice_skipped", questions=len(questions) - len(fit), of=len(questions),
                      reason=f"context + choice over the {max_len}-token context")
        if not fit:
            raise ValueError(f"moe_cap_benchmark node {ctx.node_id!r}: no multiple-choice question fits the "
                             f"target's context of {max_len} tokens")
        return fit

    async def _other_systems(self, target: BenchmarkTarget, pairs: list[tuple[str, str]],
                             questions: Sequence[ChoiceQuestion], info: dict[str, Any], config: MoEConfig,
                             dtype: str, hardware: Hardware, ctx: RunContext) -> list[dict[str, Any]]:
        """``systems`` on the same checkpoint and prompts at the highest concurrency, in this process with
        the engine's thread count (after the target is closed: they do not share the CPU with it)."""
        p = self.params
        if not p.systems:
            return []
        import torch

        model_dir = getattr(target, "model_dir", None) or getattr(self, "model_path", None)
        if not model_dir:
            raise ValueError(f"moe_cap_benchmark node {ctx.node_id!r}: systems {p.systems} need the checkpoint's "
                             "path (the endpoint Report's model_path)")
        top = max(p.concurrency)
        prompts = [prompt for prompt, _ in pairs]
        choice_pairs = pairs_of(questions)
        before = torch.get_num_threads()
        torch.set_num_threads(int(info.get("threads") or before))
        others = []
        try:
            for name in p.systems:
                if name in ("engine", "kernels_off"):
                    kernels = name == "engine"
                    run, lls = await engine_level(model_dir, prompts, top, self._systems_tokens, p.temperature,
                                                  p.timeout_s, choice_pairs, kernels)
                    path = "its kernels" if kernels else "torch expert path (sorted_moe)"
                    extra = {"implementation": f"raypress Engine in process, continuous batching, {path}"}
                else:
                    run, lls, extra = await asyncio.to_thread(hf_generate_level, model_dir, prompts, top, self._systems_tokens,
                                                              choice_pairs, int(info["max_len"]))
                level = level_metrics(run, pairs, config, dtype, hardware, p, ctx.node_id)
                level.update(system=SYSTEM_NAMES[name], key=name, info=extra,
                             accuracy_choice=score(questions, lls) if questions else None)
                ctx.event("cap_system", **{"system": name, **event_fields(level)})
                others.append(level)
        finally:
            torch.set_num_threads(before)
        return others
