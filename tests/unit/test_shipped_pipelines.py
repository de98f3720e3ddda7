"""Every pipeline shipped in pipelines/ validates (the quickstart also runs in tests/e2e)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raypress.dag.plan import make_plan
from raypress.dag.validate import load_pipeline

PIPELINES = sorted((Path(__file__).resolve().parents[2] / "pipelines").glob("*.yaml"))


@pytest.mark.parametrize("path", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_pipeline_validates_and_plans(path):
    vp = load_pipeline(path)
    plan = make_plan(vp)
    assert plan.steps and vp.order
