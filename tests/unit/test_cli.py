"""The CLI's read-only commands: ops listing, one op's params, the plan table (no Ray needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "raypress.cli", *args], capture_output=True, text=True,
                          cwd=REPO)


def test_ops_lists_every_registered_op_with_kind():
    proc = cli("ops")
    assert proc.returncode == 0
    for name, kind in [("words_num_filter", "filter"), ("read_jsonl", "reader"),
                       ("document_deduplicator", "deduplicator"), ("train_quality_classifier", "stage"),
                       ("write_parquet", "writer"), ("clean_email_mapper", "mapper")]:
        line = next(line for line in proc.stdout.splitlines() if f" {name} " in line)
        assert kind in line


def test_ops_name_shows_params_types_defaults_docs():
    proc = cli("ops", "words_num_filter")
    assert proc.returncode == 0
    assert "[min_num, max_num]" in proc.stdout  # docs are not eaten as markup
    row = next(line for line in proc.stdout.splitlines() if "min_num" in line and "int" in line)
    assert "10" in row and "words" in row
    bad = cli("ops", "wrods_num_filter")
    assert bad.returncode == 2 and "did you mean 'words_num_filter'" in bad.stderr


def test_plan_prints_steps_and_materialization():
    proc = cli("plan", "pipelines/quickstart.yaml")
    assert proc.returncode == 0, proc.stderr
    dedup_input = next(line for line in proc.stdout.splitlines() if " flagged " in line)
    assert "input of deduplicator 'dedup'" in dedup_input
    assert "writes files" in proc.stdout


def test_a_large_plan_prints_every_node_as_aligned_lines(tmp_path):
    """Issue 32 case 7: rich laid a 10,000-row table out in 12 s; past 500 rows the plan is plain text."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("plan_scale", REPO / "bench" / "plan_scale.py")
    plan_scale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plan_scale)
    path = tmp_path / "chain.yaml"
    path.write_text(plan_scale.chain_yaml(1200, tmp_path))
    proc = cli("plan", str(path))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "plan: chain (1,200 nodes)" and lines[1].split() == [
        "step", "node", "op", "kind", "inputs", "resources", "materialized"]
    assert len(lines) == 2 + 1200
    branch = next(line for line in lines if line.split()[1] == "n999")
    assert branch.index("branch: read by 2 nodes") == lines[1].index("materialized")


def test_registry_reads_each_ops_source_once_however_many_nodes_use_it(tmp_path, monkeypatch):
    """Issue 32 case 7: each node walked its op's module AST twice (requires, requires_when)."""
    import ast

    from raypress.dag.validate import load_pipeline
    from raypress.operators import registry

    walks = []
    real_walk = ast.walk
    monkeypatch.setattr(registry.ast, "walk", lambda node: walks.append(node) or real_walk(node))
    registry._register_keyword.cache_clear()
    lines = ["nodes:", "  - {id: n0, op: read_jsonl, with: {paths: [in.jsonl]}}"]
    lines += [f"  - {{id: n{i}, op: whitespace_normalization_mapper, input: n{i - 1}}}" for i in range(1, 300)]
    lines += ["  - {id: out, op: write_jsonl, input: n299, with: {path: out}}"]
    (tmp_path / "chain.yaml").write_text("\n".join(lines) + "\n")
    assert len(load_pipeline(tmp_path / "chain.yaml").nodes) == 301
    assert len(walks) <= 6  # 3 ops x (requires, requires_when)


def test_serve_rejects_bad_arguments_before_starting_ray(tmp_path):
    neither = cli("serve")
    assert neither.returncode == 2 and "either a Serve CONFIG file or --model" in neither.stderr
    not_a_model = cli("serve", "--model", str(tmp_path))
    assert not_a_model.returncode == 2 and "not a model directory" in not_a_model.stderr
    config = tmp_path / "serve.yaml"
    config.write_text("applications:\n  - name: llm\n    import_path: 3\n")
    bad_config = cli("serve", str(config))
    assert bad_config.returncode == 2 and "applications.0.import_path" in bad_config.stderr
    config.write_text("applications: [\n")
    assert "not valid YAML" in cli("serve", str(config)).stderr
    bogus = cli("serve", "--model", str(tmp_path), "--ingress", "nginx")
    assert bogus.returncode == 2 and "choose 'auto'" in bogus.stderr
    cluster = cli("serve", "--model", str(tmp_path), "--ingress", "haproxy", "--address", "127.0.0.1:1")
    assert cluster.returncode == 2 and "RAY_SERVE_ENABLE_HA_PROXY=1" in cluster.stderr
