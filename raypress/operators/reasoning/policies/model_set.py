"""The Model a ``train_policies`` run writes: K policy Model directories under one manifest.

Why its own module: the search, the evaluation, collective SFT and the ``reason`` Serve app all
turn such a Model (or a single Model) into policy directories, without importing the training op.
"""

from __future__ import annotations

from pathlib import Path

from raypress.artifacts import ModelArtifact

KIND = "policy_set"


def policy_dirs(artifact: ModelArtifact) -> dict[str, str]:
    """Policy name -> Model dir, from a ``train_policies`` Model (or a single Model as one policy)."""
    config = artifact.config or ModelArtifact.load(artifact.path).config
    if config.get("kind") == KIND:
        return {name: config["policies"][name]["path"] for name in config["order"]}
    return {Path(artifact.path).name: artifact.path}
