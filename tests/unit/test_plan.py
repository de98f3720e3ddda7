"""Where the plan cuts the lazy chain: branches, global ops, stages, unions and leaves."""

from __future__ import annotations

import textwrap

from raypress.dag.plan import Segment, describe, make_plan
from raypress.dag.validate import load_pipeline


def plan_for(tmp_path, body: str):
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(body))
    return make_plan(load_pipeline(path))


def test_linear_chain_is_one_segment(tmp_path):
    plan = plan_for(tmp_path, """\
        nodes:
          - {id: src, op: read_jsonl, with: {paths: [a.jsonl]}}
          - {id: clean, op: clean_email_mapper, input: src}
          - {id: words, op: words_num_filter, input: clean}
          - {id: out, op: write_parquet, input: words, with: {path: out}}
        """)
    assert plan.materialize == {}
    assert [s.nodes for s in plan.steps] == [["src", "clean", "words", "out"]]


def test_branch_dedup_union_and_leaf_materialize(tmp_path):
    plan = plan_for(tmp_path, """\
        nodes:
          - {id: a, op: read_jsonl, with: {paths: [a.jsonl]}}
          - {id: b, op: read_jsonl, with: {paths: [b.jsonl]}}
          - {id: both, op: clean_email_mapper, input: [a, b]}
          - {id: words, op: words_num_filter, input: both}
          - {id: dedup, op: document_deduplicator, input: words}
          - {id: out1, op: write_parquet, input: dedup, with: {path: o1}}
          - {id: out2, op: write_jsonl, input: dedup, with: {path: o2}}
          - {id: lonely, op: clean_links_mapper, input: words}
        """)
    m = plan.materialize
    assert "union" in m["a"] and "union" in m["b"]
    assert "branch" in m["words"]  # read by dedup and lonely
    assert "branch" in m["dedup"]
    assert "leaf" in m["lonely"]
    segs = [s.nodes for s in plan.steps if isinstance(s, Segment)]
    assert ["both", "words"] in segs and ["dedup"] in segs and ["dedup", "out1"] not in segs
    assert ["out1"] in segs and ["out2"] in segs and ["lonely"] in segs
    rows = {r["node"]: r for r in describe(plan)}
    assert rows["words"]["materialized"].startswith("branch")


def test_model_stage_is_its_own_step(tmp_path):
    plan = plan_for(tmp_path, """\
        nodes:
          - {id: src, op: read_jsonl, with: {paths: [a.jsonl]}}
          - {id: clf, op: train_quality_classifier, input: src, with: {label_key: label}}
          - {id: scored, op: quality_classifier_filter, input: {data: src, model: clf}}
          - {id: out, op: write_parquet, input: scored, with: {path: out}}
        """)
    assert "branch" in plan.materialize["src"]
    kinds = [s if isinstance(s, str) else tuple(s.nodes) for s in plan.steps]
    assert kinds == [("src",), "clf", ("scored", "out")]


def test_side_dataset_input_is_materialized_alone(tmp_path):
    """attach_images reads its images whole: they are materialized first; the pages stream on."""
    plan = plan_for(tmp_path, """\
        nodes:
          - {id: pages, op: read_warc, with: {paths: [a.warc.gz], content: html}}
          - {id: images, op: read_warc, with: {paths: [a.warc.gz], content: images}}
          - {id: extract, op: html_to_interleaved, input: pages}
          - {id: attach, op: attach_images, input: {data: extract, images: images}}
          - {id: out, op: write_parquet, input: attach, with: {path: out}}
        """)
    assert plan.materialize == {"images": "side input 'images' of 'attach'"}
    segments = [s.nodes for s in plan.steps]
    assert segments == [["images"], ["pages", "extract", "attach", "out"]]


def test_describe_lists_nodes_in_execution_order():
    """Issue 34: `raypress plan pipelines/mint1t_html.yaml` showed `warc` (step 2) above `images` (step 1),
    the side input that must exist first; rows follow the steps, and within a step the chain's order."""
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    plan = make_plan(load_pipeline(repo / "pipelines" / "mint1t_html.yaml"))
    rows = describe(plan)
    assert [r["node"] for r in rows[:3]] == ["images", "warc", "urls"]
    steps = [r["step"] for r in rows]
    assert steps == sorted(steps) and steps[0] == 1
    order = [nid for step in plan.steps for nid in (step.nodes if isinstance(step, Segment) else [step])]
    assert [r["node"] for r in rows] == order
    assert sorted(r["node"] for r in rows) == sorted(plan.pipeline.nodes)  # every node, once
