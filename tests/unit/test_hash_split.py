"""hash_split_filter: two branches (sample / rest) partition the rows exactly, stably, near the fraction."""

from __future__ import annotations

import pyarrow as pa
import pytest

from raypress.operators.general.hash_split_filter import HashSplitFilter, HashSplitParams


def _kept(params: HashSplitParams, ids: list[str]) -> tuple[set[str], list[str | None]]:
    op = HashSplitFilter(params)
    reasons = op.drop_reasons(op.compute_stats(pa.table({"id": ids})))
    return {i for i, r in zip(ids, reasons) if r is None}, reasons


def test_sample_and_rest_partition_the_rows():
    ids = [f"doc-{i}" for i in range(5000)]
    sample, sample_reasons = _kept(HashSplitParams(fraction=0.2, keep="sample"), ids)
    rest, rest_reasons = _kept(HashSplitParams(fraction=0.2, keep="rest"), ids)
    assert sample.isdisjoint(rest) and sample | rest == set(ids)
    assert 0.17 < len(sample) / len(ids) < 0.23
    assert {r for r in sample_reasons if r} == {"not_sampled"} and {r for r in rest_reasons if r} == {"held_out"}


def test_the_split_is_stable_and_the_seed_changes_it():
    ids = [f"doc-{i}" for i in range(2000)]
    first, _ = _kept(HashSplitParams(fraction=0.1), ids)
    again, _ = _kept(HashSplitParams(fraction=0.1), list(reversed(ids)))  # order and batching do not matter
    other, _ = _kept(HashSplitParams(fraction=0.1, seed=1), ids)
    assert first == again and first != other


def test_fraction_bounds_are_validated():
    with pytest.raises(ValueError):
        HashSplitParams(fraction=1.0)
