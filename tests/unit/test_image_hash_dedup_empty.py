"""image_hash_dedup's reduce step on the empty, column-less blocks Ray hands over for empty inputs."""

import pyarrow as pa

from raypress.operators.dedup.image_hash_dedup import frequent_in


def test_frequent_in_survives_empty_pieces():
    empty = pa.table({})
    counts = pa.table({"sha256": ["a", "b"], "documents": pa.array([11, 3], pa.int64())})
    assert frequent_in(10, empty) == []
    assert frequent_in(10, empty, counts) == ["a"]
