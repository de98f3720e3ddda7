"""`collective_sft` on a plain LM (a `train_moe_lm`-style Model, no recorded task mix): its own
training text as input `corpus` is the original corpus. Fast unit tests (no Ray) of the corpus
sampling and cutting and of the input checks; then, on the shared Ray session, the comcts mode and
its control on the tiny random model in local mode (a few steps each), the output loaded the way
`serve_llm`, `moe_cap_benchmark` (Engine.from_pretrained) and `evaluate_reasoning` load it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("reasoning_gym")

from moe_fixtures import TINY_TEXTS  # noqa: E402  (tests/ is on sys.path: its conftest.py)

from raypress.artifacts import DatasetArtifact, ModelArtifact  # noqa: E402
from raypress.models.bpe_tokenizer import load_tokenizer, train_bpe_tokenizer  # noqa: E402
from raypress.operators.base import RunContext  # noqa: E402
from raypress.operators.reasoning.collective_sft import (  # noqa: E402
    CollectiveSFT, corpus_examples, corpus_windows, cut_pieces, doc_key, sample_batch, sample_documents,
    text_span, window_tokens)
from raypress.operators.reasoning.policies.model_set import policy_dirs  # noqa: E402
from raypress.operators.reasoning.tasks.catalog import get_family, make_tasks  # noqa: E402
from raypress.operators.reasoning.tasks.families.step_text import solution_text  # noqa: E402
from raypress.operators.reasoning.tasks.rows import task_to_row  # noqa: E402
from raypress.training.moe_lm import pack_batch  # noqa: E402

# a small "curated" corpus: short documents, and long ones that must be cut into windows
LONG = [" ".join(f"Paragraph {i} of filing {d}: revenue rose {i + d}% as the company expanded." for i in range(60))
        for d in range(4)]
CORPUS = LONG + [t.strip() for t in TINY_TEXTS[:4]] + [f"Package {i} provides tools for parsing data files." for i in range(24)]


def search_rows(n_tasks: int = 4) -> list[dict]:
    """comcts_search-shaped rows: one correct SFT record per task, one reflective, and a baseline run."""
    family = get_family("chain_arithmetic")
    rows = []
    for task in make_tasks("chain_arithmetic", n_tasks, seed=3):
        steps, final = family.worked_solution(task)
        records = [{"task_id": task.id, "kind": "correct", "messages": [
            {"role": "user", "content": family.prompt(task, [])},
            {"role": "assistant", "content": solution_text(steps, final)}]}]
        rows.append({"run": "comcts-1", "method": "comcts", "sft": json.dumps(records)})
        rows.append({"run": "direct", "method": "direct", "sft": json.dumps(records)})  # not selected
    rows[0]["sft"] = json.dumps(json.loads(rows[0]["sft"]) + [{**json.loads(rows[0]["sft"])[0], "kind": "reflective"}])
    return rows


class FakeDataset:
    """The few Ray Dataset calls the corpus sampling makes, over in-memory batches (no Ray)."""

    def __init__(self, rows: list[dict], batch_rows: int = 7) -> None:
        self.rows, self.batch_rows = rows, batch_rows

    def count(self) -> int:
        return len(self.rows)

    def columns(self) -> list[str]:
        return list(self.rows[0]) if self.rows else []

    def select_columns(self, cols: list[str]) -> "FakeDataset":
        return FakeDataset([{c: r[c] for c in cols} for r in self.rows], self.batch_rows)

    def take_all(self) -> list[dict]:
        return list(self.rows)

    def map_batches(self, fn, batch_format: str, fn_kwargs: dict) -> "FakeDataset":
        out = []
        for start in range(0, len(self.rows), self.batch_rows):
            out.extend(fn(pa.Table.from_pylist(self.rows[start : start + self.batch_rows]), **fn_kwargs).to_pylist())
        return FakeDataset(out, self.batch_rows)


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe_tokenizer(TINY_TEXTS + CORPUS, vocab_size=400)


# ---------------------------------------------------------------------------------------------
# unit (no Ray)


def test_sample_is_seeded_and_independent_of_the_blocks():
    rows = [{"text": t, "id": str(i)} for i, t in enumerate(CORPUS)] + [{"text": "  ", "id": "blank"}, {"text": None, "id": "none"}]
    small = sample_documents(FakeDataset(rows, batch_rows=3), "text", 10, seed=1)
    assert small == sample_documents(FakeDataset(list(reversed(rows)), batch_rows=11), "text", 10, seed=1)
    assert len(small) == 10 and small != sample_documents(FakeDataset(rows), "text", 10, seed=2)
    # the drawn documents are those with the smallest keys (long ones cut to a span of 4 windows of
    # CONTEXT tokens' worth of characters); blank ones are never drawn
    by_key = sorted(CORPUS, key=lambda t: doc_key(t, 1))[:10]
    assert small == [text_span(t, doc_key(t, 1), 4 * 256 * 4) for t in by_key]
    everything = sample_documents(FakeDataset(rows), "text", 1000, seed=1)
    assert sorted(everything) == sorted(CORPUS)  # fewer documents than asked: all of them, blank ones left out


def test_long_documents_travel_as_a_bounded_span():
    text = "word " * 10_000
    span = text_span(text, key=123_457, span=1000)
    assert len(span) <= 1000 and span.startswith("word")  # starts after a space, not mid-word
    assert text_span("short", key=5, span=1000) == "short"
    table = sample_batch(pa.table({"text": [text, "", "short"]}), "text", seed=0, cutoff=2**64, span=1000)
    assert table.column("text").to_pylist()[1] == "short" and len(table.column("text").to_pylist()[0]) <= 1000
    assert sample_batch(pa.table({"text": [text]}), "text", seed=0, cutoff=0, span=1000).num_rows == 0


def test_cut_pieces_at_token_boundaries(tokenizer):
    doc = LONG[0]
    starts = [s for s, _ in tokenizer.tokenizer.encode(doc, add_special_tokens=False).offsets]
    pieces = cut_pieces(doc, starts, 32)
    assert len(pieces) >= 10
    assert all(len(tokenizer.encode(p)) <= 32 + 2 for p in pieces)  # cut where the document's tokens end
    assert all(len(tokenizer.encode(p)) >= 16 for p in pieces)  # a last piece under half a window is dropped
    assert doc.startswith("".join(pieces))  # in order, nothing skipped but the dropped tail
    assert cut_pieces("a short one", [0, 1, 2], 32) == ["a short one"]  # a short document is one piece
    assert cut_pieces("   ", [0, 1, 2], 32) == []


def test_windows_one_per_document_first_then_more(tokenizer):
    docs = LONG[:2] + ["tiny doc one", "tiny doc two"]
    first = corpus_windows(docs, tokenizer, 24, 4, seed=0)
    assert first == corpus_windows(docs, tokenizer, 24, 4, seed=0)  # deterministic
    assert first[2:] == ["tiny doc one", "tiny doc two"] and first[0] in LONG[0] and first[1] in LONG[1]
    more = corpus_windows(docs, tokenizer, 24, 30, seed=0)
    assert len(more) == 30 and more[:4] == first and len(set(more)) == 30  # long documents give more windows
    assert len(corpus_windows(docs, tokenizer, 24, 10_000, seed=0)) < 10_000  # runs out: the caller says so
    assert corpus_windows(docs, tokenizer, 24, 4, seed=1) != first


def test_window_length_matches_a_search_record(tokenizer):
    records = [("What is 2 + 3?\nSolution:\n", "2 + 3 = 5\nAnswer: 5")] * 3
    mean = len(tokenizer.encode(records[0][0])) + len(tokenizer.encode(records[0][1]))
    assert window_tokens(records, tokenizer, 256) == mean
    assert window_tokens([("x" * 4000, "y")], tokenizer, 256) == 255  # fits the block, EOS included
    assert window_tokens([("", "a")], tokenizer, 256) == 16  # never cut to a few tokens


def test_plain_text_examples_train_every_token(tiny_model_dir):
    """The corpus examples have an empty prompt: the trainer masks nothing (a pre-training loss)."""
    tokenizer = load_tokenizer(tiny_model_dir)
    examples, size = corpus_examples(LONG, str(tiny_model_dir), [("Q: 1 + 1?\nSolution:\n", "Answer: 2")], 6, seed=0)
    assert len(examples) == 6 and all(prompt == "" for prompt, _ in examples) and 16 <= size <= 255
    table = pa.table({"prompt": [q for q, _ in examples], "text": [t for _, t in examples]})
    packed = pack_batch(table, tokenizer, "text", 16, prompt_key="prompt")
    assert (packed["labels"] == packed["input_ids"]).all()


def _stage(**params) -> CollectiveSFT:
    return CollectiveSFT(CollectiveSFT.Params(**{"runs": ["comcts-1"], "num_workers": 0, **params}))


def test_a_plain_lm_without_corpus_fails_clearly(tiny_model_dir, tmp_path):
    inputs = {"data": DatasetArtifact(FakeDataset(search_rows())), "model": ModelArtifact.load(str(tiny_model_dir))}
    ctx = RunContext(run_dir=str(tmp_path), node_id="sft_plain")
    for mode in ("comcts", "control"):
        with pytest.raises(ValueError, match=r"node 'sft_plain'.*no recorded training mix.*input `corpus`"):
            _stage(mode=mode).run(inputs, ctx)
    few = FakeDataset([{"text": "Only a couple of short documents."}, {"text": "And this one."}])
    with pytest.raises(ValueError, match=r"node 'sft_plain': input `corpus` is too small: 10 original examples "
                                         r"needed .* 2 windows"):
        _stage().run({**inputs, "corpus": DatasetArtifact(few)}, ctx)
    with pytest.raises(ValueError, match="no column 'body'"):
        _stage(corpus_text_key="body").run({**inputs, "corpus": DatasetArtifact(few)}, ctx)
    assert not (tmp_path / "models").exists()  # nothing trained


# ---------------------------------------------------------------------------------------------
# integration: the shared Ray session, local-mode training


@pytest.fixture(scope="module")
def fine_tuned(ray_session, tiny_model_dir, tmp_path_factory):
    """comcts mode and its control on the tiny model (a plain Model), 3 steps each, local mode."""
    import ray

    run_dir = tmp_path_factory.mktemp("run")
    base = ModelArtifact.load(str(tiny_model_dir))
    data = DatasetArtifact(ray.data.from_items(search_rows()))
    corpus = DatasetArtifact(ray.data.from_items([{"body": t} for t in CORPUS], override_num_blocks=3))
    out = {}
    for mode in ("comcts", "control"):
        events: list[dict] = []
        stage = _stage(mode=mode, corpus_text_key="body", max_steps=3, batch_size=2, lr=1e-3, seed=4)
        model = stage.run({"data": data, "model": base, "corpus": corpus},
                          RunContext(run_dir=str(run_dir), node_id=f"sft_{mode}", emit=events.append))
        out[mode] = (model, events)
    return base, out


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_both_modes_train_the_same_steps_on_as_many_examples(fine_tuned):
    _, out = fine_tuned
    corpus_events = {mode: next(e for e in events if e["event"] == "sft_corpus") for mode, (_, events) in out.items()}
    comcts, control = corpus_events["comcts"], corpus_events["control"]
    assert comcts["examples"] == control["examples"] == 10  # 5 records (4 correct, 1 reflective) + 5 originals
    assert comcts["search_examples"] == 5 and comcts["original_examples"] == 5
    assert control["search_examples"] == 0 and control["original_examples"] == 10
    assert comcts["reflective"] == 1 and comcts["original_source"] == control["original_source"] == "corpus"
    assert comcts["window_tokens"] == control["window_tokens"] >= 16
    trainings = {mode: model.config["training"] for mode, (model, _) in out.items()}
    for key in ("steps", "batch_size", "lr", "seed", "num_workers"):
        assert trainings["comcts"][key] == trainings["control"][key], key
    assert trainings["comcts"]["steps"] == 3
    assert {mode: model.config["sft"]["mode"] for mode, (model, _) in out.items()} == {"comcts": "comcts",
                                                                                       "control": "control"}


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_the_output_is_a_model_every_consumer_loads(fine_tuned, tmp_path):
    from raypress.inference.engine import Engine
    from raypress.operators.moe.cap.in_process import InProcessTarget
    from raypress.operators.reasoning.evaluate_reasoning import EvaluateReasoning
    from raypress.serving.llm_deployment import LLMAppArgs

    import ray

    base, out = fine_tuned
    model, _ = out["comcts"]
    name = next(iter(policy_dirs(base)))
    # a Model dir, not a policy-set manifest: one policy, named as before the fine-tuning
    assert policy_dirs(model) == {name: model.path}
    assert model.path.endswith(f"models/sft_comcts/{name}")
    saved = ModelArtifact.load(model.path).config
    assert saved["kind"] == "moe_lm" and saved["sft"]["steps"] == {name: 3}
    assert saved["sft"]["base_model"] == base.path and saved["sft"]["records"] == {"correct": 4, "reflective": 1}
    assert LLMAppArgs(model=model.path).model == str(Path(model.path).resolve())  # serve_llm: config.json is there
    engine = Engine.from_pretrained(model.path, max_batch_size=2, max_len=64)  # what serve_llm's replica loads
    assert engine.model.config.vocab_size == base.config["model"]["vocab_size"]
    target = InProcessTarget(model.path, max_batch_size=2)  # moe_cap_benchmark's `model` input
    try:
        done = asyncio.run(target.complete("2 + 3 =", 3, 0.0))
        assert done.e2e > 0 and done.completion_tokens <= 3
    finally:
        target.engine.stop()
    tasks = ray.data.from_items([task_to_row(t) for t in make_tasks("chain_arithmetic", 2, seed=9)])
    report = EvaluateReasoning(EvaluateReasoning.Params(max_tokens=4, bootstrap=100, actor_cpus=0.25)).run(
        {"data": DatasetArtifact(tasks), "model": model}, RunContext(run_dir=str(tmp_path), node_id="eval_after"))
    assert list(report.metrics["policies"]) == [name] and report.metrics["policies"][name]["questions"] == 2
    assert report.metrics["sft"]["mode"] == "comcts" and report.metrics["sft"]["steps"] == {name: 3}
