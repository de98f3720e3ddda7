"""Every shipped pipeline runs from a fresh clone: its default inputs are inside the repository.

A clone that does not sit beside `../shared` must still run `raypress run pipelines/X.yaml`, so no
pipeline may read from outside the repository by default, and every input glob it names must match
files that are committed (large corpora stay behind `--set`)."""

from __future__ import annotations

import glob
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PIPELINES = sorted((REPO / "pipelines").glob("*.yaml"))
GENERATED = ("{run_dir}", ".venv/")  # outputs, and the quickstart's installed package metadata


def input_paths(spec: dict) -> list[str]:
    out = []
    for node in spec.get("nodes", []):
        params = node.get("with") or {}
        if node.get("op", "").startswith("write_"):
            continue
        for key in ("paths", "path", "data_files"):
            value = params.get(key)
            if isinstance(value, str) and not value.startswith("${"):
                out.append(value)
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, str))
    return out


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.name for p in PIPELINES])
def test_default_inputs_are_committed_files(pipeline):
    spec = yaml.safe_load(pipeline.read_text())
    for path in input_paths(spec):
        assert ".." not in Path(path).parts, f"{pipeline.name} reads {path!r} outside the repository"
        if any(g in path for g in GENERATED):
            continue
        assert glob.glob(str(REPO / path), recursive=True), f"{pipeline.name}: {path!r} matches no file"
