"""Issue 32, cases 1 and 5: the run directory's own folders are never a writer's destination, and two
runs started in the same second get different run directories."""

from __future__ import annotations

import pytest

from raypress.dag.resolve import resolve_pipeline
from raypress.dag.store import default_run_dir
from raypress.dag.validate import PipelineInvalid, load_pipeline

PIPELINE = """name: own-folders
nodes:
  - id: src
    op: read_jsonl
    with: {{paths: [in.jsonl]}}
  - id: out
    op: write_jsonl
    input: src
    with:
      path: {path}
      overwrite: true
"""


def problems(tmp_path, path: str) -> list[str]:
    file = tmp_path / "p.yaml"
    file.write_text(PIPELINE.format(path=path))
    (tmp_path / "in.jsonl").write_text('{"text": "a"}\n')
    try:
        load_pipeline(file)
    except PipelineInvalid as error:
        return [str(p) for p in error.problems]
    return []


@pytest.mark.parametrize("path", ["'{run_dir}/rejects'", "'{run_dir}/nodes/x'", "'{run_dir}/quarantine'",
                                  "'{run_dir}/state'", "'{run_dir}/models/m'", "'{run_dir}/reports'",
                                  "'{run_dir}'", "'{run_dir}/'", "'{run_dir}/./rejects/out'"])
def test_a_writer_into_the_runs_own_folders_fails_validation_on_its_line(tmp_path, path):
    """Before: validate passed; the run then refused "files that raypress did not write" (it wrote
    them), and with ``overwrite: true`` deleted ``rejects/`` while the ledger still counted its rows."""
    found = problems(tmp_path, path)
    assert len(found) == 1, found
    assert ":10" in found[0] and "out" in found[0] and "the run's own" in found[0], found[0]


@pytest.mark.parametrize("path", ["'{run_dir}/out/rejects'", "'{run_dir}/rejected'", "'{run_dir}/exports/nodes'"])
def test_a_folder_of_ones_own_in_the_run_dir_is_fine(tmp_path, path):
    assert problems(tmp_path, path) == []


def test_a_resolved_writer_that_holds_the_run_dir_fails(tmp_path):
    """An absolute path that is the run directory or one of its parents would delete the run's own
    files on ``overwrite: true``: refused once the run directory is known."""
    file = tmp_path / "p.yaml"
    (tmp_path / "in.jsonl").write_text('{"text": "a"}\n')
    for path in (tmp_path / "runs", tmp_path / "runs" / "r1", tmp_path / "runs" / "r1" / "rejects" / "x"):
        file.write_text(PIPELINE.format(path=f"'{path}'"))
        with pytest.raises(PipelineInvalid, match="the run's own"):
            resolve_pipeline(file, run_dir=str(tmp_path / "runs" / "r1"), base_dir=str(tmp_path))
    file.write_text(PIPELINE.format(path=f"'{tmp_path / 'runs' / 'r1' / 'exports'}'"))
    resolve_pipeline(file, run_dir=str(tmp_path / "runs" / "r1"), base_dir=str(tmp_path))


def test_run_dirs_started_in_the_same_second_differ():
    """Before: ``runs/<name>/<YYYYmmdd-HHMMSS>``, so a ``--set`` sweep started by a script had its
    second run refused (the run directory was locked by the first)."""
    names = {default_run_dir("sweep") for _ in range(50)}
    assert len(names) == 50
    assert all(name.startswith("runs/sweep/") for name in names)
