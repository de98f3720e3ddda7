"""Make synthetic_positive.png: abstract colour noise that NudeNet's real detector flags as NSFW.

Why: the NSFW filter must be shown a positive, and a test suite must not ship explicit images. A
(1+8) evolution strategy over a 24x24 RGB grid (bicubically upsampled to 320x320, NudeNet's input
size) maximises the detector's highest score among the default NSFW classes, from seed 0, until it
passes 0.6: the detector's own blind spot, found in about 60 generations (~15 s on one core). The
PNG is lossless, so the test sees exactly these pixels.

    python tests/data/nsfw/make_synthetic_positive.py tests/data/nsfw/synthetic_positive.png
"""

from __future__ import annotations

import sys

import cv2
import numpy as np

from raypress.operators.curation.nsfw_image_filter import DEFAULT_NSFW_CLASSES, load_detector


def main(out: str) -> None:
    detector = load_detector(1)
    classes = set(DEFAULT_NSFW_CLASSES)
    rng = np.random.default_rng(0)

    def render(grid: np.ndarray) -> np.ndarray:
        return cv2.resize(grid, (320, 320), interpolation=cv2.INTER_CUBIC).clip(0, 255).astype(np.uint8)

    def score(grid: np.ndarray) -> float:
        found = detector.detect_batch([render(grid)], batch_size=1)[0]
        return max((d["score"] for d in found if d["class"] in classes), default=0.0)

    best, best_score = None, -1.0
    population = [rng.uniform(60, 230, (24, 24, 3)).astype(np.float32) for _ in range(8)]
    for _ in range(400):
        for grid in population:
            s = score(grid)
            if s > best_score:
                best, best_score = grid.copy(), s
        if best_score >= 0.6:
            break
        sigma = 25 if best_score < 0.2 else 12
        population = [best + rng.normal(0, sigma, best.shape).astype(np.float32) for _ in range(8)]
    cv2.imwrite(out, render(best))
    print(f"{out}: best score {best_score:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
