"""pipelines/foundation_loop.yaml's profiles validate, and `plan` of the cluster profile puts the
training, fine-tuning and serving stages on GPUs (the default leaves them where the cluster has one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raypress.dag.plan import describe, make_plan
from raypress.dag.validate import load_pipeline

LOOP = Path(__file__).resolve().parents[2] / "pipelines" / "foundation_loop.yaml"
GPU_STAGES = ("model", "policies", "sft", "sft_control", "endpoint", "final_endpoint")


@pytest.mark.parametrize("profile", [None, "reduced", "cluster"])
def test_every_profile_validates_with_the_whole_loop(profile):
    vp = load_pipeline(str(LOOP), [f"settings.profile={profile}"] if profile else [])
    ops = {n.op_cls.name for n in vp.nodes.values()}
    assert {"tag_source_mapper", "document_minhash_deduplicator", "train_quality_classifier", "train_moe_lm",
            "serve_llm", "comcts_search", "collective_sft", "evaluate_reasoning", "moe_cap_benchmark",
            "loop_report"} <= ops


def test_plan_of_the_cluster_profile_puts_training_and_serving_on_gpus():
    rows = {r["node"]: r["resources"] for r in describe(make_plan(load_pipeline(str(LOOP), ["settings.profile=cluster"])))}
    assert all("gpu=1" in rows[n] for n in GPU_STAGES), {n: rows[n] for n in GPU_STAGES}
    assert "4 Ray Train workers × cpu=1 gpu=1" in rows["model"]
    default = {r["node"]: r["resources"] for r in describe(make_plan(load_pipeline(str(LOOP), [])))}
    assert not any("gpu=1" in default[n] and "where the cluster has" not in default[n] for n in GPU_STAGES)
