"""`moe_cap_benchmark`: MoE-CAP (cost, accuracy, performance) of a served or loaded MoE model -> Report.

For each concurrency level the stage sends every prompt/answer row whose prompt fits the target's
context (counted by the target's own tokenizer first; the others are listed in the Report with
their token count, as benchmark_serving-style harnesses prune them) with at most that many
requests in flight, times each request on the client side from its stream (TTFT, TPOT, end to
end), scores the completions by exact match, and reads the engine's step records of that level alone to price
every prefill and decode forward pass (``cap_metrics.pass_utilisation``: S-MBU, S-MFU).  Each
level is one "system" of the CAP radar (accuracy, throughput, USD per million tokens).

Two targets behind one protocol (``BenchmarkTarget``), so the numbers mean the same either way:

- ``endpoint`` input (``serve_llm``'s Report): ``HttpTarget`` streams ``POST /v1/completions``
  from the live server and reads ``/raypress/v1/engine``, ``/raypress/v1/steps`` and
  ``/raypress/v1/tokenize``;
- ``model`` input (a Model dir): ``InProcessTarget`` runs an ``Engine`` in this process.

Client-side timings include HTTP and event-loop overhead for an endpoint; the step records
(server-side forward times) do not, so S-MBU/S-MFU are about the engine and TTFT/TPOT are about
what a user sees.  One warm-up request runs first and is left out of every number.  Hardware
``"cpu"`` is measured on the machine running this stage: right for the in-process target and
for a server on the same host, not for a remote one (name its GPU instead).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from collections.abc import Coroutine, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol, TypeVar

from pydantic import Field, PositiveInt

from raypress.artifacts import Artifact, ReportArtifact
from raypress.operators.moe.cap.metrics import answer_match, latency_summary, normalise_answer, pass_utilisation, tpot
from raypress.operators.moe.cap.radar import cap_radar
from raypress.operators.moe.cap.hardware import Hardware, get_hardware, with_costs
from raypress.operators.moe.cap.accounting import cost_per_million_tokens, param_counts
from raypress.models.moe_config import MoEConfig
from raypress.operators.base import Params, Resources, RunContext, Stage
from raypress.operators.registry import register
from raypress.schema import ArtifactType

T = TypeVar("T")
WARMUP_TOKENS = 4
SETTLE_S = 0.2  # after a level: the engine records its last step just after the last token goes out
POLL_S = 1.0  # step records are read this often during a level (a server keeps a bounded history)
SAMPLES = 5
SCORING = {"exact": "exact match of the first line, whitespace collapsed",
           "first_word": "exact match of the first whitespace-separated word"}


class CapBenchmarkParams(Params):
    prompt_key: str = Field("prompt", description="column holding the prompt text")
    answer_key: str = Field("answer", description="column holding the reference answer")
    match: Literal["exact", "first_word"] = Field("exact", description="exact: first lines equal (whitespace "
                                                  "collapsed); first_word: first words equal (cloze answers)")
    limit: int = Field(64, ge=1, description="most rows benchmarked")
    concurrency: list[PositiveInt] = Field(default_factory=lambda: [1, 8], min_length=1,
                                   description="requests in flight, one level (radar system) each")
    max_tokens: int = Field(32, ge=1, description="completion tokens per request")
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="0: greedy")
    hardware: str = Field("cpu", description='"cpu" (measured here at start), "H200", "H100" or "A100"')
    n_devices: int = Field(1, ge=1, description="devices the model runs on (utilisation and cost)")
    usd_per_kwh: float = Field(0.15, gt=0, description="energy price (MoE-CAP's constant)")
    amortisation_years: float = Field(3.0, gt=0, description="capital spread over this many years")
    utilisation: float = Field(1.0, gt=0, le=1, description="fraction of those years spent serving")
    power_w: float | None = Field(None, gt=0, description="override the hardware's power draw (W)")
    capital_usd: float | None = Field(None, gt=0, description="override the hardware's price (USD)")
    api_key_env: str | None = Field(None, description="env var holding the endpoint's bearer token "
                                    "(None: the endpoint Report's api_key_env)")
    timeout_s: float = Field(600.0, gt=0, description="per-request timeout")


# ---- targets ----------------------------------------------------------------------------------------


@dataclass
class CompletionResult:
    """One request as the client saw it; times in seconds from sending it."""

    text: str
    completion_tokens: int
    ttft: float | None  # first streamed token (None: none came)
    e2e: float
    token_times: list[float] = field(default_factory=list)  # arrival of each streamed piece
    prompt_tokens: int | None = None


class BenchmarkTarget(Protocol):
    """What the benchmark needs from a model it talks to."""

    async def complete(self, prompt: str, max_tokens: int, temperature: float) -> CompletionResult: ...

    def steps_since(self, step: int) -> list[dict[str, Any]]:
        """Engine step records (as dicts) numbered above ``step``, oldest first."""
        ...

    def engine_info(self) -> dict[str, Any]:
        """``{"model", "config" (MoEConfig dict), "dtype", "device", "max_batch_size", "max_len"}``."""
        ...

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        """Each prompt's tokens as the target encodes it for a completion."""
        ...

    async def aclose(self) -> None: ...


class InProcessTarget:
    """An ``Engine`` over a Model directory in this process; every step is kept (no history bound)."""

    def __init__(self, model_dir: str | Path, max_batch_size: int = 8, device: str = "cpu", **engine_kwargs: Any):
        from raypress.inference.engine import Engine

        self.model_dir = Path(model_dir)
        self._records: list[Any] = []
        self.engine = Engine.from_pretrained(
            self.model_dir,
            device=device,
            max_batch_size=max_batch_size,
            max_queue=max(64, max_batch_size),
            on_step=self._records.append,
            **engine_kwargs,
        )
        self.engine.start()

    async def complete(self, prompt: str, max_tokens: int, temperature: float) -> CompletionResult:
        from raypress.inference.sampling import SamplingParams

        params = SamplingParams(max_tokens=max_tokens, temperature=temperature)
        start = time.perf_counter()
        parts: list[str] = []
        times: list[float] = []
        usage = None
        async for event in self.engine.generate(prompt, params):
            now = time.perf_counter() - start
            times.extend([now] * len(event.token_ids))
            parts.append(event.text)
            usage = event.usage or usage
        e2e = time.perf_counter() - start
        count = usage.completion_tokens if usage else len(times)
        return CompletionResult("".join(parts), count, times[0] if times else None, e2e, times,
                                usage.prompt_tokens if usage else None)

    def steps_since(self, step: int) -> list[dict[str, Any]]:
        return [asdict(r) for r in list(self._records) if r.step > step]

    def engine_info(self) -> dict[str, Any]:
        engine = self.engine
        weight = next(engine.model.parameters())
        return {"model": self.model_dir.name, "config": engine.model.config.to_dict(),
                "dtype": str(weight.dtype).removeprefix("torch."), "device": str(weight.device),
                "max_batch_size": engine.max_batch_size, "max_len": engine.max_len}

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        return [len(self.engine.encode(prompt)) for prompt in prompts]

    async def aclose(self) -> None:
        self.engine.stop()


class EndpointError(RuntimeError):
    """The server answered a request with an error (status and OpenAI error body in the message)."""


class HttpTarget:
    """A live OpenAI-compatible raypress server (``/v1/completions`` + the ``/raypress/v1`` routes)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout_s: float = 600.0):
        import httpx

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.timeout = httpx.Timeout(timeout_s, connect=min(timeout_s, 30.0))
        self._sync = httpx.Client(base_url=self.base_url, headers=self.headers, timeout=self.timeout)
        self._client: Any = None  # httpx.AsyncClient, made inside the running event loop

    def _async_client(self) -> Any:
        import httpx

        if self._client is None:
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
            self._client = httpx.AsyncClient(base_url=self.base_url, headers=self.headers,
                                             timeout=self.timeout, limits=limits)
        return self._client

    async def complete(self, prompt: str, max_tokens: int, temperature: float) -> CompletionResult:
        body = {"model": self.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": temperature,
                "stream": True, "stream_options": {"include_usage": True}}
        start = time.perf_counter()
        parts: list[str] = []
        times: list[float] = []
        usage: dict[str, Any] | None = None
        async with self._async_client().stream("POST", "/v1/completions", json=body) as response:
            if response.status_code != 200:
                detail = (await response.aread()).decode(errors="replace")[:500]
                raise EndpointError(f"POST /v1/completions: HTTP {response.status_code}: {detail}")
            async for line in response.aiter_lines():
                chunk = _sse_data(line)
                if chunk is None:
                    continue
                if chunk == "[DONE]":
                    break
                if "error" in chunk:
                    raise EndpointError(f"POST /v1/completions: error in stream: {chunk['error']}")
                if chunk.get("choices"):
                    times.append(time.perf_counter() - start)
                    parts.append(chunk["choices"][0].get("text") or "")
                usage = chunk.get("usage") or usage
        e2e = time.perf_counter() - start
        count = int(usage["completion_tokens"]) if usage else len(times)
        prompt_tokens = int(usage["prompt_tokens"]) if usage and "prompt_tokens" in usage else None
        return CompletionResult("".join(parts), count, times[0] if times else None, e2e, times, prompt_tokens)

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One synchronous request to a raypress route; its JSON, or EndpointError with the body."""
        response = self._sync.request(method, path, **kwargs)
        if response.status_code != 200:
            raise EndpointError(f"{method} {path}: HTTP {response.status_code}: {response.text[:500]}")
        return response.json()

    def steps_since(self, step: int) -> list[dict[str, Any]]:
        return list(self._call("GET", "/raypress/v1/steps", params={"after": step})["steps"])

    def engine_info(self) -> dict[str, Any]:
        return dict(self._call("GET", "/raypress/v1/engine"))

    def count_tokens(self, prompts: Sequence[str]) -> list[int]:
        return [int(n) for n in self._call("POST", "/raypress/v1/tokenize", json={"prompts": list(prompts)})["counts"]]

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        self._sync.close()


def _sse_data(line: str) -> dict[str, Any] | str | None:
    """The JSON payload of one ``data: ...`` line, ``"[DONE]"``, or None for anything else."""
    import json

    if not line.startswith("data:"):
        return None
    payload = line[len("data:"):].strip()
    if payload == "[DONE]":
        return payload
    return json.loads(payload) if payload else None


# ---- one level ----------------------------------------------------------------------------------------


class StepCollector:
    """Reads a target's step records from ``mark`` on, counting steps the server's history dropped."""

    def __init__(self, target: BenchmarkTarget, mark: int) -> None:
        self.target = target
        self.last = mark
        self.records: list[dict[str, Any]] = []
        self.missed = 0

    async def poll(self) -> None:
        for record in await asyncio.to_thread(self.target.steps_since, self.last):
            step = int(record["step"])
            if step <= self.last:
                continue
            self.missed += step - self.last - 1
            self.records.append(record)
            self.last = step


@dataclass
class LevelRun:
    """What one concurrency level produced: per-row results (or the error) and the step records."""

    concurrency: int
    results: list[CompletionResult | BaseException]
    wall_seconds: float
    steps: list[dict[str, Any]]
    missed_steps: int


async def run_level(
    target: BenchmarkTarget, prompts: Sequence[str], concurrency: int, max_tokens: int,
    temperature: float, timeout_s: float, mark: int, poll_s: float = POLL_S,
) -> LevelRun:
    """Send every prompt with at most ``concurrency`` in flight; collect the steps after ``mark``."""
    gate = asyncio.Semaphore(concurrency)
    collector = StepCollector(target, mark)

    async def one(prompt: str) -> CompletionResult | BaseException:
        async with gate:
            try:
                return await asyncio.wait_for(target.complete(prompt, max_tokens, temperature), timeout_s)
            except Exception as error:  # one failed request is a result (a miss), not the end of the run
                return error

    async def poll_while_running(done: asyncio.Event) -> None:
        while not done.is_set():
            await asyncio.sleep(poll_s)
            await collector.poll()

    done = asyncio.Event()
    poller = asyncio.create_task(poll_while_running(done))
    start = time.perf_counter()
    try:
        results = list(await asyncio.gather(*(one(p) for p in prompts)))
    finally:
        wall = time.perf_counter() - start
        done.set()
        await poller
    await asyncio.sleep(SETTLE_S)
    await collector.poll()
    return LevelRun(concurrency, results, wall, collector.records, collector.missed)


# ---- the stage ------------------------------------------------------------------------------------


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


def _plain_id(value: Any) -> int | str:
    """A row id the Report's JSON can hold (Ray Data hands numpy scalars back)."""
    value = value.item() if hasattr(value, "item") else value
    return value if isinstance(value, (int, str)) else str(value)


def _config_summary(config: MoEConfig) -> dict[str, Any]:
    p = param_counts(config)
    active = p.layers * (p.dense_per_layer + p.top_k * p.expert) + p.lm_head + p.final_norm
    return {"architecture": config.architecture, "layers": config.num_hidden_layers,
            "hidden_size": config.hidden_size, "experts": config.num_local_experts,
            "top_k": config.num_experts_per_tok, "expert_intermediate_size": config.intermediate_size,
            "shared_expert_intermediate_size": config.shared_expert_intermediate_size,
            "vocab_size": config.vocab_size, "total_params": p.total, "active_params_per_token": active}


def _hardware_block(hw: Hardware, n_devices: int, dtype: str) -> dict[str, Any]:
    return {"name": hw.name, "peak_bandwidth_bytes_per_s": hw.peak_bandwidth, "peak_flops": dict(hw.peak_flops),
            "peak_flops_used": hw.flops(dtype), "dtype": dtype, "power_w": hw.power_w,
            "capital_usd": hw.capital_usd, "measured": hw.measured, "sources": dict(hw.sources),
            "n_devices": n_devices}


def _run_coroutine(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run``, also from a thread that already runs an event loop (then on a fresh thread)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


@register("moe_cap_benchmark")
class MoECapBenchmark(Stage):
    """MoE-CAP benchmark of a served endpoint or a Model: accuracy, TTFT/TPOT/throughput, S-MBU/S-MFU, cost -> Report.

    Input ``data`` (prompt/answer rows) plus exactly one of ``endpoint`` (serve_llm's Report) or
    ``model`` (a Model dir, run in-process).  Writes ``report.json`` and ``cap_radar.png``."""

    Params = CapBenchmarkParams
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
        self.check_inputs(inputs, ctx.node_id)
        rows = inputs["data"].ds.take(self.params.limit)  # type: ignore[union-attr]
        _rows_to_pairs(rows, self.params.prompt_key, self.params.answer_key)  # bad rows fail before a model loads
        return self.benchmark(rows, self.make_target(inputs, ctx.node_id), ctx)

    def benchmark(self, rows: Sequence[dict[str, Any]], target: BenchmarkTarget, ctx: RunContext) -> ReportArtifact:
        """Every level over ``rows`` (the first ``limit``) against ``target``, which is closed at the end;
        writes the Report and the radar."""
        p = self.params
        rows = list(rows)[: p.limit]
        try:
            pairs = _rows_to_pairs(rows, p.prompt_key, p.answer_key)
        except ValueError:
            _run_coroutine(target.aclose())
            raise
        row_ids = [_plain_id(row.get("id", index)) for index, row in enumerate(rows)]
        hardware = get_hardware(p.hardware)  # measured before the engine runs: the CPU is quiet
        if p.power_w is not None or p.capital_usd is not None:
            hardware = with_costs(hardware, p.power_w or hardware.power_w, p.capital_usd or hardware.capital_usd,
                                  f"parameter override (power_w={p.power_w}, capital_usd={p.capital_usd})")
        return _run_coroutine(self._benchmark(pairs, row_ids, target, hardware, ctx))

    async def _benchmark(self, pairs: list[tuple[str, str]], row_ids: list[Any], target: BenchmarkTarget,
                         hardware: Hardware, ctx: RunContext) -> ReportArtifact:
        p = self.params
        try:
            info = await asyncio.to_thread(target.engine_info)
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
            await target.complete(pairs[0][0], min(WARMUP_TOKENS, p.max_tokens), p.temperature)
            await asyncio.sleep(SETTLE_S)
            mark = max((int(s["step"]) for s in await asyncio.to_thread(target.steps_since, -1)), default=-1)
            prompts = [prompt for prompt, _ in pairs]
            levels, runs = [], []
            for concurrency in p.concurrency:
                run = await run_level(target, prompts, concurrency, p.max_tokens, p.temperature, p.timeout_s, mark)
                mark = max([mark] + [int(s["step"]) for s in run.steps])
                level = self._level_metrics(run, pairs, config, dtype, hardware, ctx.node_id)
                levels.append(level)
                runs.append(run)
                ctx.event("cap_level", **_event_fields(level))
        finally:
            await target.aclose()
        return self._report(levels, runs[0], pairs, rows_given, skipped, info, config, dtype, hardware, ctx)

    def _level_metrics(self, run: LevelRun, pairs: list[tuple[str, str]], config: MoEConfig, dtype: str,
                       hardware: Hardware, node_id: str) -> dict[str, Any]:
        p = self.params
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

    def _report(self, levels: list[dict[str, Any]], first: LevelRun, pairs: list[tuple[str, str]], rows_given: int,
                skipped: list[dict[str, Any]], info: dict[str, Any], config: MoEConfig, dtype: str,
                hardware: Hardware, ctx: RunContext) -> ReportArtifact:
        p = self.params
        systems = {lv["system"]: {"accuracy": lv["accuracy"], "throughput": lv["throughput_tokens_per_s"],
                                  "cost": lv["cost_usd_per_mtok"]} for lv in levels}
        radar = cap_radar(ctx.path("reports", ctx.node_id, "cap_radar.png"), systems,
                          title=f"MoE-CAP: {info.get('model')} on {hardware.name}")
        warnings = []
        device = str(info.get("device", ""))
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
            "model": _config_summary(config),
            "hardware": _hardware_block(hardware, p.n_devices, dtype),
            "cost_constants": {"usd_per_kwh": p.usd_per_kwh, "amortisation_years": p.amortisation_years,
                               "utilisation": p.utilisation, "power_w": hardware.power_w,
                               "capital_usd": hardware.capital_usd,
                               "model": "(n_devices x capital / (years x utilisation) + n_devices x power x "
                                        "usd_per_kwh) per generated token; idle power, host, cooling not included"},
            "dataset": {"rows": rows_given, "benchmarked": len(pairs), "skipped": skipped,
                        "prompt_key": p.prompt_key, "answer_key": p.answer_key, "scoring": SCORING[p.match]},
            "sampling": {"max_tokens": p.max_tokens, "temperature": p.temperature},
            "levels": levels,
            "radar": str(radar),
            "samples": samples,
            "warnings": warnings,
        }
        report = ReportArtifact(str(ctx.path("reports", ctx.node_id, "report.json")), metrics)
        report.save()
        return report


def _event_fields(level: dict[str, Any]) -> dict[str, Any]:
    return {"concurrency": level["concurrency"], "accuracy": level["accuracy"], "errors": level["errors"],
            "throughput_tokens_per_s": level["throughput_tokens_per_s"], "ttft_p50_s": level["ttft_s"]["p50"],
            "tpot_p50_s": level["tpot_s"]["p50"], "cost_usd_per_mtok": level["cost_usd_per_mtok"],
            "prefill_s_mbu": level["prefill"]["s_mbu"], "decode_s_mbu": level["decode"]["s_mbu"],
            "decode_s_mfu": level["decode"]["s_mfu"]}
