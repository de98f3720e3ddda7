"""Readers keep every CPU busy: a single file and a few files are both cut into at least a span
per CPU, and what comes out is unchanged (same ids, same order) by the cut."""

from __future__ import annotations

import json

import pytest

import raypress.operators.shared.spans as spans
from raypress.dag.runner import run_pipeline
from raypress.operators.base import RunContext
from raypress.operators.shared.files import line_spans

pytestmark = pytest.mark.integration


def _write_corpus(folder, files: int, lines: int) -> list[str]:
    folder.mkdir()
    paths = []
    for k in range(files):
        rows = []
        for i in range(lines):
            if i % 37 == 5:
                rows.append("")  # empty lines still count in the line numbers
            elif i % 53 == 7:
                rows.append("{not json")  # a tombstone with its line number
            else:
                rows.append(json.dumps({"text": f"file {k} line {i} " + "word " * (i % 23)}))
        path = folder / f"part-{k}.jsonl"
        path.write_text("\n".join(rows) + "\n")
        paths.append(str(path))
    return paths


def _run(tmp_path, name: str, paths: list[str], min_span: int, monkeypatch) -> tuple[list, dict]:
    monkeypatch.setattr(spans, "MIN_SPAN_BYTES", min_span)
    pipeline = tmp_path / f"{name}.yaml"
    pipeline.write_text(
        "settings: {keep_rejects: true, max_error_ratio: 0.5}\nnodes:\n"
        f"  - {{id: docs, op: read_jsonl, with: {{paths: {json.dumps(paths)}}}}}\n"
        "  - {id: enough, op: words_num_filter, input: docs, with: {min_num: 6}}\n"
        "  - {id: out, op: write_jsonl, input: enough, with: {path: '{run_dir}/out.jsonl'}}\n")
    ledger = run_pipeline(str(pipeline), run_dir=str(tmp_path / name))
    rows = [json.loads(line) for line in (tmp_path / name / "out.jsonl").read_text().splitlines()]
    return [(r["id"], r["text"]) for r in rows], ledger


@pytest.mark.parametrize("files", [1, 3])
def test_one_or_a_few_files_give_every_cpu_a_span_and_the_same_rows_in_order(ray_session, tmp_path, monkeypatch,
                                                                            files):
    import ray

    paths = _write_corpus(tmp_path / "in", files, 3000)
    cpus = int(ray.cluster_resources()["CPU"])
    monkeypatch.setattr(spans, "MIN_SPAN_BYTES", 4096)
    items = line_spans(paths, RunContext(run_dir=str(tmp_path), node_id="docs"))
    assert len(items) >= cpus  # a span (a task of the fused chain) per CPU at least
    if files == 1:
        assert all(it["end"] is not None for it in items)
    whole, whole_ledger = _run(tmp_path, "whole", paths, 1 << 40, monkeypatch)
    cut, cut_ledger = _run(tmp_path, "cut", paths, 4096, monkeypatch)
    assert cut == whole and len(whole) > 1000
    measured = ("seconds", "cpu_utilisation", "counts")  # timings differ; the accounting must not
    assert ({n: {k: v for k, v in e.items() if k not in measured} for n, e in cut_ledger["nodes"].items()} ==
            {n: {k: v for k, v in e.items() if k not in measured} for n, e in whole_ledger["nodes"].items()})
    assert whole_ledger["nodes"]["docs"]["quarantined"] > 0  # the bad lines, by line number in both
    assert {i.split(":")[-1] for i, _ in whole[:3]} <= {str(n) for n in range(1, 10)}
