"""lm-evaluation-harness (``local-completions`` and ``local-chat-completions``) scores a small local
multiple-choice task and a generation task against ``raypress serve`` — the real command line: Ray
Serve's proxy in front of an LLM replica, run as a subprocess joined to the test session's Ray — and
its log-likelihoods, acc, generated texts and exact_match equal the same model scored in this process."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from moe_fixtures import save_tiny_model_dir

lm_eval = pytest.importorskip("lm_eval")
pytest.importorskip("transformers")
pytest.importorskip("datasets")

from raypress.inference.engine import Engine  # noqa: E402
from raypress.operators.moe.cap.choice_scoring import model_loglikelihoods  # noqa: E402
from raypress.serving.uvicorn_thread import free_port  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

READY = re.compile(r"serving llm at (\S+)")  # what `raypress serve` prints once the app answers
START_TIMEOUT_S = 180
STOP_TIMEOUT_S = 60


@dataclass(frozen=True)
class Served:
    url: str  # base URL, as `raypress serve` printed it
    model_dir: Path  # the directory it serves, for the in-process expectations


def _serve_running() -> bool:
    """Whether a Serve controller lives in the session's Ray (Serve is one per cluster)."""
    import ray
    from ray.serve._private.constants import SERVE_CONTROLLER_NAME

    return any(a["name"] == SERVE_CONTROLLER_NAME for a in ray.util.list_named_actors(all_namespaces=True))


def _drain(stream, lines: deque[str], seen: threading.Event) -> None:
    """Keep reading the server's output (a full pipe would stall it); flag its ready line, or its exit."""
    for line in stream:
        lines.append(line)
        if READY.search(line):
            seen.set()
    seen.set()


def _stop(proc: subprocess.Popen) -> int:
    """Ctrl-C, as a user stops it (the CLI then shuts Serve down); killed if it hangs."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


@pytest.fixture(scope="module")
def served(ray_session, tmp_path_factory) -> Iterator[Served]:
    """`raypress serve --model DIR` as a subprocess on the session's Ray, until the module ends."""
    import ray

    # Serve is one per cluster and the CLI shuts it down on exit: never share it with another test
    assert not _serve_running(), "Ray Serve already runs in the test session (a test left it up)"
    model_dir = save_tiny_model_dir(tmp_path_factory.mktemp("lm_eval_model"))
    cmd = [sys.executable, "-m", "raypress.cli", "serve", "--model", str(model_dir), "--port", str(free_port()),
           "--model-name", "tiny", "--max-len", "256", "--max-batch-size", "4",
           "--address", ray.get_runtime_context().gcs_address]
    # a loopback address: `raypress serve` keeps 127.0.0.1 (Ray 2.60 would swap it for the outward IP,
    # where the session's loopback-only Ray does not listen, and hang)
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    lines: deque[str] = deque(maxlen=200)
    seen = threading.Event()
    reader = threading.Thread(target=_drain, args=(proc.stdout, lines, seen), daemon=True)
    reader.start()
    seen.wait(START_TIMEOUT_S)
    url = next((m.group(1) for m in map(READY.search, list(lines)) if m), None)
    try:
        if url is None:
            state = f"exited with {proc.poll()}" if proc.poll() is not None else f"not ready in {START_TIMEOUT_S} s"
            pytest.fail(f"`raypress serve` {state}; its output ends:\n{''.join(list(lines)[-40:])}")
        yield Served(url, model_dir)
    finally:
        code = _stop(proc)
        reader.join(10)
        left = _serve_running()
        if left:  # killed, or stopped before it could shut Serve down: clean up for the next tests
            from ray import serve

            serve.shutdown()
    assert code == 0 and not left, f"`raypress serve` exit {code}, Serve left running: {left}"


DOCS = [
    ("The quick brown fox jumps over the", ["lazy dog", "green sea", "tall tower", "small cup"], 0),
    ("Mixture-of-experts layers route each", ["token to experts", "river to sea", "cat to bed", "day to night"], 0),
    ("Continuous batching admits new requests", ["between decode steps", "into the garden", "after the rain",
                                                  "with green paint"], 0),
    ("question: 2 + 2 = answer:", ["4", "five", "blue", "seven"], 0),
    ("Each expert is a small feed-forward", ["network", "banana", "mountain", "violin"], 0),
    ("The router picks the top two", ["experts", "apples", "rivers", "chairs"], 1),
]


def _task(tmp_path: Path) -> str:
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "tiny_mc.jsonl"
    data.write_text("".join(json.dumps({"context": c, "choices": ch, "label": y}) + "\n" for c, ch, y in DOCS))
    (tmp_path / "tiny_mc.yaml").write_text(f"""task: raypress_tiny_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{label}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
""")
    return "raypress_tiny_mc"


def _gen_task(tmp_path: Path, contexts: list[str], answers: list[str]) -> Path:
    """A local generate_until task (greedy, 8 tokens, stop at a newline, exact match) in tmp_path/tasks."""
    tasks = tmp_path / "tasks"
    tasks.mkdir()
    data = tasks / "gen.jsonl"
    data.write_text("".join(json.dumps({"context": c, "answer": a}) + "\n" for c, a in zip(contexts, answers)))
    (tasks / "gen.yaml").write_text(f"""task: raypress_tiny_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{context}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 8
  do_sample: false
  temperature: 0
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
""")
    return tasks


@pytest.fixture
def offline(monkeypatch) -> None:
    """lm-eval reads the local tasks only, and its OpenAI client wants some key."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    torch.set_num_threads(1)


def test_lm_eval_local_completions_matches_in_process_scoring(served, offline, tmp_path):
    from lm_eval.tasks import TaskManager

    task = _task(tmp_path / "tasks")
    results = lm_eval.simple_evaluate(
        model="local-completions",
        model_args={"base_url": f"{served.url}/v1/completions", "model": "tiny", "tokenizer": str(served.model_dir),
                    "tokenizer_backend": "huggingface", "num_concurrent": 1, "max_retries": 1},
        tasks=[task], task_manager=TaskManager(include_path=str(tmp_path / "tasks")),
        log_samples=True, random_seed=0, numpy_random_seed=0, torch_random_seed=0, fewshot_random_seed=0)
    # the same pairs lm-eval builds: (context, " " + choice), scored by the model in this process
    pairs = [(context, " " + choice) for context, choices, _ in DOCS for choice in choices]
    engine = Engine.from_pretrained(served.model_dir, max_batch_size=4, max_len=256)
    try:
        expected = model_loglikelihoods(engine.model, engine.encode, pairs)
    finally:
        engine.stop()
    samples = sorted(results["samples"][task], key=lambda s: s["doc_id"])
    got = [resp for sample in samples for resp in sample["filtered_resps"]]
    assert len(got) == len(expected) == 24
    for (got_ll, got_greedy), (want_ll, want_greedy) in zip(got, expected):
        assert float(got_ll) == pytest.approx(want_ll, abs=1e-3) and bool(got_greedy) == want_greedy
    picks = [max(range(4), key=lambda k, q=q: expected[4 * q + k][0]) for q in range(len(DOCS))]
    acc = sum(pick == label for pick, (_, _, label) in zip(picks, DOCS)) / len(DOCS)
    assert results["results"][task]["acc,none"] == pytest.approx(acc)


def _greedy_in_process(model_dir: Path, chat: bool) -> list[str]:
    """The engine's greedy completions of DOCS' contexts (8 tokens, stop at a newline: the generation
    task's ``generation_kwargs``) in this process; ``chat``: each context as a user message, templated
    and tokenized by the server's own chat path."""
    from raypress.inference.sampling import SamplingParams
    from raypress.serving.openai_app import OpenAIServer

    engine = Engine.from_pretrained(model_dir, max_batch_size=4, max_len=256)
    try:
        templated = OpenAIServer(engine, "tiny")
        prompts = [templated.chat_ids([{"role": "user", "content": c}]) if chat else engine.encode(c)
                   for c, _, _ in DOCS]
        params = SamplingParams(temperature=0, max_tokens=8, stop=["\n"])
        handles = [engine.add_request(ids, params) for ids in prompts]
        engine.start()
        return [h.result(timeout=60).text for h in handles]
    finally:
        engine.stop()


def test_lm_eval_generation_task_matches_in_process_greedy_text(served, offline, tmp_path):
    """A ``generate_until`` task: lm-eval's generated texts equal the engine's greedy ones, and its
    exact_match counts the docs whose reference is that text (half of them)."""
    from lm_eval.tasks import TaskManager

    contexts = [context for context, _, _ in DOCS]
    greedy_texts = _greedy_in_process(served.model_dir, chat=False)
    assert any(greedy_texts)  # something to compare
    answers = [t if i % 2 == 0 else "\u00a7 never \u00a7" for i, t in enumerate(greedy_texts)]
    tasks = _gen_task(tmp_path, contexts, answers)
    results = lm_eval.simple_evaluate(
        model="local-completions",
        model_args={"base_url": f"{served.url}/v1/completions", "model": "tiny", "tokenizer": str(served.model_dir),
                    "tokenizer_backend": "huggingface", "num_concurrent": 1, "max_retries": 1},
        tasks=["raypress_tiny_gen"], task_manager=TaskManager(include_path=str(tasks)), log_samples=True)
    samples = sorted(results["samples"]["raypress_tiny_gen"], key=lambda s: s["doc_id"])
    assert [s["filtered_resps"][0] for s in samples] == greedy_texts
    assert results["results"]["raypress_tiny_gen"]["exact_match,none"] == pytest.approx(3 / 6)


def test_lm_eval_local_chat_completions_generates_what_the_engine_does(served, offline, tmp_path):
    """lm-eval's ``local-chat-completions`` (the chat endpoint, the model's chat template applied by
    the server) on the same generate_until task: its texts equal the engine's greedy completions of
    the same templated prompts in process, and exact_match follows."""
    from lm_eval.tasks import TaskManager

    contexts = [context for context, _, _ in DOCS]
    greedy_texts = _greedy_in_process(served.model_dir, chat=True)
    assert any(greedy_texts)
    answers = [t if i % 2 == 0 else "\u00a7 never \u00a7" for i, t in enumerate(greedy_texts)]
    tasks = _gen_task(tmp_path, contexts, answers)
    results = lm_eval.simple_evaluate(
        model="local-chat-completions",
        model_args={"base_url": f"{served.url}/v1/chat/completions", "model": "tiny", "num_concurrent": 1,
                    "max_retries": 1},
        tasks=["raypress_tiny_gen"], task_manager=TaskManager(include_path=str(tasks)),
        apply_chat_template=True, log_samples=True)
    samples = sorted(results["samples"]["raypress_tiny_gen"], key=lambda s: s["doc_id"])
    assert [s["filtered_resps"][0] for s in samples] == greedy_texts
    expected = sum(t == a for t, a in zip(greedy_texts, answers)) / len(answers)
    assert results["results"]["raypress_tiny_gen"]["exact_match,none"] == pytest.approx(expected)
