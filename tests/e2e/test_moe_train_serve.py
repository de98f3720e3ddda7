"""pipelines/moe_train_serve.yaml end to end: curated text -> train_moe_lm -> serve_llm (a live
Ray Serve endpoint during the run) -> moe_cap_benchmark (Report + CAP radar), then the endpoint
is taken down with the run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from raypress.dag.runner import run_pipeline
from raypress.serving.uvicorn_thread import free_port

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
REPO = Path(__file__).resolve().parents[2]


def test_train_serve_benchmark(ray_session, tmp_path):
    pytest.importorskip("tokenizers")
    pytest.importorskip("matplotlib")
    from ray import serve

    metadata_glob = f"{sys.prefix}/lib/python*/site-packages/*.dist-info/METADATA"
    run_dir = tmp_path / "run"
    events: list[dict] = []
    ledger = run_pipeline(str(REPO / "pipelines" / "moe_train_serve.yaml"), run_dir=str(run_dir),
                          on_event=events.append, overrides=[
                              f"metadata.paths=['{metadata_glob}']",
                              # step-bound, not time-bound: nothing here measures the model's quality
                              "model.max_steps=10", "model.max_minutes=0.3",
                              "model.num_local_experts=4", "model.num_workers=0",  # local mode: no actors
                              f"endpoint.port={free_port()}",
                              "cap.concurrency=[1, 4]", "cap.limit=12", "cap.max_tokens=6",
                              # a first window of each held-out text (~35) and a few second ones: the
                              # pipeline's 200 questions took ~2/3 of the benchmark here
                              "cap.choice_questions=40",
                              "cap.systems_max_tokens=10", "cap.systems_requests=16"])
    try:
        assert ledger["adds_up"], ledger["problems"]
        nodes = ledger["nodes"]
        split_in = nodes["train_text"]["rows_in"]
        assert split_in == nodes["heldout_text"]["rows_in"]
        assert nodes["train_text"]["rows_out"] + nodes["heldout_text"]["rows_out"] == split_in  # a partition

        model_dir = Path(nodes["model"]["artifact"])
        assert (model_dir / "model.safetensors").is_file() and (model_dir / "tokenizer.json").is_file()

        endpoint = json.loads(Path(nodes["endpoint"]["artifact"]).read_text())
        assert endpoint["url"].startswith("http://127.0.0.1:") and endpoint["model"] == "endpoint"
        ready = [e for e in events if e.get("event") == "endpoint_ready"]
        assert ready and ready[0]["url"] == endpoint["url"]

        report = json.loads(Path(nodes["cap"]["artifact"]).read_text())
        assert [level["concurrency"] for level in report["levels"]] == [1, 4]
        for level in report["levels"]:
            assert level["errors"] == 0 and level["completion_tokens"] > 0
            assert level["throughput_tokens_per_s"] > 0 and level["ttft_s"]["p50"] > 0
            assert 0 <= level["accuracy"] <= 1 and level["cost_usd_per_mtok"] > 0
            assert level["decode"]["passes"] > 0 and level["decode"]["s_mbu"] > 0
            assert level["prefill"]["passes"] > 0 and level["prefill"]["s_mfu"] > 0
        assert report["target"]["model"] == "endpoint"  # measured through the live server
        radar = Path(report["radar"])
        assert radar.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        choice = report["accuracy_choice"]  # log-likelihood multiple choice through the endpoint
        assert choice["questions"] >= 20 and choice["chance"] == 0.25 and 0 <= choice["acc"] <= 1
        assert report["accuracy_axis"] == "accuracy_choice.acc"
        print("multiple choice:", {k: choice[k] for k in ("questions", "acc", "acc_interval_95",
                                                          "acc_p_value_vs_chance", "acc_norm")})
        systems = report["systems"]
        assert [s["system"] for s in systems] == ["raypress (served, c=4)", "raypress engine in process",
                                                 "raypress, kernels off", "HF transformers generate"]
        for row in systems:
            assert row["throughput"] > 0 and row["tpot"] > 0 and row["s_mbu"] > 0
            print("system:", row)
        # the served row is the endpoint's own run of the systems' workload, not its 6-token level
        assert report["systems_sampling"]["max_tokens"] == 10 and report["systems_sampling"]["requests"] == 16
        assert report["systems_target"]["requests"] == 16 and report["systems_target"]["errors"] == 0
        assert systems[0]["throughput"] == report["systems_target"]["throughput_tokens_per_s"]
        assert report["hardware"]["engine_threads"] == 1  # the replica's (num_cpus 1), not this process's
        assert Path(report["systems_radar"]).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # the run took its endpoint down when it finished
        assert "endpoint" not in serve.status().applications
    finally:
        serve.shutdown()
