"""Rejected and quarantined rows are stored under the node that dropped them, on real Ray: every
rule that drops a row (a filter, a deduplicator heading its segment, an op raising on a row, a
reader's unreadable record) writes ``rejects/<node>/`` or ``quarantine/<node>/``, never the segment's
sink's folder; resume keeps another segment's folders and restores a deleted one; and
``raypress rejects`` finds the rows by node and reason."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from raypress.cli import app
from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.integration

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
MIN_WORDS, MAX_LEN, MIN_LEN = 4, 40, 30
COPY = "zz-copy-of-d0011"


def write_corpus(path: Path, n: int = 60) -> dict[str, str]:
    """``doc -> text``, written as JSONL with one line that is not JSON (the reader quarantines it)."""
    texts: dict[str, str] = {}
    for i in range(n):
        k = 1 + i % 7  # 1..7 words after the doc's own
        texts[f"d{i:04d}"] = "" if i % 20 == 0 else " ".join([f"doc{i}"] + [WORDS[(i + j) % 10] for j in range(k)])
    texts[COPY] = texts["d0011"]  # kept by every filter; the deduplicator drops it, keeping d0011
    with open(path, "w") as fh:
        for doc, text in texts.items():
            fh.write(json.dumps({"doc": doc, "text": text}) + "\n")
        fh.write("{this line is not json\n")
    return texts


def pipeline(tmp_path: Path) -> Path:
    path = tmp_path / "p.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: rejects-by-node
        settings: {{max_error_ratio: 0.5, allow_code: true}}
        nodes:
          - id: src
            op: read_jsonl
            with: {{paths: ["{tmp_path}/corpus.jsonl"], id_key: doc}}
          - id: inv
            op: python_lambda_mapper
            input: src
            with: {{lambda_str: "lambda s: {{**s, 'inv_len': 1 / len(s['text'])}}"}}
          - id: few_words
            op: words_num_filter
            input: inv
            with: {{min_num: {MIN_WORDS}}}
          - id: too_long
            op: text_length_filter
            input: few_words
            with: {{max_len: {MAX_LEN}}}
          - id: norm
            op: whitespace_normalization_mapper
            input: too_long
          - id: dedup
            op: document_deduplicator
            input: norm
          - id: too_short
            op: text_length_filter
            input: dedup
            with: {{min_len: {MIN_LEN}}}
          - id: out
            op: write_jsonl
            input: too_short
            with: {{path: "{{run_dir}}/out"}}
        """))
    return path


def expected_drops(texts: dict[str, str]) -> dict[str, set[str]]:
    """Which rows each node drops, worked out here from the texts (not from the run)."""
    raised = {d for d, t in texts.items() if not t}
    few = {d for d, t in texts.items() if d not in raised and len(t.split()) < MIN_WORDS}
    long = {d for d, t in texts.items() if d not in raised | few and len(t) > MAX_LEN}
    alive = [d for d in texts if d not in raised | few | long]
    short = {d for d in alive if d != COPY and len(texts[d]) < MIN_LEN}
    return {"inv": raised, "few_words": few, "too_long": long, "dedup": {COPY} if COPY in alive else set(),
            "too_short": short}


def rows_of(folder: Path) -> list[dict]:
    return [r for f in sorted(folder.glob("part-*.parquet")) for r in pq.read_table(f).to_pylist()]


def ids_of(folder: Path) -> set[str]:
    return {r["id"] for r in rows_of(folder)}


@pytest.fixture(scope="module")
def run(ray_session, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """One run of the pipeline (read-only for the tests that share it)."""
    tmp_path = tmp_path_factory.mktemp("by_node")
    texts = write_corpus(tmp_path / "corpus.jsonl")
    ledger = run_pipeline(str(pipeline(tmp_path)), run_dir=str(tmp_path / "run"))
    assert ledger["adds_up"], ledger["problems"]
    return tmp_path / "run", texts


def test_the_case_is_what_the_tests_below_need(run):
    _, texts = run
    drops = expected_drops(texts)
    assert all(drops.values()), drops  # every rule drops something
    assert drops["dedup"] == {COPY}


def test_each_filter_of_a_segment_has_its_own_rejects(run):
    run_dir, texts = run
    drops = expected_drops(texts)
    for node in ("few_words", "too_long", "too_short"):
        rows = rows_of(run_dir / "rejects" / node)
        assert {r["id"] for r in rows} == drops[node], node
        assert {r["_rp_node"] for r in rows} == {node} and {r["_rp_kind"] for r in rows} == {"filtered"}
    reasons = {r["_rp_reason"] for r in rows_of(run_dir / "rejects" / "few_words")}
    assert reasons == {"num_words < min"}
    for sink in ("norm", "out"):  # the segments' sinks drop nothing: no folder of theirs
        assert not (run_dir / "rejects" / sink).exists() and not (run_dir / "quarantine" / sink).exists()
    folders = {p.name for p in (run_dir / "rejects").iterdir()}
    assert folders == {"few_words", "too_long", "too_short", "dedup"}


def test_a_deduplicator_heading_its_segment_has_its_own_rejects(run):
    run_dir, _ = run
    (dup,) = rows_of(run_dir / "rejects" / "dedup")
    assert (dup["id"], dup["_rp_kind"], dup["_rp_reason"]) == (COPY, "duplicate", "d0011")


def test_an_op_raising_on_rows_has_its_own_quarantine(run):
    run_dir, texts = run
    rows = rows_of(run_dir / "quarantine" / "inv")
    assert {r["id"] for r in rows} == expected_drops(texts)["inv"]
    assert all(r["_rp_kind"] == "error" and "ZeroDivisionError" in r["_rp_detail"] for r in rows)


def test_a_readers_unreadable_record_is_quarantined_under_the_reader(run):
    run_dir, _ = run
    (bad,) = rows_of(run_dir / "quarantine" / "src")
    assert bad["_rp_node"] == "src" and bad["_rp_kind"] == "error" and bad["id"].endswith(":62")
    assert {p.name for p in (run_dir / "quarantine").iterdir()} == {"src", "inv"}


def test_a_warc_readers_dropped_and_truncated_records_are_under_the_reader(ray_session, shared_data, tmp_path):
    warc = shared_data / "warc"
    path = tmp_path / "w.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: warc-by-node
        settings: {{max_error_ratio: 1.0}}
        nodes:
          - id: pages
            op: read_warc
            with: {{paths: ["{warc}/bad/clipped.warc.gz", "{warc}/warcio/post-test.warc.gz"]}}
          - id: out
            op: write_jsonl
            input: pages
            with: {{path: "{{run_dir}}/out"}}
        """))
    run_dir = tmp_path / "run"
    ledger = run_pipeline(str(path), run_dir=str(run_dir))
    assert ledger["adds_up"], ledger["problems"]
    assert [r["_rp_reason"] for r in rows_of(run_dir / "quarantine" / "pages")] == ["truncated_record"]
    assert [r["_rp_reason"] for r in rows_of(run_dir / "rejects" / "pages")] == ["not_html"] * 3
    assert not (run_dir / "rejects" / "out").exists() and not (run_dir / "quarantine" / "out").exists()


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]


def _files(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted(folder.glob("*"))}


def test_resume_restores_a_deleted_nodes_rejects_and_keeps_the_other_segments(ray_session, tmp_path):
    texts = write_corpus(tmp_path / "corpus.jsonl")
    p, run_dir = pipeline(tmp_path), tmp_path / "run"
    run_pipeline(str(p), run_dir=str(run_dir))
    drops = expected_drops(texts)
    first_segment = {n: _files(run_dir / f) for n, f in (("few_words", "rejects/few_words"),
                                                         ("inv", "quarantine/inv"), ("src", "quarantine/src"))}
    # the second segment (dedup, too_short, out) loses dedup's rejects, and gets a stale part in too_short's
    shutil.rmtree(run_dir / "rejects" / "dedup")
    shutil.copy(next((run_dir / "rejects" / "few_words").glob("*.parquet")),
                run_dir / "rejects" / "too_short" / "part-99999999-stale.parquet")
    before = len(_events(run_dir))
    ledger = run_pipeline(str(p), run_dir=str(run_dir))
    assert ledger["adds_up"], ledger["problems"]
    new = _events(run_dir)[before:]
    assert {e["node"] for e in new if e["event"] == "node_skipped"} == {"src", "inv", "few_words", "too_long", "norm"}
    rerun = [e for e in new if e["event"] == "node_rerun"]
    assert [e["node"] for e in rerun] == ["out"] and "rejects/dedup" in rerun[0]["reason"]
    assert ids_of(run_dir / "rejects" / "dedup") == {COPY}
    assert ids_of(run_dir / "rejects" / "too_short") == drops["too_short"]  # the stale part is gone
    assert not (run_dir / "rejects" / "too_short" / "part-99999999-stale.parquet").exists()
    for node, folder in (("few_words", "rejects/few_words"), ("inv", "quarantine/inv"), ("src", "quarantine/src")):
        assert _files(run_dir / folder) == first_segment[node], node  # another segment's: untouched

    shutil.rmtree(run_dir / "rejects" / "few_words")  # now a node of the first segment
    before = len(_events(run_dir))
    ledger = run_pipeline(str(p), run_dir=str(run_dir))
    assert ledger["adds_up"], ledger["problems"]
    rerun = [e for e in _events(run_dir)[before:] if e["event"] == "node_rerun"]
    assert rerun[0]["node"] == "norm" and "rejects/few_words" in rerun[0]["reason"]
    assert ids_of(run_dir / "rejects" / "few_words") == drops["few_words"]
    assert ids_of(run_dir / "quarantine" / "inv") == drops["inv"]  # re-run: written again, once


# ---- raypress rejects ------------------------------------------------------------------------------


def _cli(*args: str):
    result = CliRunner().invoke(app, ["rejects", *args])
    assert result.exit_code == 0, result.output
    return result


def test_cli_lists_a_nodes_rows_for_a_reason(run):
    run_dir, texts = run
    want = expected_drops(texts)["few_words"]
    result = _cli(str(run_dir), "few_words", "--reason", "num_words < min", "--limit", "1000")
    shown = {i for i in texts if f" {i} " in result.output}
    assert shown == want
    assert f"< min_num {MIN_WORDS}" in result.output


def test_cli_json_reloads_with_values_and_thresholds(run):
    run_dir, texts = run
    drops = expected_drops(texts)
    lines = _cli(str(run_dir), "too_long", "--reason", "text_len > max", "--json", "--limit", "1000").stdout
    rows = [json.loads(line) for line in lines.splitlines() if line.strip()]
    assert {r["id"] for r in rows} == drops["too_long"]
    for r in rows:
        assert r["kind"] == "filtered" and r["reason"] == "text_len > max"
        assert r["detail"] == {"text_len": len(texts[r["id"]])}
        assert r["threshold"] == {"param": "max_len", "value": MAX_LEN, "side": "max"}
    dup = [json.loads(x) for x in _cli(str(run_dir), "dedup", "--json").stdout.splitlines() if x.strip()]
    assert [(r["id"], r["kind"], r["reason"]) for r in dup] == [(COPY, "duplicate", "d0011")]
    errors = [json.loads(x) for x in _cli(str(run_dir), "inv", "--kind", "error", "--json", "--limit", "100")
              .stdout.splitlines() if x.strip()]
    assert {r["id"] for r in errors} == drops["inv"] and all("ZeroDivisionError" in r["detail"] for r in errors)


def test_cli_summary_names_each_nodes_folder(run):
    run_dir, _ = run
    result = _cli(str(run_dir))
    for node, folder in (("few_words", "rejects/few_words/"), ("too_long", "rejects/too_long/"),
                         ("dedup", "rejects/dedup/"), ("inv", "quarantine/inv/"), ("src", "quarantine/src/")):
        assert node in result.output and folder in result.output


def test_cli_says_in_one_line_when_nothing_matches(run):
    run_dir, _ = run
    nothing = _cli(str(run_dir), "norm")
    assert nothing.output.strip() == "node 'norm' dropped no rows"
    typo = _cli(str(run_dir), "few_words", "--reason", "num_word < min")
    assert len(typo.output.strip().splitlines()) == 1
    assert "no rows for reason 'num_word < min'" in typo.output and "'num_words < min'" in typo.output
    assert _cli(str(run_dir), "few_words", "--json", "--reason", "nope").stdout == ""  # stdout stays JSON lines
