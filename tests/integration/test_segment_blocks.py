"""A reader's segment runs as one task per block over every CPU, stateful ops included (as tasks
keeping their model per worker, or in actor pools with ``settings.stateful_ops: actors``), with
the same rows and stats either way, and the written parts read back in input order."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.integration

SENTENCES = ["The manual explains how to install the package and configure it.",
             "Der Benutzer kann die Einstellungen im Menü ändern.",
             "La documentation décrit chaque option de la commande.",
             "Each chapter ends with a short list of exercises for the reader."]


def write_files(tmp_path: Path, files: int = 2, rows: int = 300) -> None:
    for f in range(files):
        with open(tmp_path / f"part{f}.jsonl", "w") as fh:
            for i in range(rows):
                fh.write(json.dumps({"doc": f"f{f}-{i:04d}", "text": f"{SENTENCES[i % 4]} Item {i}."}) + "\n")


LANGUAGE = ("language_id_score_filter", "{lang: en, min_score: 0.5}")  # loads a fastText model
WORDS = ("words_num_filter", "{min_num: 9}")  # a cheap text op


def pipeline(tmp_path: Path, rows_per_block: int | str, stateful_ops: str = "tasks",
             op: tuple[str, str] = LANGUAGE) -> Path:
    path = tmp_path / f"p-{stateful_ops}-{rows_per_block}-{op[0]}.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: segment-blocks
        settings: {{rows_per_block: {rows_per_block}, stateful_ops: {stateful_ops}}}
        nodes:
          - id: src
            op: read_jsonl
            with: {{paths: ["{tmp_path}/part*.jsonl"], id_key: doc}}
          - id: lang
            op: {op[0]}
            input: src
            with: {op[1]}
          - id: out
            op: write_parquet
            input: lang
            with: {{path: "{{run_dir}}/out"}}
        """))
    return path


def test_a_readers_rows_are_cut_into_blocks_and_stateful_ops_give_the_same_rows_as_tasks_or_actors(
        ray_session, tmp_path):
    write_files(tmp_path)
    outputs = {}
    for mode in ("tasks", "actors"):
        run_dir = tmp_path / f"run-{mode}"
        ledger = run_pipeline(str(pipeline(tmp_path, 50, mode)), run_dir=str(run_dir))
        assert ledger["adds_up"] and ledger["nodes"]["src"]["rows_out"] == 600
        kept = ledger["nodes"]["lang"]["rows_out"]
        assert 250 <= kept <= 350  # the English half
        parts = sorted((run_dir / "out").glob("*.parquet"))
        rows = [r for f in parts for r in pq.read_table(f).to_pylist()]
        outputs[mode] = {r["id"]: r["stats"] for r in rows}
        # the parts, read in name order, give the rows in input order (file by file, line by line)
        assert [r["doc"] for r in rows] == sorted(r["doc"] for r in rows)
        if mode == "tasks":  # one task, one written part per block of at most 50 read rows
            assert len(parts) >= 12 and max(pq.read_metadata(f).num_rows for f in parts) <= 50
    assert outputs["tasks"] == outputs["actors"]


def test_auto_cuts_only_segments_whose_ops_load_a_model(ray_session, tmp_path):
    """Cheap text ops keep Ray Data's own blocks (a few parts); a number cuts them too; a model op
    is cut under auto."""
    write_files(tmp_path)
    parts = {}
    for name, rows_per_block, op in (("text-auto", "auto", WORDS), ("text-50", 50, WORDS),
                                     ("model-auto", "auto", LANGUAGE)):
        run_dir = tmp_path / f"run-{name}"
        ledger = run_pipeline(str(pipeline(tmp_path, rows_per_block, op=op)), run_dir=str(run_dir))
        assert ledger["adds_up"] and ledger["nodes"]["src"]["rows_out"] == 600
        files = sorted((run_dir / "out").glob("*.parquet"))
        rows = [r["doc"] for f in files for r in pq.read_table(f).to_pylist()]
        assert rows == sorted(rows) and len(rows) == ledger["nodes"]["lang"]["rows_out"] > 0
        parts[name] = len(files)
    assert parts["text-auto"] <= 2 and parts["text-50"] >= 12 and parts["model-auto"] >= 2, parts


def test_a_mapper_after_materialized_parts_runs_one_task_per_part(ray_session, tmp_path):
    """Issue 30: a segment after a global op reads its input one file per row, and Ray bundled those
    rows up to a fused op's batch size: `drop_stats` (1024) put MinHash's whole mark pass and export
    into one task (4 GB on one core)."""
    import pyarrow as pa
    import ray

    from raypress.dag.execute import ExecutionPolicy, apply_streaming
    from raypress.dag.op_timing import new_timer
    from raypress.dag.run_artifacts import read_materialized
    from raypress.dag.validate import load_pipeline

    parts = tmp_path / "parts"
    parts.mkdir()
    for p in range(4):
        pq.write_table(pa.table({"id": [f"{p}-{i}" for i in range(50)],
                                 "text": [f"{SENTENCES[i % 4]} Item {i}." for i in range(50)]}),
                       parts / f"part-{p:08d}.parquet")
    lazy = read_materialized(parts, rows=200, in_memory_mb=0, block_rows=256)  # read per file, lazily
    node = load_pipeline(pipeline(tmp_path, "auto", op=WORDS)).nodes["lang"]
    assert node.op_cls.batch_size == 1024
    ds = apply_streaming(lazy.ds, node, ExecutionPolicy(), {}, new_timer())

    def task_of(table: pa.Table) -> pa.Table:
        return pa.table({"task": [ray.get_runtime_context().get_task_id()], "rows": [table.num_rows]})

    seen = ds.map_batches(task_of, batch_size=None, batch_format="pyarrow").take_all()
    assert sum(r["rows"] for r in seen) == 200
    assert len({r["task"] for r in seen}) == 4, seen  # was 1
