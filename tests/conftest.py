"""Shared fixtures: one local Ray session for the whole test run, and the shared sample data."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from raypress.operators.registry import add_op_package

# what `raypress.cli.main` does for a real run: serving's ops (serve_llm) join the registry from the top
add_op_package("raypress.serving")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("RAYPRESS_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def ray_session():
    """One embedded Ray for every integration/e2e test (starting Ray costs ~4 s here)."""
    from raypress.dag.ray_session import ensure_ray

    ensure_ray(num_cpus=2)
    yield
    # left running until the interpreter exits: shutting down and restarting costs more


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """`../shared/data`; tests that need it skip cleanly when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared sample data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """One tiny random MoE checkpoint for the tests that serve or generate with it (read-only)."""
    import torch
    from moe_fixtures import save_tiny_model_dir

    torch.set_num_threads(1)
    return save_tiny_model_dir(tmp_path_factory.mktemp("tiny"))
