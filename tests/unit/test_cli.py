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
