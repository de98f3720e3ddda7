"""Line-based files cut into byte ranges (operators/shared/spans.py): every line read exactly
once, with its own line number, wherever the cuts fall; large files give a span per CPU."""

from __future__ import annotations

import random

from raypress.operators.shared.spans import count_newlines, plan_spans, span_lines


def _lines_of_spans(path, cuts):
    size = path.stat().st_size
    bounds = [*cuts, size]
    out = []
    with open(path, "rb") as f:
        for k in range(len(cuts)):
            before = count_newlines(str(path), 0, bounds[k])
            out += list(span_lines(f, bounds[k], bounds[k + 1], before))
    return out


def test_every_line_is_read_once_with_its_number_wherever_the_cuts_fall(tmp_path):
    rng = random.Random(0)
    lines = [("x" * rng.randint(0, 40) + "é" * rng.randint(0, 3)).encode() + b"\n" for _ in range(200)]
    lines[5] = b"\n"  # empty lines count in the numbering
    lines[-1] = lines[-1].rstrip(b"\n")  # no final newline
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"".join(lines))
    with open(path, "rb") as f:
        expected = list(enumerate(f, start=1))
    size = path.stat().st_size
    for trial in range(200):
        cuts = [0, *sorted(rng.sample(range(1, size), rng.randint(1, 12)))]
        assert _lines_of_spans(path, cuts) == expected, cuts
    starts = [0] + [sum(map(len, lines[:i])) for i in range(1, 10)]  # cuts exactly at line starts
    assert _lines_of_spans(path, starts) == expected


def test_a_large_file_gets_spans_for_every_cpu_and_small_or_compressed_ones_do_not(tmp_path):
    big, small, packed = tmp_path / "big.jsonl", tmp_path / "small.jsonl", tmp_path / "big.jsonl.gz"
    for p, n in ((big, 1000), (small, 10), (packed, 1000)):
        p.write_bytes(b"y" * 99 + b"\n" * 1 + b"z" * 100 * (n - 1))
    files = [(p.name, str(p)) for p in (big, small, packed)]
    items = plan_spans(files, cpus=4, compressed={str(packed)}, min_span=4096)
    by_file = {p: [it for it in items if it["path"] == p] for p, _ in files}
    assert len(by_file["big.jsonl"]) >= 4  # one file alone keeps every CPU busy
    assert [it["end"] for it in by_file["small.jsonl"]] == [None]
    assert [it["end"] for it in by_file["big.jsonl.gz"]] == [None]
    spans = by_file["big.jsonl"]
    assert spans[0]["start"] == 0 and spans[-1]["end"] == big.stat().st_size
    assert all(a["end"] == b["start"] for a, b in zip(spans, spans[1:]))
    assert [it["path"] for it in items] == sorted([it["path"] for it in items], key=[p for p, _ in files].index)


def test_spans_never_exceed_the_cap_however_large_the_input(monkeypatch, tmp_path):
    import raypress.operators.shared.spans as spans

    monkeypatch.setattr(spans, "MAX_SPAN_BYTES", 10_000)
    big = tmp_path / "big.jsonl"
    big.write_bytes((b"x" * 99 + b"\n") * 2000)  # 200 kB: on 2 CPUs, 4 spans of 50 kB without the cap
    items = spans.plan_spans([(big.name, str(big))], cpus=2, min_span=4096)
    sizes = [(it["end"] or big.stat().st_size) - it["start"] for it in items]
    assert len(items) == 20 and max(sizes) <= 10_000 and sum(sizes) == big.stat().st_size


def test_a_large_parquet_files_row_groups_are_shared_out_and_ids_keep_their_row_numbers(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from raypress.operators.io.read_parquet import read_parquet_file
    from raypress.operators.shared.spans import parquet_spans

    path = tmp_path / "big.parquet"
    texts = [f"row {i} " + "x" * (i % 50) for i in range(5000)]
    pq.write_table(pa.table({"text": texts}), path, row_group_size=300)  # 17 row groups
    items = parquet_spans([("big.parquet", str(path))], cpus=2, min_span=1024)
    assert len(items) >= 2 and all(it["row_groups"] for it in items)
    assert sum((it["row_groups"] for it in items), []) == list(range(pq.ParquetFile(path).metadata.num_row_groups))
    whole = pa.concat_tables(read_parquet_file("big.parquet", str(path), "n", None, None))
    parts = pa.concat_tables([t for it in items for t in read_parquet_file(
        "big.parquet", str(path), "n", None, None, it["row_groups"], it["first_row"])])
    assert parts.to_pylist() == whole.to_pylist()
    assert whole.column("id")[4999].as_py() == "big.parquet:4999"
    assert parquet_spans([("big.parquet", str(path))], cpus=2)[0]["row_groups"] is None  # small: whole
