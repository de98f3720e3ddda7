"""A supervised `raypress run` parses its pipeline once per process (CLI subprocesses, each with
its own embedded Ray)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

COUNTER = '''\
import atexit, os
import raypress.dag.spec as _spec
_count = [0]
_real = _spec.load_located
def _counted(*a, **k):
    _count[0] += 1
    return _real(*a, **k)
_spec.load_located = _counted
atexit.register(lambda: _count[0] and open(os.environ["PARSE_LOG"], "a").write(f"{os.getpid()} {_count[0]}\\n"))
'''


@pytest.mark.integration
def test_a_supervised_run_parses_its_pipeline_once_per_process(tmp_path):
    """`raypress run` is two processes (the supervisor and the run): each parses a pipeline file at
    most once, the child the resolved file; a direct run of that file does the same."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(COUNTER)
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"text": t}) + "\n" for t in ("one two three", "four")))
    source = tmp_path / "p.yaml"
    source.write_text(f"nodes:\n  - {{id: a, op: read_jsonl, with: {{paths: [{data}]}}}}\n"
                      "  - {id: b, op: words_num_filter, input: a, with: {min_num: 2}}\n"
                      "  - {id: out, op: write_jsonl, input: b, with: {path: '{run_dir}/out'}}\n")
    log = tmp_path / "parses.log"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(PARSE_LOG=str(log), PYTHONPATH=os.pathsep.join([str(hook), env.get("PYTHONPATH", "")]))
    for args in ([str(source), "--run-dir", str(tmp_path / "run")], [str(tmp_path / "run" / "pipeline.yaml")]):
        log.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, "-m", "raypress.cli", "run", *args], env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        counts = [int(line.split()[1]) for line in log.read_text().splitlines()]
        assert counts == [1, 1], counts  # the child's line first (it ends first), then the supervisor's
