"""read_model: a Model directory already on disk as a node of the pipeline.

Why: a model trained by an earlier run (``train_moe_lm``'s output folder, with its
``raypress_model.json``) can then be served (``serve_llm``), benchmarked or trained further in a
pipeline that does not train it again: the LLM ops of a curation pipeline, for one, call a model
served from such a directory.  Nothing is copied; the directory is checked when the node runs."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from raypress.artifacts import Artifact, ModelArtifact
from raypress.operators.base import Params, RunContext, Stage
from raypress.operators.registry import register
from raypress.schema import ArtifactType


class ReadModelParams(Params):
    path: str = Field(min_length=1, description="a Model directory (one holding raypress_model.json, as "
                                                "train_moe_lm writes); relative paths are the pipeline's")


@register("read_model")
class ReadModel(Stage[ReadModelParams]):
    """A Model directory on disk as a Model artifact (to serve, benchmark or train further)."""

    inputs: ClassVar[dict[str, ArtifactType]] = {}
    output = ArtifactType.MODEL
    resumable = False  # reading costs nothing, and the directory may have changed since the last run

    def run(self, inputs: dict[str, Artifact], ctx: RunContext) -> ModelArtifact:
        path = Path(self.params.path)
        if not (path / ModelArtifact.MANIFEST).is_file():
            what = "does not exist" if not path.exists() else f"holds no {ModelArtifact.MANIFEST}"
            raise FileNotFoundError(f"read_model: {str(path)!r} {what}; give the folder train_moe_lm wrote "
                                    "(its Model artifact)")
        return ModelArtifact.load(str(path))
