"""The `moe_cap_benchmark` stage without Ray: input checks, SSE parsing, step bookkeeping, and whole
benchmarks of a tiny random MoE in-process and over HTTP (the OpenAI app under uvicorn).

The strongest check is conservation of tokens per level: every completion token comes from either
a prefill (a request's first token) or a decode pass, so the step records a level reads must hold
exactly one prefilled sequence per request and ``completion_tokens - requests`` decode tokens; a
step leaking in from the warm-up or another level breaks the equality.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from raypress.artifacts import DatasetArtifact, ModelArtifact, ReportArtifact
from raypress.operators.moe.cap.metrics import exact_match, normalise_answer
from raypress.operators.moe.cap.accounting import cost_per_million_tokens
from raypress.operators.base import RunContext
from raypress.operators.moe.cap.http_client import HttpTarget, _sse_data
from raypress.operators.moe.cap.in_process import InProcessTarget
from raypress.operators.moe.cap.levels import StepCollector
from raypress.operators.moe.moe_cap_benchmark import (CapBenchmarkParams, MoECapBenchmark, split_by_context,
                                                    systems_workload)
from moe_fixtures import save_tiny_model_dir  # tests/ is on sys.path (its conftest.py)

pytestmark = pytest.mark.timeout(120)
PROMPTS = ["The quick brown fox", "question: 2 + 2 = answer:", "Mixture-of-experts layers", "Continuous"]
MAX_TOKENS = 6


@pytest.fixture(scope="module", autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_tiny_model_dir(tmp_path_factory.mktemp("model"))


@pytest.fixture(scope="module")
def rows(model_dir: Path) -> list[dict[str, Any]]:
    """Answers: row 0's is the model's own greedy completion (a hit), the others cannot match."""
    from raypress.inference.engine import Engine
    from raypress.inference.sampling import SamplingParams

    engine = Engine.from_pretrained(model_dir)
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0)
    handles = [engine.add_request(p, params) for p in PROMPTS]
    while any(not h.finished for h in handles):
        engine.step()
    predictions = [h.result().text for h in handles]
    answers = [normalise_answer(predictions[0])] + ["\u00a7 never \u00a7"] * (len(PROMPTS) - 1)
    return [{"prompt": p, "answer": a, "greedy": t} for p, a, t in zip(PROMPTS, answers, predictions)]


def _with_unfit_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows plus two the tiny model's 256-token context cannot take: a long prompt (second,
    so the rows after it must keep their answers) and an empty one (last)."""
    long_row = {"id": "long", "prompt": "experts route tokens " * 200, "answer": "x"}
    return [rows[0], long_row, *rows[1:], {"id": "empty", "prompt": "", "answer": "x"}]


def _check_skipped(report: ReportArtifact, given: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    dataset = report.metrics["dataset"]
    assert dataset["rows"] == len(given) and dataset["benchmarked"] == len(given) - 2
    long_row, empty_row = dataset["skipped"]
    assert (long_row["row"], long_row["id"], empty_row["row"], empty_row["id"]) == (1, "long", len(given) - 1, "empty")
    assert long_row["prompt_tokens"] + MAX_TOKENS > 256 and "exceed the context of 256" in long_row["reason"]
    assert empty_row["prompt_tokens"] == 0 and empty_row["reason"] == "the prompt is empty"
    assert any("2 of 6 rows skipped" in w for w in report.metrics["warnings"])
    assert [e["rows"] for e in events if e["event"] == "cap_skipped"] == [2]


def _stage(**params: Any) -> MoECapBenchmark:
    return MoECapBenchmark(CapBenchmarkParams(**{"concurrency": [1, 3], "max_tokens": MAX_TOKENS, **params}))


def _ctx(tmp_path: Path, events: list[dict[str, Any]]) -> RunContext:
    return RunContext(run_dir=str(tmp_path), node_id="cap", emit=events.append)


def _check_report(report: ReportArtifact, rows: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    on_disk = json.loads(Path(report.path).read_text())
    assert on_disk["levels"] == json.loads(json.dumps(report.metrics["levels"]))
    assert Path(report.path) == Path(report.metrics["radar"]).parent / "report.json"
    assert Path(report.metrics["radar"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    expected_correct = sum(exact_match(r["greedy"], r["answer"]) for r in rows)
    assert expected_correct >= 1
    hw = report.metrics["hardware"]
    assert hw["measured"] and hw["dtype"] == "float32" and hw["sources"]["peak_bandwidth"]
    assert [lv["system"] for lv in report.metrics["levels"]] == ["c=1", "c=3"]
    for level in report.metrics["levels"]:
        n = len(rows)
        assert level["requests"] == n and level["errors"] == 0
        assert level["correct"] == expected_correct and level["accuracy"] == pytest.approx(expected_correct / n)
        tokens = level["completion_tokens"]
        assert n <= tokens <= n * MAX_TOKENS
        prefill, decode = level["prefill"], level["decode"]
        assert prefill["passes"] >= 1 and decode["passes"] >= 1 and level["missed_steps"] == 0
        # each prompt prefilled once: in a prefill pass, or packed into a decode forward (fused)
        assert prefill["mean_batch_size"] * prefill["passes"] + prefill["fused_sequences"] == pytest.approx(n)
        assert decode["tokens"] + decode["fused_tokens"] == tokens - n  # the rest came from decode forwards
        assert prefill["tokens"] + prefill["fused_tokens"] == level["prompt_tokens"]
        for phase in (prefill, decode):
            assert phase["s_mbu"] > 0 and phase["s_mfu"] > 0 and phase["s_mbu_median"] > 0
        assert level["throughput_tokens_per_s"] == pytest.approx(tokens / level["wall_seconds"])
        assert level["ttft_s"]["n"] == n and 0 < level["ttft_s"]["p50"] <= level["e2e_s"]["p50"]
        assert level["cost_usd_per_mtok"] == pytest.approx(cost_per_million_tokens(
            level["throughput_tokens_per_s"], SimpleNamespace(capital_usd=hw["capital_usd"], power_w=hw["power_w"]),
        ))
    single, batched = report.metrics["levels"]
    assert batched["decode"]["mean_batch_size"] > single["decode"]["mean_batch_size"] == 1.0
    samples = report.metrics["samples"]
    assert [s["prediction"] for s in samples] == [r["greedy"] for r in rows]
    assert report.metrics["model"]["experts"] == 4 and report.metrics["model"]["total_params"] > 0
    assert [e["concurrency"] for e in events if e["event"] == "cap_level"] == [1, 3]


def test_in_process_benchmark(model_dir: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    events: list[dict[str, Any]] = []
    target = InProcessTarget(model_dir, max_batch_size=3)
    given = _with_unfit_rows(rows)
    report = _stage().benchmark(given, target, _ctx(tmp_path, events))
    assert not target.engine.is_running  # closed at the end
    assert report.metrics["target"]["model"] == model_dir.name
    _check_report(report, rows, events)
    _check_skipped(report, given, events)


def test_http_benchmark_with_bearer_token(
    model_dir: Path, rows: list[dict[str, Any]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_app = pytest.importorskip("raypress.serving.openai_app")
    pytest.importorskip("httpx")
    from raypress.inference.engine import Engine
    from raypress.serving.uvicorn_thread import serve_in_thread

    engine = Engine.from_pretrained(model_dir, max_batch_size=3)
    app = openai_app.create_app(engine, "tiny-moe", api_key="s3cret")
    monkeypatch.setenv("CAP_TEST_KEY", "s3cret")
    events: list[dict[str, Any]] = []
    stage = _stage()
    with serve_in_thread(app) as server:
        endpoint = ReportArtifact("unused.json", {"url": server.url, "model": "tiny-moe", "api_key_env": "CAP_TEST_KEY"})
        target = stage.make_target({"data": DatasetArtifact(None), "endpoint": endpoint}, "cap")
        assert isinstance(target, HttpTarget) and target.headers == {"Authorization": "Bearer s3cret"}
        given = _with_unfit_rows(rows)
        report = stage.benchmark(given, target, _ctx(tmp_path, events))
        without_key = HttpTarget(server.url, "tiny-moe")
        with pytest.raises(Exception, match="401"):
            asyncio.run(without_key.complete("hi", 2, 0.0))
    engine.stop()
    assert report.metrics["target"]["model"] == "tiny-moe"
    _check_report(report, rows, events)
    _check_skipped(report, given, events)  # the server's own count (POST /raypress/v1/tokenize)


def test_input_checks_name_the_node(model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stage = _stage()
    data = DatasetArtifact(None)
    endpoint = ReportArtifact("r.json", {"url": "http://127.0.0.1:1", "model": "m", "api_key_env": None})
    model = ModelArtifact(str(model_dir))
    with pytest.raises(ValueError, match=r"node 'bench'.*neither"):
        stage.check_inputs({"data": data}, "bench")
    with pytest.raises(ValueError, match=r"node 'bench'.*both"):
        stage.check_inputs({"data": data, "endpoint": endpoint, "model": model}, "bench")
    with pytest.raises(ValueError, match=r"node 'bench'.*`data`"):
        stage.check_inputs({"model": model}, "bench")
    assert stage.check_inputs({"data": data, "model": model}, "bench") == "model"
    with pytest.raises(ValueError, match="url"):
        stage.make_target({"data": data, "endpoint": ReportArtifact("r.json", {"model": "m"})}, "bench")
    monkeypatch.delenv("CAP_MISSING_KEY", raising=False)
    with pytest.raises(ValueError, match=r"\$CAP_MISSING_KEY"):
        _stage(api_key_env="CAP_MISSING_KEY").make_target({"data": data, "endpoint": endpoint}, "bench")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA"):
            _stage(hardware="H200").make_target({"data": data, "model": model}, "bench")


def test_params_and_rows() -> None:
    p = CapBenchmarkParams()
    assert (p.limit, p.concurrency, p.max_tokens, p.temperature, p.hardware) == (64, [1, 8], 32, 0.0, "cpu")
    with pytest.raises(ValueError):
        CapBenchmarkParams(concurrency=[0])
    with pytest.raises(ValueError):
        CapBenchmarkParams(concurency=[1])  # extra keys are errors
    with pytest.raises(ValueError, match="answer"):
        _stage().benchmark([{"prompt": "x"}], _ClosedTarget(), RunContext(run_dir="/nonexistent", node_id="n"))


class _ClosedTarget:
    """Only records that the stage closed it."""

    closed = False

    async def aclose(self) -> None:
        type(self).closed = True


def test_bad_rows_close_the_target() -> None:
    with pytest.raises(ValueError, match="no rows"):
        _stage().benchmark([], _ClosedTarget(), RunContext(run_dir="/nonexistent", node_id="n"))
    assert _ClosedTarget.closed


def test_split_by_context() -> None:
    keep, skipped = split_by_context([5, 0, 10, 11], max_tokens=6, max_len=16, row_ids=["a", "b", "c", "d"])
    assert keep == [0, 2]  # 10 + 6 = 16 fits exactly; 11 + 6 does not
    assert [(s["row"], s["id"], s["prompt_tokens"]) for s in skipped] == [(1, "b", 0), (3, "d", 11)]
    assert skipped[1]["reason"] == "11 prompt + 6 completion tokens exceed the context of 16"
    with pytest.raises(ValueError):
        split_by_context([1, 2], 1, 8, ["only one id"])


def test_no_prompt_fits_names_the_node_and_closes_the_target(model_dir: Path, tmp_path: Path) -> None:
    target = InProcessTarget(model_dir, max_batch_size=1)
    rows = [{"prompt": "experts " * 400, "answer": "x"}, {"prompt": "", "answer": "y"}]
    with pytest.raises(ValueError, match=r"node 'cap'.*none of the 2 prompts fits.*exceed the context of 256"):
        _stage().benchmark(rows, target, _ctx(tmp_path, []))
    assert not target.engine.is_running


def test_sse_lines() -> None:
    assert _sse_data('data: {"choices": [{"text": "a"}]}') == {"choices": [{"text": "a"}]}
    assert _sse_data("data: [DONE]") == "[DONE]"
    assert _sse_data("") is None and _sse_data(": keep-alive") is None and _sse_data("event: x") is None


def test_step_collector_counts_steps_the_history_dropped() -> None:
    class Fake:
        def __init__(self) -> None:
            self.records = [{"step": s} for s in (3, 4, 5, 6, 9, 10)]

        def steps_since(self, step: int) -> list[dict[str, Any]]:
            return [r for r in self.records if r["step"] > step]

    collector = StepCollector(Fake(), mark=4)  # type: ignore[arg-type]
    asyncio.run(collector.poll())
    assert [r["step"] for r in collector.records] == [5, 6, 9, 10] and collector.missed == 2
    asyncio.run(collector.poll())  # nothing new: nothing added twice
    assert collector.last == 10 and len(collector.records) == 4


def test_multiple_choice_accuracy_axis(model_dir: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    """choices: 4 scores log-likelihood multiple choice made from the rows' held-out text (README
    paragraphs here), after the levels; the radar's accuracy axis is its acc, the Report says so,
    and the in-process and HTTP targets give the same log-likelihoods."""
    from raypress.operators.moe.cap.choice_scoring import build_questions, pairs_of

    paragraphs = [p for p in (Path(__file__).resolve().parents[2] / "README.md").read_text().split("\n\n")
                  if len(p.split()) >= 40][:12]
    given = [{**rows[i % len(rows)], "id": f"r{i}", "text": text} for i, text in enumerate(paragraphs)]
    events: list[dict[str, Any]] = []
    stage = _stage(choices=4, limit=len(rows), choice_questions=20)  # 12 first windows, 8 second ones
    report = stage.benchmark(given, InProcessTarget(model_dir, max_batch_size=3), _ctx(tmp_path, events))
    choice = report.metrics["accuracy_choice"]
    assert choice["questions"] == 20 and choice["choices"] == 4 and choice["chance"] == 0.25
    assert 0.0 <= choice["acc"] <= 1.0 and choice["acc_interval_95"][0] <= choice["acc"] <= choice["acc_interval_95"][1]
    assert report.metrics["accuracy_axis"] == "accuracy_choice.acc"
    assert [e for e in events if e["event"] == "cap_choice_accuracy"][0]["acc"] == choice["acc"]
    assert report.metrics["levels"][0]["requests"] == len(rows)  # the levels still use `limit` rows

    pairs = pairs_of(build_questions([(r["id"], r["text"]) for r in given])[:3])
    from raypress.inference.engine import Engine
    from raypress.serving import openai_app
    from raypress.serving.uvicorn_thread import serve_in_thread

    local = InProcessTarget(model_dir, max_batch_size=3)
    expected = local.loglikelihoods(pairs)
    asyncio.run(local.aclose())
    engine = Engine.from_pretrained(model_dir, max_batch_size=3)
    try:
        with serve_in_thread(openai_app.create_app(engine, "tiny-moe")) as server:
            target = HttpTarget(server.url, "tiny-moe")
            try:
                served = target.loglikelihoods(pairs)
            except Exception as exc:  # noqa: BLE001 - a server without echo/logprobs says so
                pytest.skip(f"this server cannot score prompts yet: {exc}")
            finally:
                asyncio.run(target.aclose())
    finally:
        engine.stop()
    for (want, want_greedy), (got, got_greedy) in zip(expected, served):
        assert got == pytest.approx(want, abs=1e-3) and got_greedy == want_greedy


def test_questions_take_windows_round_robin_up_to_the_cap(rows: list[dict[str, Any]]) -> None:
    """windows_per_text (default 0: every window) and choice_questions reach the op's questions:
    every text's first window before any text's second, at most choice_questions in all."""
    paragraphs = [p for p in (Path(__file__).resolve().parents[2] / "README.md").read_text().split("\n\n")
                  if len(p.split()) >= 40][:10]
    given = [{**rows[0], "id": f"r{i}", "text": text} for i, text in enumerate(paragraphs)]
    many = _stage(choices=4, choice_questions=25).questions(given, "cap")
    assert len(many) == 25 and [q.id for q in many[:10]] == [f"r{i}" for i in range(10)]
    assert all("@" in q.id for q in many[10:])
    one = _stage(choices=4, choice_questions=25, windows_per_text=1).questions(given, "cap")
    assert [q.id for q in one] == [f"r{i}" for i in range(10)] and one == many[:10]


def test_choices_need_the_text_column(model_dir: Path, rows: list[dict[str, Any]]) -> None:
    with pytest.raises(ValueError, match="node 'cap': choices=4 needs the rows' 'text' column"):
        _stage(choices=4).questions(rows, "cap")
    with pytest.raises(ValueError):
        CapBenchmarkParams(choices=1)


def test_other_systems_on_the_same_checkpoint(model_dir: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    """systems: [kernels_off, hf_generate] run the same prompts at the top concurrency in this process;
    each is priced with the same MoE-CAP accounting (HF's passes from forward hooks: one prefill per
    static batch, max_tokens - 1 decodes after it), has the multiple-choice accuracy of the same
    weights, and the systems radar plots separate measurements."""
    paragraphs = [p for p in (Path(__file__).resolve().parents[2] / "README.md").read_text().split("\n\n")
                  if len(p.split()) >= 40][:8]
    given = [{**rows[i % len(rows)], "id": f"r{i}", "text": text} for i, text in enumerate(paragraphs)]
    events: list[dict[str, Any]] = []
    stage = _stage(choices=4, limit=len(rows), systems=["kernels_off", "hf_generate"])
    report = stage.benchmark(given, InProcessTarget(model_dir, max_batch_size=3), _ctx(tmp_path, events))
    table = report.metrics["systems"]
    assert [r["system"] for r in table] == ["raypress (served, c=3)", "raypress, kernels off", "HF transformers generate"]
    for row in table:
        assert row["concurrency"] == 3 and row["throughput"] > 0 and row["tpot"] > 0 and row["s_mbu"] > 0
    accuracies = {r["accuracy"] for r in table}
    assert max(accuracies) - min(accuracies) <= 1 / 8 + 1e-9  # the same weights (ties may break apart)
    hf = report.metrics["systems_detail"][1]
    batches = -(-len(rows) // 3)
    assert hf["prefill"]["passes"] == batches and hf["decode"]["passes"] == batches * (MAX_TOKENS - 1)
    assert hf["completion_tokens"] == len(rows) * MAX_TOKENS and hf["info"]["class"] == "MixtralForCausalLM"
    assert report.metrics["systems_axes"]["plotted"] == ["accuracy", "throughput", "tpot", "s_mbu"]
    assert Path(report.metrics["systems_radar"]).stat().st_size > 10_000
    assert [e["system"] for e in events if e["event"] == "cap_system"] == ["kernels_off", "hf_generate"]


def test_the_systems_workload_keeps_the_prompts_that_leave_room_and_repeats_them() -> None:
    pairs = [("a", "1"), ("b", "2"), ("c", "3")]
    assert systems_workload(pairs, [10, 30, 20], max_tokens=8, max_len=32, requests=0) == [("a", "1"), ("c", "3")]
    assert systems_workload(pairs, [10, 30, 20], 8, 32, requests=5) == [("a", "1"), ("c", "3")] * 2 + [("a", "1")]
    assert systems_workload(pairs, [10, 30, 20], 8, 32, requests=1) == [("a", "1"), ("c", "3")]  # each once at least
    assert systems_workload(pairs, [30, 30, 30], 8, 32, requests=4) == []


def test_systems_are_compared_on_their_own_workload_with_the_target_measured_again(
        model_dir: Path, rows: list[dict[str, Any]], tmp_path: Path) -> None:
    """systems_max_tokens / systems_requests: the served target runs the systems' workload once more (its
    row in the systems table), and every system decodes the same requests of the same length; the
    levels keep max_tokens."""
    events: list[dict[str, Any]] = []
    stage = _stage(limit=len(rows), systems=["engine"], systems_max_tokens=MAX_TOKENS + 4, systems_requests=9)
    report = stage.benchmark(rows, InProcessTarget(model_dir, max_batch_size=3), _ctx(tmp_path, events))
    m = report.metrics
    assert m["systems_sampling"] == {"max_tokens": MAX_TOKENS + 4, "requests": 9,
                                     "distinct_prompts": min(9, len(rows)), "concurrency": 3}
    assert all(level["completion_tokens"] <= len(rows) * MAX_TOKENS for level in m["levels"])
    served, engine = m["systems_target"], m["systems_detail"][0]
    assert served["requests"] == engine["requests"] == 9 and served["errors"] == engine["errors"] == 0
    assert served["completion_tokens"] == engine["completion_tokens"] > len(rows) * MAX_TOKENS  # greedy: same tokens
    assert [r["system"] for r in m["systems"]] == ["raypress (served, c=3)", "raypress engine in process"]
    assert m["systems"][0]["throughput"] == served["throughput_tokens_per_s"]
    assert served["decode"]["passes"] > 0  # its own steps, not the scoring passes' (none of those decode)
