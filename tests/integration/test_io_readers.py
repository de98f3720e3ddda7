"""Readers on real files through the shared Ray session: ids, tombstones, offline HF loading."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from raypress.operators.base import RunContext
from raypress.operators.io.read_hf_dataset import ReadHfDataset
from raypress.operators.io.read_jsonl import ReadJsonl, read_jsonl_file
from raypress.operators.io.read_package_metadata import ReadPackageMetadata, parse_metadata
from raypress.operators.io.read_parquet import ReadParquet
from raypress.operators.io.read_text_files import ReadTextFiles
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL, TOMBSTONE_COLS

pytestmark = pytest.mark.integration


def read(cls, tmp_path: Path, **params) -> list[dict]:
    op = cls(cls.Params(**params))
    ds = op.read(RunContext(run_dir=str(tmp_path / "run"), node_id="r"))
    return sorted(ds.take_all(), key=lambda r: r["id"])


def live(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r[NODE_COL] is None]


def dead(rows: list[dict]) -> dict[str, dict]:
    return {r["id"]: r for r in rows if r[NODE_COL] is not None}


def test_readers_are_registered():
    from raypress.operators.registry import _REGISTRY

    names = ["read_jsonl", "read_parquet", "read_hf_dataset", "read_text_files", "read_package_metadata"]
    classes = [ReadJsonl, ReadParquet, ReadHfDataset, ReadTextFiles, ReadPackageMetadata]
    assert [_REGISTRY[n] for n in names] == classes


def write_lines(path: Path, lines: list[str | bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) + b"\n"
    path.write_bytes(gzip.compress(data) if path.suffix == ".gz" else data)


# ---- jsonl -------------------------------------------------------------------------------------

MESSY = [
    json.dumps({"text": "first", "n": 1, "meta": {"lang": "en"}}),
    "{not json at all",
    "",
    "[1, 2, 3]",
    json.dumps({"text": "fourth", "n": "four"}),  # n contradicts the column's int type
    json.dumps({"text": "fifth", "n": 5}),
    b'{"text": "\xff\xfe"}',  # not UTF-8
]


def test_jsonl_bad_lines_become_tombstones_and_good_lines_survive(tmp_path, ray_session, monkeypatch):
    write_lines(tmp_path / "data" / "messy.jsonl", MESSY)
    write_lines(tmp_path / "data" / "more.jsonl.gz", [json.dumps({"text": f"gz {i}", "n": i}) for i in range(3)])
    monkeypatch.chdir(tmp_path)  # ids use the path as matched by the relative pattern
    rows = read(ReadJsonl, tmp_path, paths=["data/*.jsonl", "data/*.jsonl.gz"])

    assert all(set(TOMBSTONE_COLS) <= set(r) for r in rows)
    good = {r["id"]: r for r in live(rows)}
    assert set(good) == {"data/messy.jsonl:1", "data/messy.jsonl:6"} | {f"data/more.jsonl.gz:{i}" for i in (1, 2, 3)}
    assert good["data/messy.jsonl:1"]["text"] == "first"
    assert good["data/messy.jsonl:1"]["meta"] == {"lang": "en"}
    assert good["data/messy.jsonl:6"]["n"] == 5
    assert good["data/more.jsonl.gz:3"]["text"] == "gz 2"

    bad = dead(rows)
    assert set(bad) == {"data/messy.jsonl:2", "data/messy.jsonl:4", "data/messy.jsonl:5", "data/messy.jsonl:7"}
    assert {r[KIND_COL] for r in bad.values()} == {"error"}
    assert {r[NODE_COL] for r in bad.values()} == {"r"}
    assert bad["data/messy.jsonl:2"][REASON_COL] == "invalid_json"
    assert "{not json at all" in bad["data/messy.jsonl:2"][DETAIL_COL]
    assert "Expecting" in bad["data/messy.jsonl:2"][DETAIL_COL]  # the parser's own message
    assert bad["data/messy.jsonl:4"][REASON_COL] == "invalid_json"
    assert "list" in bad["data/messy.jsonl:4"][DETAIL_COL]
    assert bad["data/messy.jsonl:5"][REASON_COL] == "schema_conflict"
    assert "'n'" in bad["data/messy.jsonl:5"][DETAIL_COL]
    assert bad["data/messy.jsonl:7"][REASON_COL] == "invalid_json"


def test_jsonl_ids_are_stable_and_unique_across_reads(tmp_path, ray_session):
    for k in range(3):
        write_lines(tmp_path / f"part{k}.jsonl", [json.dumps({"text": f"{k}-{i}"}) for i in range(50)])
    first = [r["id"] for r in read(ReadJsonl, tmp_path, paths=[str(tmp_path / "*.jsonl")])]
    second = [r["id"] for r in read(ReadJsonl, tmp_path, paths=[str(tmp_path / "*.jsonl")])]
    assert len(first) == 150 and len(set(first)) == 150
    assert first == second


def test_jsonl_id_key_uses_the_field_and_flags_rows_without_it(tmp_path, ray_session):
    lines = [json.dumps({"doc": 10, "text": "x"}), json.dumps({"text": "no id"}), json.dumps({"doc": 7, "text": "y"})]
    write_lines(tmp_path / "k.jsonl", lines)
    rows = read(ReadJsonl, tmp_path, paths=[str(tmp_path / "k.jsonl")], id_key="doc")
    assert [(r["id"], r["text"]) for r in live(rows)] == [("10", "x"), ("7", "y")]
    (missing,) = dead(rows).values()
    assert missing["id"].endswith("k.jsonl:2") and missing[REASON_COL] == "missing_id"


def test_jsonl_chunks_keep_line_numbers(tmp_path, monkeypatch):
    """Files longer than one chunk are split into several tables without losing or renumbering lines."""
    import raypress.operators.io.read_jsonl as jsonl

    monkeypatch.setattr(jsonl, "CHUNK_LINES", 4)
    path = tmp_path / "long.jsonl"
    write_lines(path, [json.dumps({"i": i}) if i != 6 else "oops" for i in range(10)])
    tables = list(read_jsonl_file("long.jsonl", str(path), node="r", id_key=None))
    assert [t.num_rows for t in tables] == [4, 4, 2]
    ids = [[int(i.rsplit(":", 1)[1]) for i in t.column("id").to_pylist()] for t in tables]
    assert ids == [[1, 2, 3, 4], [5, 6, 8, 7], [9, 10]]  # line 7 is bad: a tombstone at its chunk's end
    assert tables[1].column(REASON_COL).to_pylist() == [None, None, None, "invalid_json"]


def test_unmatched_glob_names_the_pattern(tmp_path, ray_session):
    with pytest.raises(FileNotFoundError, match="nothing-here"):
        read(ReadJsonl, tmp_path, paths=[str(tmp_path / "nothing-here*.jsonl")])


# ---- parquet -----------------------------------------------------------------------------------


def test_parquet_ids_columns_and_id_key(tmp_path, ray_session):
    for k in range(2):
        keys, texts = [f"k{k}-{i}" for i in range(5)], [f"t{i}" for i in range(5)]
        table = pa.table({"key": keys, "text": texts, "n": list(range(5))})
        pq.write_table(table, tmp_path / f"f{k}.parquet", row_group_size=2)
    pattern = str(tmp_path / "*.parquet")

    rows = read(ReadParquet, tmp_path, paths=[pattern])
    assert [r["id"] for r in rows] == [f"{tmp_path}/f{k}.parquet:{i}" for k in range(2) for i in range(5)]
    assert rows[3]["text"] == "t3" and rows[3]["key"] == "k0-3"

    slim = read(ReadParquet, tmp_path, paths=[pattern], columns=["text"], id_key="key")
    assert {tuple(sorted(r)) for r in slim} == {tuple(sorted(("id", "text", *TOMBSTONE_COLS)))}
    assert {r["id"]: r["text"] for r in slim}["k1-4"] == "t4"
    op = ReadParquet(ReadParquet.Params(paths=[pattern], columns=["text"]))
    assert op.columns_written() == ("id", "text")


# ---- text files --------------------------------------------------------------------------------


def test_text_files_one_row_per_file_and_undecodable_ones_are_tombstones(tmp_path, ray_session):
    (tmp_path / "a.txt").write_text("héllo\nworld", encoding="utf-8")
    (tmp_path / "b.txt").write_bytes("caf\xe9".encode("latin-1"))
    rows = read(ReadTextFiles, tmp_path, paths=[str(tmp_path / "*.txt")])
    a, b = rows
    assert a["id"] == a["path"] == str(tmp_path / "a.txt") and a["text"] == "héllo\nworld"
    assert a[NODE_COL] is None
    assert b["id"] == str(tmp_path / "b.txt") and b["text"] is None
    assert (b[KIND_COL], b[REASON_COL]) == ("error", "decode_error")
    assert "utf-8" in b[DETAIL_COL]
    latin = read(ReadTextFiles, tmp_path, paths=[str(tmp_path / "b.txt")], encoding="latin-1")
    assert latin[0]["text"] == "café"
    with pytest.raises(ValueError):
        ReadTextFiles.Params(paths=["x"], encoding="no-such-codec")


# ---- package metadata --------------------------------------------------------------------------


def test_package_metadata_reads_the_venv(tmp_path, ray_session):
    pattern = f"{sys.prefix}/lib/python*/site-packages/*.dist-info/METADATA"
    rows = read(ReadPackageMetadata, tmp_path, paths=[pattern])
    assert len(rows) >= 50
    assert len({r["id"] for r in rows}) == len(rows)
    assert all(r[NODE_COL] is None for r in rows)
    with_text = [r for r in rows if r["text"] and len(r["text"].split()) >= 20]
    assert len(with_text) >= 0.8 * len(rows)
    by_name = {r["name"].lower(): r for r in rows}
    assert by_name["pyarrow"]["version"] and by_name["pyarrow"]["summary"]
    assert sum(r["license"] is not None for r in rows) >= 0.5 * len(rows)


def test_metadata_parser_handles_old_description_header_and_empty_body():
    old = (
        "Metadata-Version: 1.1\nName: old\nVersion: 1.0\nLicense: UNKNOWN\n"
        "Description: One\n       |  two\n        three\n\n"
    )
    row = parse_metadata(old)
    assert (row["name"], row["version"], row["license"]) == ("old", "1.0", None)
    assert row["text"] == "One\n  two\nthree"  # spec folding (7 spaces + '|') and distutils' (8 spaces)
    empty = parse_metadata("Metadata-Version: 2.4\nName: bare\nVersion: 2\nLicense-Expression: MIT\n\n")
    assert empty["text"] == "" and empty["license"] == "MIT"


# ---- Hugging Face datasets ---------------------------------------------------------------------


def test_hf_dataset_from_save_to_disk(tmp_path, ray_session):
    import datasets

    src = datasets.Dataset.from_dict({"text": [f"row {i}" for i in range(12)], "label": [i % 3 for i in range(12)]})
    path = str(tmp_path / "saved")
    src.save_to_disk(path, num_shards=3)
    rows = read(ReadHfDataset, tmp_path, path=path)
    assert len(rows) == 12
    by_id = {r["id"]: r for r in rows}
    assert {by_id[f"{path}:{i}"]["text"] for i in range(12)} == {f"row {i}" for i in range(12)}
    assert all(by_id[f"{path}:{i}"]["text"] == f"row {i}" for i in range(12))  # id = row index in the dataset

    slim = read(ReadHfDataset, tmp_path, path=path, columns=["label"])
    assert set(slim[0]) == {"id", "label", *TOMBSTONE_COLS}


def test_hf_dataset_dict_needs_a_split(tmp_path, ray_session):
    import datasets

    dd = datasets.DatasetDict(
        {"train": datasets.Dataset.from_dict({"text": ["a", "b"]}), "test": datasets.Dataset.from_dict({"text": ["c"]})}
    )
    path = str(tmp_path / "dd")
    dd.save_to_disk(path)
    with pytest.raises(ValueError, match="split"):
        read(ReadHfDataset, tmp_path, path=path)
    rows = read(ReadHfDataset, tmp_path, path=path, split="test")
    assert [(r["id"], r["text"]) for r in rows] == [(f"{path}/test:0", "c")]


def test_hf_dataset_local_builder(tmp_path, ray_session):
    write_lines(tmp_path / "x.jsonl", [json.dumps({"text": f"j{i}"}) for i in range(4)])
    rows = read(ReadHfDataset, tmp_path, builder="json", data_files=[str(tmp_path / "x.jsonl")])
    assert sorted(r["text"] for r in rows) == ["j0", "j1", "j2", "j3"]
    assert len({r["id"] for r in rows}) == 4 and all(r["id"].startswith("json-") for r in rows)
    assert (tmp_path / "run" / "_hf_cache").is_dir()  # the builder's cache stays in the run directory


def test_hf_dataset_refuses_the_hub(tmp_path, ray_session):
    with pytest.raises(FileNotFoundError, match="never downloads"):
        read(ReadHfDataset, tmp_path, path="allenai/c4")
    with pytest.raises(ValueError, match="local"):
        ReadHfDataset.Params(builder="json", data_files=["hf://datasets/x/y.jsonl"])
    with pytest.raises(ValueError, match="exactly one"):
        ReadHfDataset.Params()


def test_a_single_pattern_string_is_a_list_of_one():
    assert ReadJsonl.Params(paths="data/*.jsonl").paths == ["data/*.jsonl"]


def test_every_reader_param_is_documented():
    for cls in (ReadJsonl, ReadParquet, ReadHfDataset, ReadTextFiles, ReadPackageMetadata):
        assert all(f.description for f in cls.Params.model_fields.values()), cls


# ---- through the runner ------------------------------------------------------------------------


def test_bad_lines_reach_quarantine_and_the_ledger_adds_up(tmp_path, ray_session):
    from raypress.dag.runner import run_pipeline

    write_lines(tmp_path / "in.jsonl", MESSY)
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(
        "name: io-roundtrip\nsettings: {max_error_ratio: 0.9}\nnodes:\n"
        f"  - {{id: src, op: read_jsonl, with: {{paths: ['{tmp_path}/in.jsonl']}}}}\n"
        "  - {id: out, op: write_jsonl, input: src, with: {path: '{run_dir}/out'}}\n"
    )
    ledger = run_pipeline(str(pipeline), run_dir=str(tmp_path / "run"))
    src = ledger["nodes"]["src"]
    assert ledger["adds_up"] and (src["rows_in"], src["rows_out"], src["quarantined"]) == (6, 2, 4)
    written = [json.loads(line) for f in (tmp_path / "run" / "out").glob("*.jsonl") for line in f.open()]
    assert sorted(r["text"] for r in written) == ["fifth", "first"]
