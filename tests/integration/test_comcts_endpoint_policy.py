"""A model served in the run (the ``serve_llm`` stage on real Ray Serve, with a bearer key) as a
policy and as a judge of ``comcts_search``, beside a local policy from a policy-set Model, and every
model call counted on both sides: what the search sent per policy (the ledger's ``counts``) equals
what the server finished (its Prometheus ``/metrics``).

The model is a tiny MoE whose weights are set by hand, not trained: every layer adds nothing, so
the next token depends on the last one only, and the embedding/LM-head pair spells one fixed reply
after a newline, ``x<CR>answer: 7`` then EOS (greedy or sampled alike). That reply is one step and
an answer, so candidates reach the judges and a model judge really is called (a random model
never writes an ``Answer:`` line, and its candidates are never judged); the judge's own reply
reads as no verdict (score 0), which costs a call like any other."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("reasoning_gym")
httpx = pytest.importorskip("httpx")

from raypress.artifacts import DatasetArtifact, ModelArtifact, ReportArtifact  # noqa: E402
from raypress.operators.base import RunContext  # noqa: E402
from raypress.operators.reasoning.comcts_search import ComctsSearch, SearchStageParams  # noqa: E402
from raypress.operators.reasoning.policies.model_set import KIND  # noqa: E402
from raypress.operators.reasoning.tasks.catalog import make_tasks  # noqa: E402
from raypress.operators.reasoning.tasks.rows import tasks_table  # noqa: E402

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]
KEY_ENV = "RAYPRESS_TEST_SEARCH_ENDPOINT_KEY"
REPLY = "x\ranswer: 7"  # one step ("x"; \r breaks a line too), then the answer
RUNS = [
    {"name": "served-direct", "method": "direct", "policies": ["served"]},
    {"name": "served-judges", "method": "comcts", "policies": ["local", "served"], "judges": ["policy:served"]},
    {"name": "collective", "method": "best_of_n", "policies": ["local", "served"]},
]


def save_scripted_model(path: Path, reply: str = REPLY) -> Path:
    """A tiny Model directory (as ``train_moe_lm`` writes one) that answers any prompt ending in a
    newline with ``reply`` (one byte token per character, all distinct), then EOS."""
    import torch

    from moe_fixtures import TINY_TEXTS, tiny_config
    from raypress.models.bpe_tokenizer import train_bpe_tokenizer
    from raypress.models.moe import MoEForCausalLM
    from raypress.models.moe_checkpoint import save_moe

    tokenizer = train_bpe_tokenizer(TINY_TEXTS, vocab_size=320)
    config = tiny_config(tokenizer.vocab_size, tokenizer.eos_token_id, tie_word_embeddings=False)
    model = MoEForCausalLM(config).eval()
    chain = [tokenizer.encode(c, add_special_tokens=False) for c in "\n" + reply]
    assert all(len(ids) == 1 for ids in chain) and len({ids[0] for ids in chain}) == len(chain)
    ids = [t[0] for t in chain] + [tokenizer.eos_token_id]
    with torch.no_grad():
        for name, param in model.named_parameters():
            if not name.endswith("norm.weight"):
                param.zero_()  # attention and experts add nothing: the hidden state is the token's embedding
        for k, token in enumerate(ids[:-1]):  # direction k+1: "after this token comes the next one"
            model.embed_tokens.weight[token, k + 1] = 1.0
            model.lm_head.weight[ids[k + 1], k + 1] = 100.0
        others = torch.ones(config.vocab_size, dtype=torch.bool)
        others[ids[:-1]] = False
        model.embed_tokens.weight[others, 0] = 1.0  # any other token: EOS
        model.lm_head.weight[tokenizer.eos_token_id, 0] = 100.0
    save_moe(model, path)
    tokenizer.save(path)
    ModelArtifact(str(path), config={"kind": "moe_lm", "architecture": config.architecture,
                                     "model": config.to_dict()}).save_manifest()
    return path


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return save_scripted_model(tmp_path_factory.mktemp("scripted"))


@pytest.fixture(scope="module")
def served(ray_session, model_dir, tmp_path_factory):
    """The serve_llm stage's Report (node ``served``: the model it serves is named after the node)."""
    from ray import serve

    from raypress.serving.serve_llm import ServeLLM, ServeLLMParams
    from raypress.serving.uvicorn_thread import free_port

    os.environ[KEY_ENV] = "search-endpoint-secret"
    ctx = RunContext(run_dir=str(tmp_path_factory.mktemp("serve_run")), node_id="served")
    stage = ServeLLM(ServeLLMParams(port=free_port(), api_key_env=KEY_ENV, max_batch_size=16, max_queue=256,
                                    num_cpus=0.5))
    report = stage.run({"model": ModelArtifact(str(model_dir))}, ctx)
    yield report
    for cleanup in reversed(ctx.cleanups):
        cleanup()
    serve.shutdown()


def policy_set(path: Path, model_dir: Path) -> ModelArtifact:
    """A Model like ``train_policies`` writes, holding one policy ``local``."""
    artifact = ModelArtifact(str(path), config={"kind": KIND, "order": ["local"],
                                                "policies": {"local": {"path": str(model_dir)}}})
    artifact.save_manifest()
    return artifact


def test_a_served_model_is_a_policy_and_a_judge_and_every_call_is_counted_on_both_sides(served, model_dir, tmp_path):
    import pyarrow.parquet as pq
    import ray.data

    tasks = make_tasks("chain_arithmetic", 3, seed=5) + make_tasks("simple_equations", 2, seed=5)
    data = DatasetArtifact(ray.data.from_arrow(tasks_table(tasks)), rows=len(tasks))
    inputs = {"data": data, "policies": policy_set(tmp_path / "policies", model_dir), "endpoints": [served]}
    stage = ComctsSearch(SearchStageParams(runs=RUNS, search={"budget": 8, "max_tokens": 16, "temperature": 0.8},
                                           concurrency=8, actor_cpus=0.25, max_batch_size=16, timeout_s=60, seed=0))
    events: list[dict] = []
    ctx = RunContext(run_dir=str(tmp_path / "run"), node_id="search", emit=events.append)
    out = stage.run(inputs, ctx)

    rows = pq.read_table(out.path).to_pylist()  # the rows it wrote (no Ray Data job to read them back)
    assert Counter((r["run"], r["question"]) for r in rows) == {(run["name"], t.question): 1
                                                                for run in RUNS for t in tasks}
    by_run = {run["name"]: [r for r in rows if r["run"] == run["name"]] for run in RUNS}
    assert all(r["failed_calls"] == 0 and r["best_steps"] for r in by_run["served-direct"])  # it answered, over HTTP
    assert all(r["judge_calls"] > 0 for r in by_run["served-judges"])  # it judged, over HTTP
    assert all(r["judge_calls"] > 0 for r in by_run["collective"])

    counts: Counter[str] = Counter()
    for e in events:
        if e["event"] == "counted":
            counts.update(e["counts"])
    assert not [e for e in events if e["event"] == "served_count_unavailable"]
    assert counts["calls.served"] > 0 and counts["calls.local"] > 0
    assert counts["calls.served"] == counts["served_requests.served"]  # the search's count = the server's
    assert counts["failed_calls.served"] == 0 == counts["failed_calls.local"]
    assert "served_requests.local" not in counts  # a Ray actor has no /metrics
    assert sum(r["calls"] for r in rows) == counts["calls.served"] + counts["calls.local"]  # rows charge every call
    (summary,) = [e for e in events if e["event"] == "policy_calls"]
    assert summary["calls"] == {"local": counts["calls.local"], "served": counts["calls.served"]}
    assert summary["served_requests"] == {"served": counts["served_requests.served"]}


def test_unknown_policies_and_reports_not_from_serve_llm_are_named(served, tmp_path):
    import ray.data

    data = DatasetArtifact(ray.data.from_arrow(tasks_table(make_tasks("chain_arithmetic", 1, seed=0))), rows=1)
    ctx = RunContext(run_dir=str(tmp_path), node_id="search")
    unknown = ComctsSearch(SearchStageParams(runs=[{"name": "r", "method": "comcts", "policies": ["served"],
                                                    "judges": ["policy:nope"]}]))
    with pytest.raises(ValueError, match=r"node 'search', run 'r': unknown policies \['nope'\]; known: \['served'\]"):
        unknown.run({"data": data, "endpoints": [served]}, ctx)
    direct = ComctsSearch(SearchStageParams(runs=[{"name": "r", "method": "direct", "policies": ["served"]}]))
    with pytest.raises(ValueError, match="comcts_search node 'search': the `endpoints` input must be a serve_llm "
                                         "Report"):
        direct.run({"data": data, "endpoints": [ReportArtifact("r.json", {"accuracy": 0.5})]}, ctx)
    renamed = ReportArtifact(served.path, {**served.metrics, "api_key_env": "RAYPRESS_TEST_NO_SUCH_KEY"})
    with pytest.raises(ValueError, match=r"requires the key in \$RAYPRESS_TEST_NO_SUCH_KEY"):
        direct.run({"data": data, "endpoints": renamed}, ctx)
    assert json.loads(Path(served.path).read_text())["model"] == "served"  # the Report on disk names the model
