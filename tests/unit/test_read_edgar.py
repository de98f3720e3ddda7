"""read_edgar's per-file function on the shared EDGAR filings (three header layouts, uuencoded and
XBRL parts, bare-CR feed file, single HTML filings) and on broken files written to tmp_path."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from raypress.operators.io.edgar.sgml import FilingProblem, iso_timestamp, split_submission
from raypress.operators.io.read_edgar import COLUMNS, ReadEdgar, read_edgar_file
from raypress.operators.registry import get_op
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL

MODERN = "0001213900-25-032135.txt"
FEED = "0001104659-25-002604.nc"
PEM_1995 = "0000950129-95-001652.txt"
PEM_1998 = "0001011438-98-000429.txt"


@pytest.fixture
def edgar(shared_data: Path) -> Path:
    folder = shared_data / "edgar"
    if not (folder / MODERN).is_file():
        pytest.skip(f"EDGAR sample filings not found in {folder}")
    return folder


def read(path: Path, source: str | None = None) -> list[dict]:
    tables = list(read_edgar_file(source or path.name, str(path), node="filings"))
    assert tables, "every file gives at least one row"
    for table in tables:
        assert tuple(table.column_names[: len(COLUMNS)]) == COLUMNS
    rows = [r for t in tables for r in t.to_pylist()]
    assert len({r["id"] for r in rows}) == len(rows), "ids are unique per file"
    return rows


def live(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r[NODE_COL] is None]


def n_documents(data: bytes) -> int:
    return len(re.findall(rb"(?<![^\r\n])<DOCUMENT>", data))


def test_registered_with_globs():
    assert get_op("read_edgar") is ReadEdgar
    assert ReadEdgar.Params(paths="filings/*.txt").paths == ["filings/*.txt"]
    assert set(ReadEdgar.writes) == set(COLUMNS)


def test_1995_pem_key_value_header(edgar):
    rows = read(edgar / PEM_1995)
    assert [(r["type_attachment"], r["form_type"], r["sequence"]) for r in rows] == [
        ("24F-2NT", "24F-2NT", 1), ("EX-99.11", "EX-99.11", 2)]
    for r in rows:
        assert r["accession"] == "0000950129-95-001652"
        assert r["type_filing"] == "24F-2NT"
        assert r["ts_accept"] == "1995-12-28T00:00:00"  # FILED AS OF DATE: no acceptance time then
        assert r["id"] == f"{PEM_1995}#{r['sequence']}" and r["source"] == PEM_1995
    assert "ANNUAL NOTICE OF SECURITIES SOLD" in rows[0]["text"]
    assert "SULLIVAN & WORCESTER" in rows[1]["text"].upper()
    for r in rows:  # the PEM envelope and the SGML tags stay outside the text
        assert "PRIVACY-ENHANCED" not in r["text"] and "</TEXT>" not in r["text"] and "<TYPE>" not in r["text"]


def test_1998_pem_header(edgar):
    rows = read(edgar / PEM_1998)
    assert [(r["type_filing"], r["type_attachment"]) for r in rows] == [("8-K", "8-K"), ("8-K", "EX-20.1")]
    assert {r["ts_accept"] for r in rows} == {"1998-12-31T00:00:00"}
    assert {r["accession"] for r in rows} == {"0001011438-98-000429"}
    assert "AAMES CAPITAL CORPORATION" in rows[0]["text"]


def test_modern_submission_keeps_text_and_drops_binary_and_xbrl_parts(edgar):
    path = edgar / MODERN
    rows = read(path)
    assert len(rows) == n_documents(path.read_bytes()) == 14  # every <DOCUMENT> in the ledger
    assert {r["accession"] for r in rows} == {"0001213900-25-032135"}
    assert {r["ts_accept"] for r in rows} == {"2025-04-15T16:30:25"}  # ACCEPTANCE-DATETIME 20250415163025
    assert {r["type_filing"] for r in rows} == {"8-K"}
    kept = live(rows)
    assert [(r["sequence"], r["type_attachment"], r["form_type"], r["filename"]) for r in kept] == [
        (1, "8-K", "8-K", "ea0238372-8k_abvcbio.htm"), (2, "EX-99.1", "EX-99.1", "ea023837201ex99-1_abvcbio.htm")]
    main, press = kept
    assert main["text"].startswith("<?xml") and "<XBRL>" not in main["text"] and "</XBRL>" not in main["text"]
    assert main["text"].rstrip().endswith("</html>")
    assert "ABVC BioPharma Announces 2024 Financial Results" in press["text"]

    dropped = {r["sequence"]: r for r in rows if r[NODE_COL] is not None}
    assert {r[KIND_COL] for r in dropped.values()} == {"filtered"}  # never quarantined
    assert {r[NODE_COL] for r in dropped.values()} == {"filings"}
    assert all(r["text"] is None for r in dropped.values())
    assert dropped[3][REASON_COL] == "binary_part"
    assert dropped[3][DETAIL_COL] == "GRAPHIC ex99-1_001.jpg (uuencoded)"
    assert dropped[9][REASON_COL] == "binary_part"
    assert dropped[9][DETAIL_COL] == "EXCEL Financial_Report.xlsx (uuencoded)"
    assert dropped[16][REASON_COL] == "binary_part"
    assert dropped[16][DETAIL_COL].startswith("ZIP ") and dropped[16][DETAIL_COL].endswith("(uuencoded)")
    for seq in (4, 5, 6):  # XBRL schema and linkbases
        assert dropped[seq][REASON_COL] == "machine_part"
        assert dropped[seq][DETAIL_COL].startswith(dropped[seq]["type_attachment"])
        assert dropped[seq]["type_attachment"].startswith("EX-101.") and "XBRL" in dropped[seq][DETAIL_COL]
    for seq in (8, 10, 11, 13, 17):
        assert (dropped[seq][REASON_COL], dropped[seq]["type_attachment"]) == ("machine_part", "XML")
    assert (dropped[15][REASON_COL], dropped[15][DETAIL_COL]) == ("machine_part", "JSON MetaLinks.json (JSON)")


def test_feed_file_with_bare_cr_splits_into_its_two_documents(edgar):
    path = edgar / FEED
    data = path.read_bytes()
    assert data.count(b"\r") > 1000 and data.count(b"\n") == 1  # the layout this test is about
    rows = read(path)
    assert len(rows) == 2 and not [r for r in rows if r[NODE_COL] is not None]
    assert [(r["sequence"], r["type_attachment"], r["form_type"], r["filename"]) for r in rows] == [
        (1, "SC TO-T/A", "SC TO-T/A", "tm252901d1_sctota.htm"),
        (2, "EX-99.(A)(5)(C)", "EX-99.(A)(5)(C)", "tm252901d1_ex99-a5c.htm")]
    for r in rows:
        assert r["accession"] == "0001104659-25-002604"
        assert r["type_filing"] == "SC TO-T/A"  # the submission's <TYPE>, not a filer's <FORM-TYPE>
        assert r["ts_accept"] == "2025-01-10T00:00:00"  # <FILING-DATE>; the feed has no acceptance time
        assert "\r" not in r["text"] and r["text"].startswith("<HTML>")
        assert r["text"].rstrip().endswith("</HTML>")
    assert "Icahn" in rows[0]["text"] + rows[1]["text"]


@pytest.mark.parametrize("name, filename, form, sequence", [
    ("Apple.10-K.html", "Apple.10-K.html", "10-K", 1),
    ("Apple.10-Q.html", "Apple.10-Q.html", "10-Q", 1),
    ("BuckleInc.8-K.html", "BuckleInc.8-K.html", "8-K", 1),
    ("cabot.DEF14A.ixbrl.html", "cabot.DEF14A.ixbrl.html", "DEF 14A", 1),
    ("Flushing-424B5.html", "tm2430436-1_424b5.htm", "424B5", 1),
])
def test_single_html_filing_is_one_row(edgar, name, filename, form, sequence):
    rows = read(edgar / name)
    assert len(rows) == 1
    (r,) = rows
    assert r[NODE_COL] is None
    assert (r["filename"], r["type_filing"], r["type_attachment"], r["form_type"], r["sequence"]) == (
        filename, form, form, form, sequence)
    assert r["accession"] is None and r["ts_accept"] is None  # no header, no accession in the name
    assert r["id"] == f"{name}#{sequence}"
    assert "<html" in r["text"][:2000].lower() and "</TEXT>" not in r["text"]


def test_exhibit_extract_keeps_its_own_type(edgar):
    (r,) = read(edgar / "BuckleInc.8-K.EX99.1.html")
    assert (r["type_attachment"], r["form_type"], r["sequence"], r["filename"]) == (
        "EX-99.1", "EX-99.1", 2, "bke20241122-8kexhibit.htm")
    assert r["type_filing"] is None  # an exhibit alone does not say which form it belongs to
    assert r["text"].startswith("<html><head>") and r["text"].rstrip().endswith("</html>")


def test_every_shared_document_is_accounted_for(edgar):
    for path in sorted(edgar.iterdir()):
        if path.suffix not in (".txt", ".nc", ".html"):
            continue
        rows = read(path)
        assert len(rows) == max(1, n_documents(path.read_bytes())), path.name
        assert all(r[KIND_COL] in (None, "filtered") for r in rows), path.name


def test_line_endings_and_compression_do_not_change_rows(edgar, tmp_path):
    data = (edgar / PEM_1995).read_bytes()
    assert b"\r" not in data
    expected = [(r["type_attachment"], r["text"]) for r in read(edgar / PEM_1995)]
    variants = {"crlf.txt": data.replace(b"\n", b"\r\n"), "cr.txt": data.replace(b"\n", b"\r"),
                "gz.txt.gz": gzip.compress(data)}
    for name, content in variants.items():
        (tmp_path / name).write_bytes(content)
        rows = read(tmp_path / name)
        assert [(r["type_attachment"], r["text"]) for r in rows] == expected, name
        assert {r["ts_accept"] for r in rows} == {"1995-12-28T00:00:00"}


@pytest.mark.parametrize("content, reason", [
    (b"", "empty_file"),
    (b"  \n\r\n\t ", "empty_file"),
    (bytes(range(256)) * 8, "not_a_filing"),
    (b"\x89PNG\r\n\x1a\n" + b"\x00" * 300, "not_a_filing"),
    (b"Dear shareholder,\nthis is a letter, not a filing.\n", "not_a_filing"),
    (b'{"cik": 320193, "form": "10-K"}\n', "not_a_filing"),
])
def test_bad_files_are_one_quarantined_row(tmp_path, content, reason):
    path = tmp_path / "bad.txt"
    path.write_bytes(content)
    (r,) = read(path, source="in/bad.txt")
    assert (r["id"], r["source"], r[NODE_COL], r[KIND_COL], r[REASON_COL]) == (
        "in/bad.txt", "in/bad.txt", "filings", "error", reason)
    assert r[DETAIL_COL].startswith("in/bad.txt: ") and r["text"] is None


def test_missing_file_is_quarantined(tmp_path):
    (r,) = list(read_edgar_file("gone.txt", str(tmp_path / "gone.txt"), node="filings"))[0].to_pylist()
    assert (r[KIND_COL], r[REASON_COL]) == ("error", "unreadable_file")


def _submission(*documents: bytes, header: bytes | None = None) -> bytes:
    header = header if header is not None else (
        b"<SEC-DOCUMENT>0000000000-24-000001.txt : 20240102\n<SEC-HEADER>\n"
        b"<ACCEPTANCE-DATETIME>20240102093000\nACCESSION NUMBER:\t\t0000000000-24-000001\n"
        b"CONFORMED SUBMISSION TYPE:\t10-K\nFILED AS OF DATE:\t\t20240102\n</SEC-HEADER>\n")
    return header + b"".join(documents) + b"</SEC-DOCUMENT>\n"


def _doc(seq: int, dtype: str, body: bytes, filename: str | None = None) -> bytes:
    name = b"" if filename is None else b"<FILENAME>" + filename.encode() + b"\n"
    return (b"<DOCUMENT>\n<TYPE>" + dtype.encode() + b"\n<SEQUENCE>" + str(seq).encode() + b"\n" + name
            + b"<TEXT>\n" + body + b"\n</TEXT>\n</DOCUMENT>\n")


def test_document_without_text_is_quarantined_and_the_rest_kept(tmp_path):
    no_text = b"<DOCUMENT>\n<TYPE>EX-21\n<SEQUENCE>2\n<FILENAME>ex21.htm\n</DOCUMENT>\n"
    data = _submission(_doc(1, "10-K", b"Annual report."), no_text, _doc(3, "EX-99", b"Press release."))
    path = tmp_path / "s.txt"
    path.write_bytes(data)
    rows = read(path)
    assert [r["sequence"] for r in rows] == [1, 2, 3]
    assert [r["text"] for r in live(rows)] == ["Annual report.", "Press release."]
    bad = rows[1]
    assert (bad[KIND_COL], bad[REASON_COL], bad["type_attachment"], bad["filename"]) == (
        "error", "document_without_text", "EX-21", "ex21.htm")
    assert f"byte {data.index(no_text)}" in bad[DETAIL_COL]
    assert rows[0]["ts_accept"] == "2024-01-02T09:30:00" and rows[0]["type_filing"] == "10-K"
    assert rows[2]["form_type"] == "EX-99" and rows[0]["form_type"] == "10-K"


def test_truncated_submission_keeps_what_it_can(edgar, tmp_path):
    data = (edgar / MODERN).read_bytes()
    second = data.index(b"<DOCUMENT>\n<TYPE>EX-99.1")
    cut = second + 5000  # inside the press release's <TEXT>
    path = tmp_path / MODERN
    path.write_bytes(data[:cut])
    rows = read(path)
    assert len(rows) == 2
    assert rows[0][NODE_COL] is None and rows[0]["type_attachment"] == "8-K"
    bad = rows[1]
    assert (bad[KIND_COL], bad[REASON_COL], bad["type_attachment"]) == ("error", "truncated_document", "EX-99.1")
    assert f"<DOCUMENT> at byte {second}" in bad[DETAIL_COL] and f"ends at byte {cut}" in bad[DETAIL_COL]


def test_missing_end_of_text_quarantines_one_document(tmp_path):
    broken = b"<DOCUMENT>\n<TYPE>EX-10.1\n<SEQUENCE>2\n<TEXT>\nAgreement, never closed.\n"
    data = _submission(_doc(1, "10-K", b"Annual report."), broken, _doc(3, "EX-99", b"Press release."))
    path = tmp_path / "s.txt"
    path.write_bytes(data)
    rows = read(path)
    assert [r[REASON_COL] for r in rows] == [None, "unterminated_text", None]
    assert f"next <DOCUMENT> at byte {data.index(b'<DOCUMENT>', data.index(broken) + 1)}" in rows[1][DETAIL_COL]


def test_header_without_documents_is_quarantined(edgar, tmp_path):
    data = (edgar / MODERN).read_bytes()
    path = tmp_path / "cut.txt"
    path.write_bytes(data[: data.index(b"<DOCUMENT>")])
    (r,) = read(path)
    assert (r[KIND_COL], r[REASON_COL]) == ("error", "no_documents")
    assert "0001213900-25-032135" in r[DETAIL_COL] and r["accession"] is None


def test_old_latin1_text_decodes(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes(_submission(_doc(1, "10-K", "Soci\u00e9t\u00e9 G\u00e9n\u00e9rale \u2014 r\u00e9sum\u00e9".encode("cp1252"))))
    (r,) = read(path)
    assert r["text"] == "Soci\u00e9t\u00e9 G\u00e9n\u00e9rale \u2014 r\u00e9sum\u00e9"


def test_uuencoded_pdf_and_type_only_binary(tmp_path):
    pdf = b"<PDF>\nbegin 644 report.pdf\nM)5!$1BTQ+C0*\nend\n</PDF>"
    data = _submission(_doc(1, "10-K", b"Text."), _doc(2, "PDF", pdf, "report.pdf"),
                       _doc(3, "GRAPHIC", b"GIF89a...", "logo.gif"), _doc(4, "EX-101.INS", b"<xbrl/>", "x.xml"))
    path = tmp_path / "s.txt"
    path.write_bytes(data)
    rows = read(path)
    assert [(r[REASON_COL], r[DETAIL_COL]) for r in rows[1:]] == [
        ("binary_part", "PDF report.pdf (uuencoded)"),
        ("binary_part", "GRAPHIC logo.gif (binary)"),
        ("machine_part", "EX-101.INS x.xml (XBRL)"),
    ]


def test_repeated_sequence_gets_unique_ids_and_bare_html_takes_accession_from_name(tmp_path):
    path = tmp_path / "s.txt"
    path.write_bytes(_submission(_doc(1, "10-K", b"A."), _doc(1, "10-K", b"B.")))
    assert [r["id"] for r in read(path)] == ["s.txt#1", "s.txt#1.1"]
    html = tmp_path / "0000320193-24-000123-index.htm"
    html.write_bytes(b"<!DOCTYPE html>\n<html><body><p>Hello</p></body></html>\n")
    (r,) = read(html)
    assert r["accession"] == "0000320193-24-000123" and r["type_filing"] is None and r["sequence"] == 1


def test_split_submission_and_timestamps_directly():
    with pytest.raises(FilingProblem) as err:
        split_submission(b"\x00\x01\x02garbage")
    assert err.value.reason == "not_a_filing"
    assert iso_timestamp("20250415160512") == "2025-04-15T16:05:12"
    assert iso_timestamp("19951228") == "1995-12-28T00:00:00"
    assert iso_timestamp("20251332") is None and iso_timestamp("2025-04-15") is None and iso_timestamp(None) is None
