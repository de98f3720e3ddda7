"""A misnamed input through the runner: one good file and one file whose name lies.

The lying file is exactly one quarantined row (naming it and what it is), the error budget
allows one bad file, the run succeeds (exit 0) and the ledger adds up.  Before readers checked
content, the gzipped text named ``.warc.gz`` became 21 "records" (19 quarantined) and failed the
run on ``max_error_ratio`` (exit 1), and the HTML page named ``.pdf`` went through as a one-page PDF.
"""

from __future__ import annotations

import gzip
import json
import textwrap
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from raypress.dag.runner import run_pipeline

pytestmark = pytest.mark.integration

HTML_PAGE = b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body>Not Found</body></html>\n"
# five space-separated fields a line: what warcio would take for ARC record headers
FIVE_FIELD_LINES = b"".join(b"the quick brown fox %d\n" % i for i in range(50))


def write_warc(path: Path, pages: int = 3) -> None:
    """A small real-looking crawl: a folder of HTML pages packaged as a crawler would have."""
    from raypress.operators.io.warc.site import Site, write_site_warc

    site = path.parent / "site"
    site.mkdir()
    for i in range(1, pages + 1):
        (site / f"{i}.html").write_text(f"<html><body><p>page {i} of the crawl</p></body></html>")
    write_site_warc([Site(site, "http://a.test/")], path)


def write_pipeline(tmp_path: Path, reader: str, paths: list[Path], writer: str, ratio: float) -> Path:
    path = tmp_path / f"{reader}.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: misnamed-{reader}
        settings: {{max_error_ratio: {ratio}}}
        nodes:
          - id: src
            op: {reader}
            with: {{paths: {json.dumps([str(p) for p in paths])}}}
          - id: out
            op: {writer}
            input: src
            with: {{path: "{{run_dir}}/out"}}
        """))
    return path


def quarantined(run_dir: Path) -> list[dict]:
    q = run_dir / "quarantine"
    return [r for f in sorted(q.rglob("*.parquet")) for r in pq.read_table(f).to_pylist()] if q.is_dir() else []


def check_ledger(ledger: dict, rows_in: int, rows_out: int) -> None:
    assert ledger["adds_up"], ledger["problems"]
    src, out = ledger["nodes"]["src"], ledger["nodes"]["out"]
    assert (src["rows_in"], src["quarantined"], src["rows_out"]) == (rows_in, 1, rows_out)
    assert src["rows_in"] == src["rows_out"] + sum(src["dropped"].values()) + src["duplicates"] + src["quarantined"]
    assert out["rows_out"] == rows_out


def test_gzipped_text_named_warc_gz_is_one_quarantined_row_and_the_run_succeeds(ray_session, tmp_path):
    from typer.testing import CliRunner

    from raypress.cli import app

    data = tmp_path / "crawl"
    data.mkdir()
    write_warc(data / "good.warc.gz")
    (data / "notes.warc.gz").write_bytes(gzip.compress(FIVE_FIELD_LINES, mtime=0))
    pipeline = write_pipeline(tmp_path, "read_warc", [data / "good.warc.gz", data / "notes.warc.gz"],
                              "write_jsonl", ratio=0.3)  # 1 bad of 4 rows: allowed; 19 of 24 was not

    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(pipeline), "--run-dir", str(run_dir), "--in-process"])
    assert result.exit_code == 0, result.output
    ledger = json.loads((run_dir / "ledger.json").read_text())
    check_ledger(ledger, rows_in=4, rows_out=3)
    (bad,) = quarantined(run_dir)
    assert bad["id"] == f"{data / 'notes.warc.gz'}@0" and bad["_rp_reason"] == "not_a_warc"
    assert bad["_rp_detail"].startswith(f"{data / 'notes.warc.gz'}: not a WARC file: once decompressed, it "
                                        f"starts with 'the quick brown fox 0' (text?)")
    written = [json.loads(line) for f in sorted((run_dir / "out").glob("*.jsonl"))
               for line in f.read_text().splitlines()]
    assert sorted(r["url"] for r in written) == ["http://a.test/1.html", "http://a.test/2.html", "http://a.test/3.html"]


def test_html_named_pdf_is_one_quarantined_row_and_the_run_succeeds(ray_session, tmp_path):
    pymupdf = pytest.importorskip("pymupdf")
    doc = pymupdf.open()
    doc.new_page().insert_text((72, 72), "a real PDF")
    (tmp_path / "good.pdf").write_bytes(doc.tobytes())
    (tmp_path / "saved-error-page.pdf").write_bytes(HTML_PAGE)
    pipeline = write_pipeline(tmp_path, "read_pdf", [tmp_path / "good.pdf", tmp_path / "saved-error-page.pdf"],
                              "write_parquet", ratio=0.5)

    run_dir = tmp_path / "run"
    ledger = run_pipeline(str(pipeline), run_dir=str(run_dir))  # returns: no RunFailed, the CLI exits 0
    check_ledger(ledger, rows_in=2, rows_out=1)  # before: 0 quarantined, 2 rows out
    (bad,) = quarantined(run_dir)
    assert bad["_rp_reason"] == "not_a_pdf"
    assert bad["_rp_detail"] == f"{tmp_path / 'saved-error-page.pdf'}: not a PDF: starts with '<!DOCTYPE html>' (HTML?)"
    out = pq.read_table(run_dir / "out").to_pylist()
    assert [Path(r["id"]).name for r in out] == ["good.pdf"] and out[0]["n_pages"] == 1
