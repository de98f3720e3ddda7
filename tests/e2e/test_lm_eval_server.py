"""lm-evaluation-harness's ``local-completions`` model scores a small local multiple-choice task
against the OpenAI server (in process, uvicorn on a thread), and its log-likelihoods and acc equal
scoring the same (context, choice) pairs with the model in this process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from moe_fixtures import save_tiny_model_dir

lm_eval = pytest.importorskip("lm_eval")
pytest.importorskip("transformers")
pytest.importorskip("datasets")
pytest.importorskip("uvicorn")

from raypress.inference.engine import Engine  # noqa: E402
from raypress.operators.moe.cap.choice_scoring import model_loglikelihoods  # noqa: E402
from raypress.serving.openai_app import create_app  # noqa: E402
from raypress.serving.uvicorn_thread import serve_in_thread  # noqa: E402

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

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


def test_lm_eval_local_completions_matches_in_process_scoring(tmp_path, monkeypatch):
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    torch.set_num_threads(1)
    model_dir = save_tiny_model_dir(tmp_path / "model")
    task = _task(tmp_path / "tasks")
    engine = Engine.from_pretrained(model_dir, max_batch_size=4, max_len=256)
    try:
        with serve_in_thread(create_app(engine, "tiny")) as srv:
            results = lm_eval.simple_evaluate(
                model="local-completions",
                model_args={"base_url": f"{srv.url}/v1/completions", "model": "tiny", "tokenizer": str(model_dir),
                            "tokenizer_backend": "huggingface", "num_concurrent": 1, "max_retries": 1},
                tasks=[task], task_manager=TaskManager(include_path=str(tmp_path / "tasks")),
                log_samples=True, random_seed=0, numpy_random_seed=0, torch_random_seed=0, fewshot_random_seed=0)
        # the same pairs lm-eval builds: (context, " " + choice), scored by the model in this process
        pairs = [(context, " " + choice) for context, choices, _ in DOCS for choice in choices]
        expected = model_loglikelihoods(engine.model, engine.encode, pairs)
    finally:
        engine.stop()
    samples = sorted(results["samples"][task], key=lambda s: s["doc_id"])
    served = [resp for sample in samples for resp in sample["filtered_resps"]]
    assert len(served) == len(expected) == 24
    for (got_ll, got_greedy), (want_ll, want_greedy) in zip(served, expected):
        assert float(got_ll) == pytest.approx(want_ll, abs=1e-3) and bool(got_greedy) == want_greedy
    picks = [max(range(4), key=lambda k, q=q: expected[4 * q + k][0]) for q in range(len(DOCS))]
    acc = sum(pick == label for pick, (_, _, label) in zip(picks, DOCS)) / len(DOCS)
    assert results["results"][task]["acc,none"] == pytest.approx(acc)


def test_lm_eval_generation_task_matches_in_process_greedy_text(tmp_path, monkeypatch):
    """A ``generate_until`` task: lm-eval's generated texts equal the engine's greedy ones, and its
    exact_match counts the docs whose reference is that text (half of them)."""
    from lm_eval.tasks import TaskManager

    from raypress.inference.sampling import SamplingParams

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    torch.set_num_threads(1)
    model_dir = save_tiny_model_dir(tmp_path / "model")
    engine = Engine.from_pretrained(model_dir, max_batch_size=4, max_len=256)
    contexts = [context for context, _, _ in DOCS]
    params = SamplingParams(temperature=0, max_tokens=8, stop=["\n"])
    greedy = [engine.add_request(engine.encode(c), params) for c in contexts]
    engine.start()
    greedy_texts = [h.result(timeout=60).text for h in greedy]
    assert any(greedy_texts)  # something to compare
    answers = [t if i % 2 == 0 else "\u00a7 never \u00a7" for i, t in enumerate(greedy_texts)]
    tasks = _gen_task(tmp_path, contexts, answers)
    try:
        with serve_in_thread(create_app(engine, "tiny")) as srv:
            results = lm_eval.simple_evaluate(
                model="local-completions",
                model_args={"base_url": f"{srv.url}/v1/completions", "model": "tiny", "tokenizer": str(model_dir),
                            "tokenizer_backend": "huggingface", "num_concurrent": 1, "max_retries": 1},
                tasks=["raypress_tiny_gen"], task_manager=TaskManager(include_path=str(tasks)), log_samples=True)
    finally:
        engine.stop()
    samples = sorted(results["samples"]["raypress_tiny_gen"], key=lambda s: s["doc_id"])
    assert [s["filtered_resps"][0] for s in samples] == greedy_texts
    assert results["results"]["raypress_tiny_gen"]["exact_match,none"] == pytest.approx(3 / 6)


def test_lm_eval_local_chat_completions_generates_what_the_engine_does(tmp_path, monkeypatch):
    """lm-eval's ``local-chat-completions`` (the chat endpoint, the model's chat template applied by
    the server) on the same generate_until task: its texts equal the engine's greedy completions of
    the same templated prompts in process, and exact_match follows."""
    from raypress.inference.sampling import SamplingParams
    from raypress.serving.openai_app import OpenAIServer
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    torch.set_num_threads(1)
    model_dir = save_tiny_model_dir(tmp_path / "model")
    engine = Engine.from_pretrained(model_dir, max_batch_size=4, max_len=256)
    contexts = [context for context, _, _ in DOCS]
    templated = OpenAIServer(engine, "tiny")  # the server's own chat path: template + tokenizer
    params = SamplingParams(temperature=0, max_tokens=8, stop=["\n"])
    handles = [engine.add_request(templated.chat_ids([{"role": "user", "content": c}]), params) for c in contexts]
    engine.start()
    greedy_texts = [h.result(timeout=60).text for h in handles]
    assert any(greedy_texts)
    answers = [t if i % 2 == 0 else "\u00a7 never \u00a7" for i, t in enumerate(greedy_texts)]
    tasks = _gen_task(tmp_path, contexts, answers)
    try:
        with serve_in_thread(create_app(engine, "tiny")) as srv:
            results = lm_eval.simple_evaluate(
                model="local-chat-completions",
                model_args={"base_url": f"{srv.url}/v1/chat/completions", "model": "tiny", "num_concurrent": 1,
                            "max_retries": 1},
                tasks=["raypress_tiny_gen"], task_manager=TaskManager(include_path=str(tasks)),
                apply_chat_template=True, log_samples=True)
    finally:
        engine.stop()
    samples = sorted(results["samples"]["raypress_tiny_gen"], key=lambda s: s["doc_id"])
    assert [s["filtered_resps"][0] for s in samples] == greedy_texts
    expected = sum(t == a for t, a in zip(greedy_texts, answers)) / len(answers)
    assert results["results"]["raypress_tiny_gen"]["exact_match,none"] == pytest.approx(expected)
