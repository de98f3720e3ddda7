"""Data-Juicer's LLM ops in a pipeline, against a real raypress server of a small trained model and a
second, flaky server in front of it.

One run of one DAG: GIMP help rows (real text) -> ``calibrate_qa_mapper`` asking the model that a
``serve_llm`` node of the same DAG serves (the node's ``endpoint`` input) -> ``pair_preference_mapper``
asking through ``tests/llm_test_server.py``, a separate process that answers 429, 500, 429 to the
first requests and forwards the rest to that server.  The model (``llm_fixtures``) was trained for
seconds to answer each prompt the ops send: in Data-Juicer's format for most rows, not for three.

What must hold: the ledger adds up; the three rows whose answers do not parse are quarantined with
the raw answer in their record; the tokens counted are those the server reported; the scheduled
failures are retried (and counted) and their rows succeed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from llm_fixtures import gimp_rows, train_chat_model

httpx = pytest.importorskip("httpx")
pytest.importorskip("uvicorn")
pytest.importorskip("tokenizers")

from raypress.dag.runner import run_pipeline  # noqa: E402
from raypress.serving.uvicorn_thread import free_port  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]  # Serve starts in ~20 s, far more on a loaded box

BAD = {2, 5, 8}  # rows whose calibration the model answers without Data-Juicer's sections
TRY_NUM = 2
SCHEDULE = ["429", "500", "429"]
SAMPLING = {"temperature": 0, "max_tokens": 64}
REFUSAL = "Sorry, I cannot calibrate this pair."
FLAKY_SERVER = Path(__file__).resolve().parents[1] / "llm_test_server.py"


def calibrated(row: dict) -> tuple[str, str]:
    return (f"What does the GIMP help page {row['title']} explain?", f"The page {row['title']} explains it in detail.")


def calibration_answer(row: dict) -> str:
    question, answer = calibrated(row)
    return f"【问题】\n{question}\n【回答】\n{answer}"


def preference_answer(row: dict) -> tuple[str, str]:
    return f"The page {row['title']} explains nothing.", "It contradicts the reference."


@dataclass
class Trained:
    rows: list[dict]
    model_dir: Path
    calibration_prompts: list[list[dict]]  # the messages calibrate_qa_mapper sends, per row


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Trained:
    import torch

    from raypress.operators.llm.calibrate_qa_mapper import CalibrateQAMapper, CalibrateQAParams
    from raypress.operators.llm.pair_preference_mapper import PairPreferenceMapper, PairPreferenceParams

    rows = gimp_rows(10, chars=100)  # short prompts: trains in ~30 steps
    somewhere = {"base_url": "http://127.0.0.1:9/v1"}  # the ops only build prompts here
    calibrate = CalibrateQAMapper(CalibrateQAParams(model_params=somewhere))
    prefer = PairPreferenceMapper(PairPreferenceParams(model_params=somewhere))
    examples, prompts = [], []
    for i, row in enumerate(rows):
        prompts.append(calibrate.build_messages(row))
        examples.append((prompts[-1], REFUSAL if i in BAD else calibration_answer(row)))
        if i not in BAD:
            question, answer = calibrated(row)
            rejected, reason = preference_answer(row)
            examples.append((prefer.build_messages({**row, "query": question, "response": answer}),
                             f"【回答】\n{rejected}\n【原因】\n{reason}"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # two shared cores: one thread trains ~10x faster than two here
    try:
        model_dir = train_chat_model(tmp_path_factory.mktemp("llm_ops_model"), examples)
    finally:
        torch.set_num_threads(threads)
    return Trained(rows, model_dir, prompts)


@dataclass
class Run:
    ledger: dict
    run_dir: Path
    flaky_stats: dict
    endpoint: dict  # the serve_llm node's Report


def _start_flaky(port: int, upstream: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, str(FLAKY_SERVER), "--port", str(port), "--upstream", upstream,
                             "--schedule", ",".join(SCHEDULE)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"the flaky server exited: {proc.stderr.read().decode()[-2000:]}")
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the flaky server did not start in 30 s")


PIPELINE = """\
name: llm-api-ops
settings: {{seed: 0, max_error_ratio: 0.5}}
nodes:
  - id: rows
    op: read_jsonl
    with: {{paths: ["{rows}"]}}
  - id: model
    op: read_model
    with: {{path: "{model}"}}
  - id: endpoint
    op: serve_llm
    input: {{model: model}}
    with: {{port: {serve_port}, model_name: tiny-chat, max_batch_size: 8, keep_serving: true}}
  - id: calibrated
    op: calibrate_qa_mapper
    input: {{data: rows, endpoint: endpoint}}
    with: {{try_num: {try_num}, concurrency: 4, sampling_params: {sampling}}}
  - id: preference
    op: pair_preference_mapper
    input: calibrated
    with: {{api_model: tiny-chat, model_params: {{base_url: "{flaky}", max_retries: 5}}, try_num: {try_num},
            concurrency: 4, sampling_params: {sampling}}}
  - id: out
    op: write_jsonl
    input: preference
    with: {{path: "{{run_dir}}/out.jsonl"}}
"""


@pytest.fixture(scope="module")
def run(ray_session, trained, tmp_path_factory):
    from ray import serve

    work = tmp_path_factory.mktemp("llm_ops_run")
    rows_file = work / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(r) + "\n" for r in trained.rows))
    serve_port, flaky_port = free_port(), free_port()
    flaky = _start_flaky(flaky_port, f"http://127.0.0.1:{serve_port}/v1")
    try:
        pipeline = work / "llm_ops.yaml"
        pipeline.write_text(PIPELINE.format(rows=rows_file, model=trained.model_dir, serve_port=serve_port,
                                            flaky=f"http://127.0.0.1:{flaky_port}/v1", try_num=TRY_NUM,
                                            sampling=json.dumps(SAMPLING)))
        ledger = run_pipeline(str(pipeline), run_dir=str(work / "run"))
        stats = httpx.get(f"http://127.0.0.1:{flaky_port}/stats").json()
        endpoint = json.loads(Path(ledger["nodes"]["endpoint"]["artifact"]).read_text())
        yield Run(ledger, work / "run", stats, endpoint)
    finally:
        flaky.terminate()
        flaky.wait(10)
        serve.shutdown()  # keep_serving left the app up for the usage check


def test_ledger_adds_up_and_unparseable_answers_are_quarantined_raw(run, trained):
    assert run.ledger["adds_up"], run.ledger["problems"]
    nodes = run.ledger["nodes"]
    assert (nodes["calibrated"]["rows_in"], nodes["calibrated"]["rows_out"], nodes["calibrated"]["quarantined"]) \
        == (10, 7, 3)
    assert (nodes["preference"]["rows_in"], nodes["preference"]["rows_out"], nodes["preference"]["quarantined"]) \
        == (7, 7, 0)
    quarantined = pq.read_table(run.run_dir / "quarantine" / "calibrated").to_pylist()
    assert sorted(r["id"] for r in quarantined) == sorted(trained.rows[i]["id"] for i in BAD)
    for record in quarantined:
        assert record["_rp_reason"] == "UnparseableResponse"
        assert f"last raw response: {REFUSAL!r}" in record["_rp_detail"]
        assert f"after {TRY_NUM} request(s)" in record["_rp_detail"]
        assert record["query"] == next(r for r in trained.rows if r["id"] == record["id"])["query"]  # row as it came
    out = {r["id"]: r for r in map(json.loads, (run.run_dir / "out.jsonl").read_text().splitlines())}
    assert len(out) == 7
    for i, row in enumerate(trained.rows):
        if i in BAD:
            continue
        assert (out[row["id"]]["query"], out[row["id"]]["response"]) == calibrated(row)  # parsed, stripped
        assert (out[row["id"]]["rejected_response"], out[row["id"]]["reason"]) == preference_answer(row)


def test_usage_counted_as_the_server_reported_it(run, trained):
    counts = run.ledger["nodes"]["calibrated"]["counts"]
    tries = [TRY_NUM if i in BAD else 1 for i in range(len(trained.rows))]
    prompt_tokens = completion_tokens = 0
    with httpx.Client(base_url=run.endpoint["base_url"], timeout=60) as client:
        for messages, n in zip(trained.calibration_prompts, tries):  # the same requests again (greedy)
            usage = client.post("/chat/completions", json={"model": "tiny-chat", "messages": messages,
                                                            **SAMPLING}).json()["usage"]
            prompt_tokens += n * usage["prompt_tokens"]
            completion_tokens += n * usage["completion_tokens"]
    assert prompt_tokens > 0 and completion_tokens > 0
    assert counts == {"requests": sum(tries), "retries": 0, "request_errors": 0, "parse_failures": TRY_NUM * len(BAD),
                      "prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}


def test_scheduled_429_and_500_are_retried_counted_and_the_rows_succeed(run):
    counts = run.ledger["nodes"]["preference"]["counts"]
    stats = run.flaky_stats
    assert stats["errors"] == {"429": 2, "500": 1} and stats["forwarded"] == 7
    assert counts == {"requests": 7 + len(SCHEDULE), "retries": len(SCHEDULE), "request_errors": len(SCHEDULE),
                      "parse_failures": 0, "prompt_tokens": stats["prompt_tokens"],
                      "completion_tokens": stats["completion_tokens"]}
    assert stats["prompt_tokens"] > 0 and not run.ledger.get("warnings")
