"""Writers called the way the runner calls them (write_batch per part, then finalize), no Ray."""

from __future__ import annotations

import base64
import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raypress.operators.base import RunContext
from raypress.operators.io.parts.atomic import atomic_path
from raypress.operators.io.write_hf_dataset import WriteHfDataset
from raypress.operators.io.write_jsonl import WriteJsonl
from raypress.operators.io.write_parquet import WriteParquet
from raypress.operators.registry import _REGISTRY


def sample(ids: list[str]) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": ids,
            "text": [f"héllo {i}" for i in range(n)],
            "n": list(range(n)),
            "meta": [{"lang": "en", "score": 0.5 + i} for i in range(n)],
            "tags": [["a", "b"][: i % 3] for i in range(n)],
            "blob": [bytes([i, 255]) for i in range(n)],
            "when": pa.array([dt.datetime(2024, 1, 2, 3, 4, 5)] * n, pa.timestamp("us")),
        }
    )


def write(writer_cls, dest: Path, tables: dict[str, pa.Table]):
    op = writer_cls(writer_cls.Params(path=str(dest)))
    dest.mkdir(parents=True, exist_ok=True)
    for part, table in tables.items():
        op.write_batch(table, str(dest), part)
    op.finalize(str(dest), RunContext(run_dir=str(dest.parent), node_id="w"))
    return op


def no_temp_files(dest: Path) -> bool:
    return not [p for p in dest.rglob("*") if p.name.endswith(".tmp")]


def test_writers_are_registered():
    assert _REGISTRY["write_jsonl"] is WriteJsonl
    assert _REGISTRY["write_parquet"] is WriteParquet
    assert _REGISTRY["write_hf_dataset"] is WriteHfDataset


def test_jsonl_one_object_per_line_nested_as_json_bytes_as_base64(tmp_path):
    dest = tmp_path / "out"
    write(WriteJsonl, dest, {"0": sample(["a", "b"]), "1": sample(["c", "d", "e"])})
    files = sorted(dest.glob("*.jsonl"))
    assert [f.name for f in files] == ["part-0.jsonl", "part-1.jsonl"]
    rows = [json.loads(line) for f in files for line in f.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["a", "b", "c", "d", "e"]
    first = rows[0]
    assert first["text"] == "héllo 0"
    assert first["meta"] == {"lang": "en", "score": 0.5}
    assert [r["tags"] for r in rows] == [[], ["a"], [], ["a"], ["a", "b"]]
    assert base64.b64decode(first["blob"]) == bytes([0, 255])
    assert first["when"] == "2024-01-02T03:04:05"
    assert "héllo" in files[0].read_text(encoding="utf-8")  # written as UTF-8, not \u escapes
    assert no_temp_files(dest)


def test_jsonl_empty_batch_writes_no_file(tmp_path):
    dest = tmp_path / "out"
    write(WriteJsonl, dest, {"0": sample([])})
    assert list(dest.iterdir()) == []


def test_parquet_parts_read_back_equal(tmp_path):
    dest = tmp_path / "out"
    a, b = sample(["a", "b"]), sample(["c"])
    write(WriteParquet, dest, {"p0": a, "p1": b})
    assert sorted(p.name for p in dest.iterdir()) == ["part-p0.parquet", "part-p1.parquet"]
    back = pq.read_table(dest / "part-p0.parquet")
    assert back.equals(a)
    assert pq.ParquetFile(dest / "part-p0.parquet").metadata.row_group(0).column(0).compression == "ZSTD"
    assert no_temp_files(dest)


def test_parquet_empty_batch_keeps_schema(tmp_path):
    dest = tmp_path / "out"
    write(WriteParquet, dest, {"0": sample([])})
    back = pq.read_table(dest / "part-0.parquet")
    assert back.num_rows == 0 and back.schema == sample([]).schema


@pytest.mark.parametrize("bad", ["", "a/b", "..", "."])
def test_part_must_be_a_plain_name(tmp_path, bad):
    op = WriteParquet(WriteParquet.Params(path=str(tmp_path)))
    with pytest.raises(ValueError, match="part"):
        op.write_batch(sample(["a"]), str(tmp_path), bad)


def test_failed_write_leaves_no_file(tmp_path):
    final = tmp_path / "part-x.jsonl"
    with pytest.raises(RuntimeError):
        with atomic_path(final) as tmp:
            tmp.write_text("half")
            raise RuntimeError("worker died mid-write")
    assert list(tmp_path.iterdir()) == []


def test_hf_dataset_loads_with_datasets(tmp_path):
    import datasets

    dest = tmp_path / "hf"
    # a column that is all-null in one part and typed in another must still unify
    first = sample(["a", "b"]).append_column("label", pa.nulls(2))
    second = sample(["c"]).append_column("label", pa.array(["x"]))
    write(WriteHfDataset, dest, {"0": first, "1": second})
    loaded = datasets.load_from_disk(str(dest))
    assert isinstance(loaded, datasets.Dataset)
    assert loaded["id"] == ["a", "b", "c"]
    assert loaded["label"] == [None, None, "x"]
    assert loaded[0]["meta"] == {"lang": "en", "score": 0.5}
    assert loaded[2]["blob"] == bytes([0, 255])
    assert not (dest / WriteHfDataset.PARTS).exists()
    assert not list(dest.rglob("*.parquet"))


def test_hf_dataset_with_no_rows_is_still_loadable(tmp_path):
    import datasets

    dest = tmp_path / "hf"
    write(WriteHfDataset, dest, {})
    loaded = datasets.load_from_disk(str(dest))
    assert len(loaded) == 0 and loaded.column_names == ["id"]


def test_hf_dataset_from_empty_parts_keeps_their_columns(tmp_path):
    import datasets

    dest = tmp_path / "hf"
    write(WriteHfDataset, dest, {"0": sample([])})
    loaded = datasets.load_from_disk(str(dest))
    assert len(loaded) == 0 and loaded.column_names == sample([]).column_names


def test_writer_params_reject_unknown_keys_and_document_every_field():
    with pytest.raises(ValueError):
        WriteJsonl.Params(path="x", compresion="gzip")
    for cls in (WriteJsonl, WriteParquet, WriteHfDataset):
        assert all(f.description for f in cls.Params.model_fields.values())
        assert cls(cls.Params(path="x")).columns_written() == ()
