"""nsfw_image_filter: drop a document when any of its images shows exposed nudity (NudeNet).

MINT-1T removes documents holding an NSFW image.  The detector here is NudeNet's
``NudeDetector`` (a YOLO-style ONNX model, ``320n.onnx``, shipped in the ``nudenet`` wheel, run
by onnxruntime on the CPU): it returns boxes labelled with body-part classes.  An image is
flagged when a box of one of ``classes`` (the *_EXPOSED genital, breast, anus and buttock
classes by default) scores >= ``threshold``.

Images are decoded with OpenCV (what NudeNet uses itself), falling back to Pillow for formats
OpenCV lacks (GIF...); bytes neither can decode score 0 and are counted, never raised.

Speed (the op was 62% of the MINT-1T HTML pipeline): NudeNet's own post-processing loops over
the model's 2,100 anchors in Python (~7 ms of its ~20 ms per image); ``nudenet_detections``
does the same arithmetic on arrays and the same class-agnostic ``cv2.dnn.NMSBoxes``, giving
identical detections (checked image by image against ``NudeDetector.detect_batch``).  An actor
scores each distinct image once (a documentation site repeats its figures and logos).
"""

from __future__ import annotations

import hashlib
import io
import os
from collections import OrderedDict
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
    batch_size: PositiveInt = Field(
        default=1, description="images per ONNX inference call (on a CPU one at a time is fastest: "
        "15 ms per image against 17 ms in batches of 8 and 20 ms in batches of 32, measured here)")
    cache_images: int = Field(
        default=100_000, ge=0, description="distinct images (by SHA-1 of their bytes) whose score an actor remembers")

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


NUDENET_INPUT = 320  # the 320n model's square input side
NUDENET_MIN_SCORE = 0.2  # NudeNet keeps anchors whose best class scores at least this
NUDENET_NMS = (0.25, 0.45)  # NudeNet's cv2.dnn.NMSBoxes score threshold and IoU


def nudenet_detections(output: np.ndarray, x_pad: int, y_pad: int, width: int, height: int) -> list[tuple[str, float]]:
    """(class, score) of each detection NudeNet's ``_postprocess`` returns for one image's output
    (shape 22 x anchors), computed on arrays: the same float32 arithmetic, clipping and NMS."""
    rows = output.T
    scores_all = rows[:, 4:]
    best = scores_all.max(axis=1)
    keep = best >= NUDENET_MIN_SCORE
    if not keep.any():
        return []
    rows, best, class_ids = rows[keep], best[keep], scores_all[keep].argmax(axis=1)
    w, h = rows[:, 2], rows[:, 3]
    x = (rows[:, 0] - w / 2) * (width + x_pad) / NUDENET_INPUT
    y = (rows[:, 1] - h / 2) * (height + y_pad) / NUDENET_INPUT
    w = w * (width + x_pad) / NUDENET_INPUT
    h = h * (height + y_pad) / NUDENET_INPUT
    x = np.clip(x, 0, width)
    y = np.clip(y, 0, height)
    w = np.minimum(w, width - x)
    h = np.minimum(h, height - y)
    boxes = np.stack([x, y, w, h], axis=1).tolist()
    kept = cv2_nms(boxes, best.tolist())
    return [(NUDENET_CLASSES[class_ids[i]], float(best[i])) for i in kept]


def cv2_nms(boxes: list[list[float]], scores: list[float]) -> list[int]:
    import cv2

    return [int(i) for i in cv2.dnn.NMSBoxes(boxes, scores, *NUDENET_NMS)]


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
        self.input_name = self.detector.onnx_session.get_inputs()[0].name
        self.scored: OrderedDict[bytes, float] = OrderedDict()  # SHA-1 of the bytes -> score

    def detections(self, images: list[np.ndarray]) -> list[list[tuple[str, float]]]:
        """NudeNet's detections, (class, score), per image: its own preprocessing, the model in
        batches of ``batch_size``, array post-processing (see ``nudenet_detections``)."""
        from nudenet.nudenet import _read_image

        out: list[list[tuple[str, float]]] = []
        for start in range(0, len(images), self.params.batch_size):
            prepared = [_read_image(image, NUDENET_INPUT) for image in images[start:start + self.params.batch_size]]
            batch = np.vstack([p[0] for p in prepared])
            outputs = self.detector.onnx_session.run(None, {self.input_name: batch})[0]
            for j, (_, _, _, x_pad, y_pad, width, height) in enumerate(prepared):
                out.append(nudenet_detections(outputs[j], x_pad, y_pad, width, height))
        return out

    def image_scores(self, images: list[np.ndarray]) -> list[float]:
        """Per image: the highest score among detections of ``classes`` (0.0 when none)."""
        return [max((score for name, score in dets if name in self.classes), default=0.0)
                for dets in self.detections(images)]

    def remember(self, key: bytes, score: float) -> None:
        self.scored[key] = score
        if len(self.scored) > self.params.cache_images:
            self.scored.popitem(last=False)

    def compute_stats(self, table: pa.Table) -> dict[str, Sequence[Any]]:
        refs = table.column("images").to_pylist()
        blobs = table.column("image_bytes").to_pylist()
        best = [0.0] * table.num_rows
        unreadable = [0] * table.num_rows
        pending: list[np.ndarray] = []  # decoded images waiting for one inference call
        owners: list[list[int]] = []  # the rows holding each pending image
        keys: list[bytes] = []
        waiting: dict[bytes, int] = {}  # key -> index in pending (a repeat within the batch)

        def flush() -> None:
            for rows, key, score in zip(owners, keys, self.image_scores(pending)):
                self.remember(key, float(score))
                for row in rows:
                    best[row] = max(best[row], float(score))
            pending.clear()
            owners.clear()
            keys.clear()
            waiting.clear()

        for row, (row_refs, row_blobs) in enumerate(zip(refs, blobs)):
            row_refs = row_refs or []
            row_blobs = row_blobs or [None] * len(row_refs)
            for ref, data in zip(row_refs, row_blobs):
                if ref is None:
                    continue
                key = hashlib.sha1(data).digest() if data else b""
                known = self.scored.get(key) if data else None
                if known is not None:
                    best[row] = max(best[row], known)
                    continue
                if key in waiting:
                    owners[waiting[key]].append(row)
                    continue
                mat = decode_bgr(data)
                if mat is None:
                    unreadable[row] += 1
                    continue
                waiting[key] = len(pending)
                pending.append(mat)
                owners.append([row])
                keys.append(key)
                if len(pending) >= max(self.params.batch_size, 8):  # bounded memory: decoded pixels are large
                    flush()
        flush()
        return {"nsfw_max_score": best, "nsfw_unreadable_images": unreadable}

    def drop_reasons(self, stats: dict[str, Sequence[Any]]) -> list[str | None]:
        t = self.params.threshold
        return ["nsfw_image" if score >= t else None for score in stats["nsfw_max_score"]]
