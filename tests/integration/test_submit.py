"""`raypress submit` against a real Ray head, and the submit errors a user sees.

The head is a separate `ray start --head --block` process with its own ports, temp dir and auth
token (tests/ray_cluster.py), so it never meets the in-process Ray that the `ray_session` fixture
starts for other tests (this file does not use that fixture), and only its own processes are
stopped. One head serves the module: its jobs' `python` is a wrapper that can be switched to a
Python lacking raypress's dependencies (`python_switch`), so the test of that error needs no
second head.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from ray._private.thirdparty.pathspec import PathSpec  # what Ray applies `excludes` with
from ray_cluster import Cluster, api_get, clean_env, free_port, local_cluster

from raypress.cluster import (
    CORE_MODULES,
    LARGE_FILE_BYTES,
    PROBE_SCRIPT,
    ClusterError,
    build_entrypoint,
    build_runtime_env,
    cluster_problems,
    submit_pipeline,
)
from raypress.dag.spec import read_spec

REPO = Path(__file__).resolve().parents[2]
JOB_TIMEOUT_S = 600

ROWS = ["hello", "hello world", "a quick brown fox", "ok"]
KEPT = ["a quick brown fox"]  # words_num_filter with min_num 3, set on the command line

PIPELINE = """\
name: submit-smoke
nodes:
  - id: docs
    op: read_jsonl
    with: {paths: ["docs.jsonl"]}   # relative: to where `submit` runs, as for `run`
  - id: long
    op: words_num_filter
    input: docs
    with: {min_num: 2}
  - id: out
    op: write_jsonl
    input: long
    with: {path: "{run_dir}/out"}
"""

# A Python that lacks typer and rich but has the rest (ray included): the `python` a job finds on a
# head whose PATH leads to another environment than raypress's.
HIDER = """\
import os, sys
from importlib.machinery import PathFinder

_HIDDEN = set(filter(None, os.environ.get("RAYPRESS_HIDE", "").split(",")))


class _HidingPathFinder(PathFinder):
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.split(".")[0] in _HIDDEN:
            return None
        return super().find_spec(fullname, path, target)


sys.meta_path[:] = [_HidingPathFinder if f is PathFinder else f for f in sys.meta_path]
"""


def write_pipeline(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "docs.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in ROWS))
    path = folder / "pipeline.yaml"
    path.write_text(PIPELINE)
    return path


@pytest.fixture(scope="module")
def python_switch(tmp_path_factory) -> Path:
    """The file that decides what the head's `python` hides (empty: nothing; `typer,rich`: the
    Python of `test_a_cluster_python_without_raypress_deps_is_named_before_submitting`).

    The head's PATH leads to a wrapper `python` that execs this interpreter, with HIDER loaded when
    the file names modules: every job resolves `python` when it starts, so one head serves both the
    tests that need a complete Python and the one that needs a broken one (a second head cost a
    cluster start-up)."""
    root = tmp_path_factory.mktemp("job_python")
    hider = root / "hider"
    hider.mkdir()
    (hider / "sitecustomize.py").write_text(HIDER)
    switch = root / "hide"
    switch.write_text("")
    wrapper = root / "bin" / "python"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nhide=$(cat "{switch}")\n'
                       f'if [ -n "$hide" ]; then\n'
                       f'  PYTHONPATH="{hider}:$PYTHONPATH" RAYPRESS_HIDE="$hide" exec "{sys.executable}" "$@"\n'
                       f'fi\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return switch


@pytest.fixture(scope="module")
def ray_head(python_switch) -> Iterator[Cluster]:
    """A private local Ray head (2 CPUs) whose jobs' `python` is `python_switch`'s wrapper; torn down
    after the module."""
    env = clean_env()
    env["PATH"] = os.pathsep.join([str(python_switch.parent / "bin"), env["PATH"]])
    with local_cluster(num_cpus=2, env=env) as cluster:
        yield cluster


def submit(head: Cluster, pipeline: Path | str, *args: str, cwd: Path = REPO) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "raypress.cli", "submit", str(pipeline), "--address", head.url, *args],
        cwd=cwd, env=head.env, capture_output=True, text=True, timeout=JOB_TIMEOUT_S,
    )
    return proc.returncode, proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def smoke_folder(tmp_path_factory) -> Path:
    """The smoke pipeline's folder (pipeline.yaml, docs.jsonl), shared by the tests that submit it
    fresh and run it: run directories beside it, one per test."""
    return write_pipeline(tmp_path_factory.mktemp("smoke") / "pipeline").parent


@pytest.fixture(scope="module")
def fresh_submission(ray_head, smoke_folder) -> tuple[int, str, Path]:
    """One `raypress submit` of the smoke pipeline into a fresh run directory, from the pipeline's
    folder with every path relative (each means what it means to `run` there): (exit code, output,
    run directory). Two tests check it: what the job wrote, and that it ran the same resolved file
    as `raypress run` (one job instead of two alike)."""
    code, output = submit(ray_head, "pipeline.yaml", "--run-dir", "../submitted", "--set", "long.min_num=3",
                          cwd=smoke_folder)
    return code, output, smoke_folder.parent / "submitted"


@pytest.mark.integration
def test_submit_runs_pipeline_on_a_ray_head(ray_head, fresh_submission):
    code, output, run_dir = fresh_submission
    assert code == 0, ray_head.explain(output)
    assert "cluster check: ok" in output
    assert "SUCCEEDED" in output
    assert re.search(r"submitted job raypress_pipeline_[0-9a-f]{8}", output)
    assert "ledger adds up" in output, "the job's own log lines should stream back"

    written = sorted(
        json.loads(line)["text"]
        for part in sorted((run_dir / "out").glob("*.jsonl"))
        for line in part.read_text().splitlines()
    )
    assert written == KEPT
    ledger = json.loads((run_dir / "ledger.json").read_text())
    assert ledger["adds_up"] is True
    assert ledger["nodes"]["long"]["rows_in"] == len(ROWS)
    assert ledger["nodes"]["long"]["rows_out"] == len(KEPT)


def _states(run_dir: Path) -> dict[str, str]:
    return {p.stem: json.loads(p.read_text())["hash"] for p in sorted((run_dir / "state").glob("*.json"))}


def _written(run_dir: Path) -> list[tuple[str, str]]:
    return sorted((r["id"], r["text"]) for part in sorted((run_dir / "out").glob("*.jsonl"))
                  for r in map(json.loads, part.read_text().splitlines()))


def _skipped(run_dir: Path) -> list[str]:
    """The nodes the last run of ``run_dir`` skipped (its events after its last `run_started`)."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    last = max(i for i, e in enumerate(events) if e["event"] == "run_started")
    return [e["node"] for e in events[last:] if e["event"] == "node_skipped"]


@pytest.mark.integration
def test_run_resume_submit_and_the_resolved_file_run_one_resolved_pipeline(ray_head, smoke_folder,
                                                                           fresh_submission):
    """`raypress run`, the same command again (a resume), `raypress run RUN_DIR/pipeline.yaml` and
    `raypress submit` run the same resolved file: same text, same config hashes, same outputs."""
    pipeline = smoke_folder / "pipeline.yaml"
    here = pipeline.parent
    a = here.parent / "A"

    def run(*args: str) -> None:
        proc = subprocess.run([sys.executable, "-m", "raypress.cli", "run", *args], cwd=here, env=clean_env(),
                              capture_output=True, text=True, timeout=JOB_TIMEOUT_S)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    run(pipeline.name, "--run-dir", "../A", "--set", "long.min_num=3")
    text, hashes, outputs = (a / "pipeline.yaml").read_text(), _states(a), _written(a)
    assert outputs and [t for _, t in outputs] == KEPT and set(hashes) == {"out"}
    assert "--set long.min_num=3" in text.splitlines()[0] and f"- {here / 'docs.jsonl'}" in text

    run(pipeline.name, "--run-dir", "../A", "--set", "long.min_num=3")  # a resume
    assert _skipped(a) == ["docs", "long", "out"] and (a / "pipeline.yaml").read_text() == text
    run(str(a / "pipeline.yaml"))  # the resolved file itself, from anywhere
    assert _skipped(a) == ["docs", "long", "out"] and _states(a) == hashes and _written(a) == outputs

    code, output = submit(ray_head, pipeline.name, "--run-dir", "../A", "--set", "long.min_num=3", cwd=here)
    assert code == 0, ray_head.explain(output)  # on the cluster: the same hashes, so nothing to do
    assert _skipped(a) == ["docs", "long", "out"] and (a / "pipeline.yaml").read_text() == text

    code, output, b = fresh_submission
    assert code == 0, ray_head.explain(output)  # a fresh run there: the same file but for its run directory
    assert (b / "pipeline.yaml").read_text() == text.replace(str(a), str(b))
    assert _skipped(b) == [] and _written(b) == outputs


@pytest.mark.integration
def test_a_job_that_fails_on_the_cluster_fails_the_command(ray_head, tmp_path):
    pipeline = write_pipeline(tmp_path / "pipeline")
    (pipeline.parent / "docs.jsonl").unlink()  # valid YAML, but the input is not there
    code, output = submit(ray_head, pipeline, "--run-dir", str(tmp_path / "run"), cwd=pipeline.parent)
    assert code == 1, ray_head.explain(output)
    assert "FAILED" in output and "SUCCEEDED" not in output
    assert "docs.jsonl" in output, "the cluster-side error should stream back"


def test_a_wrong_token_is_one_line_saying_what_to_set(ray_head, tmp_path):
    """Issue 32 case 2: `run --address` retried for ~23 s, printing 20 InvalidAuthToken lines, then
    said only ConnectionError; `submit` gave Ray's 401 text."""
    pipeline = write_pipeline(tmp_path / "pipeline")
    env = clean_env(RAY_AUTH_TOKEN="not-the-clusters-token")
    for command in (["run", str(pipeline), "--address", ray_head.gcs, "--run-dir", str(tmp_path / "run")],
                    ["submit", str(pipeline), "--address", ray_head.url]):
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "raypress.cli", *command], cwd=pipeline.parent, env=env,
                              capture_output=True, text=True, timeout=120)
        output = proc.stdout + proc.stderr
        assert proc.returncode != 0 and time.monotonic() - started < 15, output
        assert "refused this machine's token (the one in RAY_AUTH_TOKEN)" in output, output
        assert "RAY_AUTH_TOKEN_PATH=<the cluster's token file>" in output and "~/.ray/auth_token" in output
        assert "InvalidAuthToken" not in output and "Traceback" not in output, output


def test_unreachable_address_is_a_one_line_error_naming_it(tmp_path):
    pipeline = write_pipeline(tmp_path)
    address = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(ClusterError) as err:
        submit_pipeline(str(pipeline), address, None, [], echo=lambda s: None)
    assert time.monotonic() - started < 10
    message = str(err.value)
    assert address in message and "\n" not in message


def test_cli_reports_an_unreachable_address_without_a_traceback(tmp_path):
    pipeline = write_pipeline(tmp_path)
    address = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.run(
        [sys.executable, "-m", "raypress.cli", "submit", str(pipeline), "--address", address],
        cwd=REPO, env=clean_env(), capture_output=True, text=True, timeout=120,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert address in output
    assert "Traceback" not in output, output


def test_missing_pipeline_file_is_reported_before_connecting(tmp_path):
    with pytest.raises(ClusterError, match="nope.yaml: cannot read pipeline"):
        submit_pipeline(str(tmp_path / "nope.yaml"), "http://127.0.0.1:1", None, [])


def test_entrypoint_runs_the_resolved_file_as_it_is_on_the_cluster():
    assert shlex.split(build_entrypoint("pipeline.yaml")) == [
        "python", "-m", "raypress.cli", "run", "pipeline.yaml", "--address", "auto"]


def test_runtime_env_ships_package_and_folder_but_not_large_files(tmp_path):
    write_pipeline(tmp_path)
    (tmp_path / "data").mkdir()
    with open(tmp_path / "data" / "big[1].bin", "wb") as f:
        f.truncate(LARGE_FILE_BYTES)  # sparse: costs no disk
    notes: list[str] = []
    env = build_runtime_env(tmp_path, ["reasoning-gym"], echo=notes.append)
    assert env["working_dir"] == str(tmp_path)
    assert [Path(p).name for p in env["py_modules"]] == ["raypress"]
    assert (Path(env["py_modules"][0]) / "cluster.py").is_file()
    assert {".venv", ".git", "runs/"} <= set(env["excludes"])
    # matched the way Ray matches `excludes` (gitwildmatch): the big file only, not its neighbours
    excluded = PathSpec.from_lines("gitwildmatch", env["excludes"]).match_file
    assert excluded("data/big[1].bin") and excluded("runs/x/ledger.json")
    assert not excluded("docs.jsonl") and not excluded("data/big1.bin")
    assert any("data/big[1].bin" in n for n in notes)
    assert env["pip"] == ["reasoning-gym"]
    assert env["env_vars"]["RAY_TRAIN_V2_ENABLED"] == "1"
    assert "pip" not in build_runtime_env(tmp_path, None, echo=notes.append)


@pytest.mark.integration
def test_quickstart_submitted_from_the_repo_root_runs(ray_head, tmp_path):
    """What a new user types first: the quickstart's relative glob names this checkout's venv."""
    run_dir = tmp_path / "run"
    code, output = submit(ray_head, "pipelines/quickstart.yaml", "--run-dir", str(run_dir), cwd=REPO)
    assert code == 0, ray_head.explain(output)
    assert "SUCCEEDED" in output
    assert "--set" not in output.split("submitted job", 1)[1].splitlines()[0]  # the job runs the file as it is
    ran = read_spec(run_dir / "pipeline.yaml")  # the resolved file the job ran
    assert ran.nodes[0].params["paths"] == [str(REPO / ".venv/lib/python*/site-packages/*.dist-info/METADATA")]
    ledger = json.loads((run_dir / "ledger.json").read_text())
    assert ledger["adds_up"] is True and ledger["nodes"]["metadata"]["rows_out"] > 0
    written = sum(pq.read_metadata(f).num_rows for f in (run_dir / "output").glob("*.parquet"))
    assert written == ledger["nodes"]["output"]["rows_out"] > 0


@pytest.mark.integration
def test_a_cluster_python_without_raypress_deps_is_named_before_submitting(ray_head, python_switch, tmp_path):
    """The job's `python` (first on the head's PATH) has ray but not typer or rich: the command
    stops before the pipeline is submitted and names both fixes, no traceback."""
    pipeline = write_pipeline(tmp_path / "pipeline")
    head = ray_head

    def jobs_now() -> list[dict]:
        return api_get(f"{head.url}/api/jobs/", head.token)

    before = {j["submission_id"] for j in jobs_now()}  # the module's other tests' jobs: not this one's
    python_switch.write_text("typer,rich")
    try:
        code, output = submit(head, pipeline, "--run-dir", str(tmp_path / "run"), cwd=pipeline.parent)
    finally:
        python_switch.write_text("")
    jobs = [j for j in jobs_now() if j["submission_id"] not in before]
    assert code == 2, head.explain(output)
    error = next(line for line in output.splitlines() if line.startswith("error: "))
    assert "lacks typer, rich (raypress's dependencies)" in error
    assert "--pip 'typer>=0.12' --pip 'rich>=13'" in error
    assert "cluster.yaml" in error and 'pip install -e "$HOME/raypress"' in error
    assert "Traceback" not in output and "submitted job" not in output
    assert not [j for j in jobs if "raypress_pipeline" in (j.get("metadata") or {})], jobs


def test_core_modules_are_pyprojects_dependencies():
    """The probe checks what the core install provides: no more, no less."""
    import importlib.metadata

    names = {re.split(r"[\[<>=!~ ]", d, maxsplit=1)[0].lower()
             for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]}
    provides = importlib.metadata.packages_distributions()
    assert {provides[m][0].lower() for m in CORE_MODULES} == names


def test_probe_reports_what_this_python_lacks_cannot_see_or_cannot_write(tmp_path):
    """The probe script as the cluster runs it (stdlib only), here."""
    (tmp_path / "seen.jsonl").write_text("{}\n")
    (tmp_path / "probe.py").write_text(PROBE_SCRIPT)
    (tmp_path / "probe.json").write_text(json.dumps({
        "modules": ["json", "no_such_module_rp"],
        "inputs": [["a", str(tmp_path / "seen.jsonl")], ["b", str(tmp_path / "*.jsonl")],
                   ["c", str(tmp_path / "gone.jsonl")], ["d", str(tmp_path / "*.parquet")]],
        "outputs": [["e", str(tmp_path / "new" / "deeper")], ["f", str(tmp_path / "seen.jsonl" / "x")]],
    }))
    proc = subprocess.run([sys.executable, "-S", "probe.py", "probe.json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RAYPRESS_PROBE "))
    report = json.loads(line.removeprefix("RAYPRESS_PROBE "))
    assert list(report["missing"]) == ["no_such_module_rp"]
    assert report["unseen"] == ["c", "d"]
    assert report["unwritable"] == ["f"]
    problems = cluster_problems(report, {"json": None, "no_such_module_rp": ("some_op", "curation")})
    assert len(problems) == 3
    assert "no_such_module_rp (op some_op, extra curation)" in problems[0]
    assert 'pip install -e "$HOME/raypress[curation]"' in problems[0]
    assert "cannot see these inputs, which this machine can: c; d" in problems[1]
    assert "NFS" in problems[1]
    assert "cannot create these outputs: f" in problems[2]


def test_a_python_without_ray_is_told_to_fix_path_not_to_pip():
    report = {"python": "/usr/bin/python3", "version": "3.11.2", "missing": {"ray": "x", "typer": "y"}}
    (message,) = cluster_problems(report | {"unseen": [], "unwritable": []}, {"ray": None, "typer": None})
    assert "has no ray at all" in message and "--pip" not in message
