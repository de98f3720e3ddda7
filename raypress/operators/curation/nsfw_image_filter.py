"""nsfw_image_filter: drop a document when any of its images shows exposed nudity (NudeNet).

MINT-1T removes documents holding an NSFW image.  The detector here is NudeNet's
``NudeDetector`` (a YOLO-style ONNX model, ``320n.onnx``, shipped in the ``nudenet`` wheel, run
by onnxruntime on the CPU): it returns boxes labelled with body-part classes.  An image is
flagged when a box of one of ``classes`` (the *_EXPOSED genital, breast, anus and buttock
classes by default) scores >= ``threshold``.

Images are decoded with OpenCV (what NudeNet uses itself), falling back to Pillow for formats
OpenCV lacks (GIF...); bytes neither can decode score 0 and are counted, never raised.
"""

from __future__ import annotations

import io
import os
from typing import Any, Sequence

import numpy as np
import pyarrow as pa
from pydantic import Field, PositiveInt, field_validator

from raypress.operators.base import Filter, Params, Resources
from raypress.operators.registry import register

# NudeNet 3.4's labels (nudenet.nudenet.__labels), in the model's class order.
NUDENET_CLASSES = (
    "FEMALE_GENITALIA_COVERED", "FACE_FEMALE", "BUTTOCKS_EXPOSED", "FEMALE_BREAST_EXPOSED",
    "FEMALE_GENITALIA_EXPOSED", "MALE_BREAST_EXPOSED", "ANUS_EXPOSED", "FEET_EXPOSED",
    "BELLY_COVERED", "FEET_COVERED", "ARMPITS_COVERED", "ARMPITS_EXPOSED", "FACE_MALE",
    "BELLY_EXPOSED", "MALE_GENITALIA_EXPOSED", "ANUS_COVERED", "FEMALE_BREAST_COVERED",
    "BUTTOCKS_COVERED",
)
DEFAULT_NSFW_CLASSES = (
    "FEMALE_GENITALIA_EXPOSED", "MALE_GENITALIA_EXPOSED", "FEMALE_BREAST_EXPOSED",
    "ANUS_EXPOSED", "BUTTOCKS_EXPOSED",
)


class NsfwImageParams(Params):
    threshold: float = Field(
        default=0.5, gt=0.0, le=1.0,
        description="an image is flagged when a detection of one of `classes` scores >= this "
        "(NudeNet itself discards detections below 0.2, so lower values act as 0.2)",
    )
    classes: list[str] = Field(
        default=list(DEFAULT_NSFW_CLASSES), description="NudeNet classes that count as NSFW"
    )
    num_threads: PositiveInt = Field(default=1, description="onnxruntime intra-op threads per actor")
    batch_size: PositiveInt = Field(default=8, description="images per ONNX inference call")

    @field_validator("classes")
    @classmethod
    def _known(cls, values: list[str]) -> list[str]:
        unknown = sorted(set(values) - set(NUDENET_CLASSES))
        if unknown or not values:
            raise ValueError(f"unknown NudeNet classes {unknown}; known: {', '.join(NUDENET_CLASSES)}")
        return values


def load_detector(num_threads: int) -> Any:
    """NudeNet's detector with its ONNX session limited to ``num_threads`` CPU threads (NudeNet's
    own constructor takes every core, which oversubscribes an actor pool)."""
    import onnxruntime
    from nudenet import NudeDetector
    from nudenet import nudenet as nudenet_module

    detector = NudeDetector()
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = num_threads
    opts.inter_op_num_threads = 1
    model = os.path.join(os.path.dirname(nudenet_module.__file__), "320n.onnx")
    detector.onnx_session = onnxruntime.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
    return detector


def decode_bgr(data: bytes | None) -> np.ndarray | None:
    """A 3-channel BGR uint8 array (NudeNet's input, as cv2.imread gives), or None if undecodable."""
    if not data:
        return None
    import cv2

    mat = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    if mat is not None and mat.size:
        return mat
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as im:
            rgb = np.asarray(im.convert("RGB"))
    except Exception:  # noqa: BLE001 - Pillow raises many kinds for bad bytes: unreadable
        return None
    return np.ascontiguousarray(rgb[:, :, ::-1]) if rgb.size else None


@register("nsfw_image_filter",
          requires={"nudenet": "curation", "onnxruntime": "curation", "cv2": "curation", "PIL": "curation"})
class NsfwImageFilter(Filter[NsfwImageParams]):
    """Drop documents with an image NudeNet flags (a detection of an exposed class scoring >=
    threshold); unreadable images score 0 and are counted in nsfw_unreadable_images."""

    reads = ("images", "image_bytes")
    stateful = True
    resources = Resources(num_cpus=1)
    stat_names = ("nsfw_max_score", "nsfw_unreadable_images")

    def __init__(self, params: NsfwImageParams, artifacts=None):
        super().__init__(params, artifacts)
        self.classes = frozenset(params.classes)
        self.detector = load_detector(params.num_threads)

    def image_scores(self, images: list[np.ndarray]) -> list[float]:
        """Per image: the highest score among detections of ``classes`` (0.0 when none)."""
        if not images:
            return []
        detections = self.detector.detect_batch(images, batch_size=self.params.batch_size)
        return [max((d["score"] for d in dets if d["class"] in self.classes), default=0.0) for dets in detections]

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        refs = table.column("images").to_pylist()
        blobs = table.column("image_bytes").to_pylist()
        best = [0.0] * table.num_rows
        unreadable = [0] * table.num_rows
        pending: list[np.ndarray] = []  # decoded images waiting for one inference call
        owner: list[int] = []

        def flush() -> None:
            for row, score in zip(owner, self.image_scores(pending)):
                best[row] = max(best[row], float(score))
            pending.clear()
            owner.clear()

        for row, (row_refs, row_blobs) in enumerate(zip(refs, blobs)):
            row_refs = row_refs or []
            row_blobs = row_blobs or [None] * len(row_refs)
            for ref, data in zip(row_refs, row_blobs):
                if ref is None:
                    continue
                mat = decode_bgr(data)
                if mat is None:
                    unreadable[row] += 1
                    continue
                pending.append(mat)
                owner.append(row)
                if len(pending) >= self.params.batch_size:  # bounded memory: decoded pixels are large
                    flush()
        flush()
        return {"nsfw_max_score": best, "nsfw_unreadable_images": unreadable}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        t = self.params.threshold
        return ["nsfw_image" if score >= t else None for score in stats["nsfw_max_score"]]
