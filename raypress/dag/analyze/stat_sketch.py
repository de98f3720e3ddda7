"""One stat's distribution as a mergeable sketch: exact count, mean, std, min and max; quantiles
from a KLL sketch (Apache DataSketches; its rank error is stated and tested); and exact counts
(and token sums) per fine bucket, over all rows and over the rows every *other* filter keeps (what
the pipeline would keep as this one threshold moves)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

KLL_K = 200  # rank error ~1.3% at 99% confidence (kll_doubles_sketch.normalized_rank_error)


def _kll():
    from datasketches import kll_doubles_sketch

    return kll_doubles_sketch(KLL_K)


def rank_error() -> float:
    """The KLL sketch's stated normalized rank error for one quantile (99% confidence)."""
    from datasketches import kll_doubles_sketch

    return float(kll_doubles_sketch.get_normalized_rank_error(KLL_K, False))


@dataclass
class BucketCounts:
    """Sparse per-bucket sums, as a block produces them (bucket index -> count, tokens)."""

    index: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    count: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    tokens: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))

    @classmethod
    def of(cls, buckets: np.ndarray, tokens: np.ndarray) -> "BucketCounts":
        index, inverse = np.unique(buckets, return_inverse=True)
        return cls(index.astype(np.int64), np.bincount(inverse, minlength=len(index)).astype(np.int64),
                   np.bincount(inverse, weights=tokens, minlength=len(index)))

    def add_into(self, count: np.ndarray, tokens: np.ndarray) -> None:
        np.add.at(count, self.index, self.count)
        np.add.at(tokens, self.index, self.tokens)


@dataclass
class StatSketch:
    """A stat over some rows; ``merge`` of two equals the sketch of their union."""

    n_buckets: int
    count: int = 0
    nulls: int = 0
    mean: float = 0.0
    m2: float = 0.0  # sum of squared deviations (Chan et al.'s parallel variance)
    minimum: float = float("inf")
    maximum: float = float("-inf")
    kll: bytes = b""
    all_rows: BucketCounts | None = None
    others_keep: BucketCounts | None = None
    _dense: dict = field(default_factory=dict, repr=False)  # after merging: dense arrays

    @classmethod
    def of(cls, values: np.ndarray, nulls: int, buckets: np.ndarray, tokens: np.ndarray,
           others_keep: np.ndarray | None, n_buckets: int) -> "StatSketch":
        s = cls(n_buckets, nulls=nulls)
        if len(values):
            s.count = int(len(values))
            s.mean = float(values.mean())
            s.m2 = float(((values - s.mean) ** 2).sum())
            s.minimum, s.maximum = float(values.min()), float(values.max())
            kll = _kll()
            kll.update(values.astype(np.float64))
            s.kll = kll.serialize()
        s.all_rows = BucketCounts.of(buckets, tokens)
        if others_keep is not None:
            s.others_keep = BucketCounts.of(buckets[others_keep], tokens[others_keep])
        return s

    def merge(self, other: "StatSketch") -> None:
        """Fold ``other`` into this sketch (this one becomes dense: the driver's accumulator)."""
        self.nulls += other.nulls
        if other.count:
            n = self.count + other.count
            delta = other.mean - self.mean
            self.m2 += other.m2 + delta * delta * self.count * other.count / n
            self.mean += delta * other.count / n
            self.count = n
            self.minimum, self.maximum = min(self.minimum, other.minimum), max(self.maximum, other.maximum)
            if self.kll:
                from datasketches import kll_doubles_sketch

                merged = kll_doubles_sketch.deserialize(self.kll)
                merged.merge(kll_doubles_sketch.deserialize(other.kll))
                self.kll = merged.serialize()
            else:
                self.kll = other.kll
        for name in ("all_rows", "others_keep"):
            self._fold(name, getattr(self, name))
            self._fold(name, getattr(other, name))
            setattr(self, name, None)
        for name, (count, tokens) in other._dense.items():  # a merged sketch (a task's) is dense
            mine_count, mine_tokens = self._dense_of(name)
            np.add(mine_count, count, out=mine_count)
            np.add(mine_tokens, tokens, out=mine_tokens)

    def _dense_of(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in self._dense:
            self._dense[name] = (np.zeros(self.n_buckets, np.int64), np.zeros(self.n_buckets, np.float64))
        return self._dense[name]

    def _fold(self, name: str, sparse: BucketCounts | None) -> None:
        if sparse is not None:
            sparse.add_into(*self._dense_of(name))

    def densify(self) -> None:
        for name in ("all_rows", "others_keep"):
            self._fold(name, getattr(self, name))
            setattr(self, name, None)

    def dense(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(count, tokens) per fine bucket over ``all_rows`` or ``others_keep``."""
        self.densify()
        return self._dense_of(name)

    @property
    def std(self) -> float:
        return float(np.sqrt(self.m2 / self.count)) if self.count else float("nan")

    def quantiles(self, qs: list[float]) -> list[float]:
        if not self.kll:
            return [float("nan")] * len(qs)
        from datasketches import kll_doubles_sketch

        return [float(x) for x in kll_doubles_sketch.deserialize(self.kll).get_quantiles(qs)]

    def rank(self, value: float, inclusive: bool = True) -> float:
        """Estimated fraction of values ``<= value`` (``< value`` when not inclusive)."""
        if not self.kll:
            return float("nan")
        from datasketches import kll_doubles_sketch

        return float(kll_doubles_sketch.deserialize(self.kll).get_rank(value, inclusive))
