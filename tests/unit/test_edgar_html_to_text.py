"""edgar_html_to_text: inline XBRL, tables, page furniture, entities and plain-text filings, on hand
cases and on the real filings in ../shared/data/edgar."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.curation.edgar.text_cleanup import MARKERS, join_cells, normalize_unicode
from raypress.operators.curation.edgar_html_to_text import (
    EdgarHtmlToText,
    EdgarHtmlToTextParams,
    document_body,
    edgar_to_text,
    is_html,
)

TAG = re.compile(r"<[A-Za-z/!?]")


def op(**params) -> EdgarHtmlToText:
    return EdgarHtmlToText(EdgarHtmlToTextParams(**params))


def lines(text: str) -> list[str]:
    return text.split("\n")


# --- hand cases --------------------------------------------------------------------------------

IXBRL = """<?xml version='1.0' encoding='ASCII'?>
<html xmlns:ix="http://www.xbrl.org/2013/inlineXBRL"><head><title>abc-20240928</title>
<style>p {color: red}</style></head><body>
<div style="display:none"><ix:header><ix:hidden>
  <ix:nonNumeric name="dei:AmendmentFlag" contextRef="c-1">HIDDENFLAG</ix:nonNumeric></ix:hidden>
  <ix:resources><xbrli:context id="c-1"><xbrli:identifier scheme="http://www.sec.gov/CIK">0009999999</xbrli:identifier>
  </xbrli:context></ix:resources></ix:header></div>
<ix:header><ix:references>STRAYHEADER</ix:references></ix:header>
<div><span>Revenue was $<ix:nonFraction name="us-gaap:Revenues" contextRef="c-1" scale="6">1,234</ix:nonFraction>
 million, up <ix:nonNumeric name="x:Growth">3%</ix:nonNumeric>.</span></div>
<p style="DISPLAY: NONE">also hidden</p>
<script>var secret = 1;</script>
</body></html>"""


def test_inline_xbrl_hidden_header_removed_and_ix_tags_unwrapped():
    out = edgar_to_text(IXBRL)
    assert out == "Revenue was $1,234 million, up 3%."
    for gone in ("HIDDENFLAG", "0009999999", "STRAYHEADER", "also hidden", "secret", "abc-20240928", "color"):
        assert gone not in out


TABLE = """<html><body><p>Results (in millions):</p>
<table>
 <tr><td></td><td colspan="2">2024</td><td/><td>2023</td></tr>
 <tr><td>Net sales</td><td>$</td><td>391,035</td><td></td><td>$</td><td>383,285</td></tr>
 <tr style="height:4pt"><td/><td/></tr>
 <tr><td><div>Other income/</div><div>(expense), net</div></td><td>(565</td><td>)</td><td>(334</td><td>)</td></tr>
 <tr><td>Margin</td><td>46.2</td><td>%</td><td>(1.5</td><td>)%</td></tr>
 <tr><td>&#8226;</td><td>A bullet in a layout table</td></tr>
</table>
<p>After the table.</p></body></html>"""


def test_table_rows_keep_cells_and_numbers_in_order():
    out = edgar_to_text(TABLE)
    assert lines(out) == [
        "Results (in millions):",
        "",
        "2024 | 2023",
        "Net sales | $391,035 | $383,285",
        "Other income/ (expense), net | (565) | (334)",
        "Margin | 46.2% | (1.5)%",
        "• A bullet in a layout table",
        "",
        "After the table.",
    ]


def test_tables_drop():
    out = edgar_to_text(TABLE, keep_tables=False)
    assert out == "Results (in millions):\n\nAfter the table."
    assert op(tables="drop").process_text(TABLE) == out


def test_join_cells_glues_signs_and_labels():
    assert join_cells(["", "Total", " $ ", "1,000", "(", "2", ")", "—"]) == "Total | $1,000 | (2) | —"
    assert join_cells(["(a)", "First item", "12"]) == "(a) First item | 12"
    assert join_cells(["Price", "$", "$"]) == "Price | $ | $"
    assert join_cells(["Note", "(1)", "5"]) == "Note | (1) | 5"  # a footnote mark after the label stays a cell


def test_blocks_become_paragraphs_and_whitespace_is_normalised():
    html = ("<html><body><h1>Item  1.\n Business</h1><p>First   para-\n graph.</p><div><div>Nested</div></div>"
            "<p>Line one<br>line two<br/>line three</p><ul><li>alpha</li><li>beta</li></ul>"
            "<div></div><div> </div><p></p><pre>col  a\ncol  b</pre><p>end</p></body></html>")
    assert edgar_to_text(html) == (
        "Item 1. Business\n\nFirst para- graph.\n\nNested\n\nLine one\nline two\nline three\n\n"
        "alpha\nbeta\n\ncol a\ncol b\n\nend")


def test_entities_decoded():
    html = "<html><body><p>R&amp;D&nbsp;costs &#8212; the Company&#8217;s &#x201C;plan&#x201D; &lt;b&gt;</p></body></html>"
    assert edgar_to_text(html) == "R&D costs — the Company’s “plan” <b>"
    plain = "AT&T and S&P 500; Smith &amp; Wesson&#8217;s 10&nbsp;000 &unknown; &amp"
    assert edgar_to_text(plain) == "AT&T and S&P 500; Smith & Wesson’s 10 000 &unknown; &amp"


def test_unicode_nfkc_except_superscripts_and_fractions():
    assert normalize_unicode("ﬁnance\u00a0Ａ\u2009b\u200bc\u00ad") == "finance A bc"
    assert normalize_unicode("sales¹ and ½ and m² ¨") == "sales¹ and ½ and m² ¨"
    assert normalize_unicode("plain ascii") == "plain ascii"


WORDS = ["zero", "One", "Two", "Three", "Four", "Five", "Six"]


def test_page_furniture_removed():
    body = "".join(
        f"<div><p>{WORDS[n]} is the text of this page.</p><p>{n}</p>"
        f"<p>Acme Corp. | 2024 Form 10-K | {n}</p><p><a href='#toc'>Table of Contents</a></p></div>"
        "<hr style='page-break-after: always'/>"
        for n in range(1, 7))
    html = (f"<html><body>{body}<p>- 7 -</p><p>Page 8 of 40</p><p>F-12</p><p>iv</p><p>Index</p>"
            "<p>-0-</p><p>2024</p><p>civil</p><p>_____</p></body></html>")
    out = edgar_to_text(html)
    assert lines(out) == [x for n in range(1, 7) for x in (f"{WORDS[n]} is the text of this page.", "")] + [
        "-0-", "", "2024", "", "civil"]


def test_repeated_lines_kept_without_pages():
    html = "<html><body>" + "<p>Acme Corp. | 2024 Form 10-K | 1</p>" * 5 + "</body></html>"
    assert lines(edgar_to_text(html)).count("Acme Corp. | 2024 Form 10-K | 1") == 5


def test_repeated_figure_lines_are_data_not_headers():
    text = "\n".join(f"<PAGE> {n}\nItem {n}:\n 19,019,524      $315,907,470\n" for n in range(1, 6))
    out = edgar_to_text(text)
    assert lines(out).count("19,019,524 $315,907,470") == 5


PLAIN = ("<PAGE>   1\r\n                   UNITED STATES\r\n\r\n\r\n\r\n"
         "1.  Name   of issuer:\tAcme &amp; Co.\r\n"
         "________________________________________\r\n"
         "- ----------------------------------------\r\n"
         "<TABLE>\r\n<CAPTION>\r\n               2024        2023\r\n<S>            <C>         <C>\r\n"
         "Net sales    $ 1,234     $ (567)\r\n</TABLE>\r\n"
         "\f                                  2\r\n<PAGE>   2\r\nThe end.\r\n")


def test_plain_text_cleaned():
    out = edgar_to_text(PLAIN)
    assert lines(out) == ["UNITED STATES", "", "1. Name of issuer: Acme & Co.", "", "2024 2023",
                          "Net sales $ 1,234 $ (567)", "", "The end."]
    assert edgar_to_text(PLAIN, keep_tables=False) == "UNITED STATES\n\n1. Name of issuer: Acme & Co.\n\nThe end."
    assert edgar_to_text(PLAIN.replace("\r\n", "\r")) == out  # the .nc feed's bare CR line ends


def test_html_or_plain_text_detection():
    assert is_html("<HTML><BODY>x</BODY></HTML>")
    assert is_html("<div>x</div>")
    assert is_html("text <P>para")
    assert is_html("<?xml version='1.0'?>\n<html xmlns='http://www.w3.org/1999/xhtml'>")
    assert not is_html(PLAIN)
    assert not is_html("<PAGE>  3\nplain <TABLE> <S> <C> <FN> <CAPTION> text")


def test_document_wrapper_cut_to_text():
    wrapped = "<DOCUMENT>\n<TYPE>EX-99.1\n<SEQUENCE>2\n<TEXT>\n<html><p>Hello</p></html>\n</TEXT>\n</DOCUMENT>\n"
    assert document_body(wrapped).strip() == "<html><p>Hello</p></html>"
    assert edgar_to_text(wrapped) == "Hello"
    assert document_body("plain <TEXT> inside") == "plain <TEXT> inside"


def test_markers_in_input_cannot_fake_structure():
    assert edgar_to_text(f"<p>a{MARKERS}b</p>") == "a b"


def test_empty_and_invisible_documents_give_empty_text():
    assert edgar_to_text("") == ""
    assert edgar_to_text("<html><body><div style='display:none'>x</div></body></html>") == ""


def test_process_batch_keeps_rows_nulls_and_other_columns():
    table = pa.table({"id": ["a", "b", "c"], "text": ["<p>x&amp;y</p>", None, "plain\n\n\n\ntext"], "n": [1, 2, 3]})
    out = op().process_batch(table)
    assert out.column_names == ["id", "text", "n"]
    assert out.column("text").to_pylist() == ["x&y", None, "plain\n\ntext"]
    custom = op(text_key="body").process_batch(table.rename_columns(["id", "body", "n"]))
    assert custom.column("body").to_pylist()[0] == "x&y"


def test_bad_rows_raise_naming_row_and_op():
    table = pa.table({"id": ["good", "bin"], "text": ["<p>ok</p>", "\x00\x01\x02\x03garbage\x00\x00" * 50]})
    with pytest.raises(ValueError, match=r"edgar_html_to_text: row 'bin': looks binary"):
        op().process_batch(table)
    with pytest.raises(ValueError, match=r"edgar_html_to_text: no column 'body'"):
        op(text_key="body").process_batch(table)


def test_params():
    with pytest.raises(ValidationError):
        EdgarHtmlToTextParams(tables="maybe")
    with pytest.raises(ValidationError):
        EdgarHtmlToTextParams(min_line_chars=-1)
    with pytest.raises(ValidationError):
        EdgarHtmlToTextParams(table="keep")
    assert op(min_line_chars=5).process_text("<p>ab</p><p>long enough</p><table><tr><td>12,345</td></tr></table>") \
        == "long enough\n\n12,345"


def test_registered():
    from raypress.operators.registry import get_op

    assert get_op("edgar_html_to_text") is EdgarHtmlToText
    assert EdgarHtmlToText.requires == {"selectolax": "curation"}


# --- real filings ------------------------------------------------------------------------------


def read(shared_data: Path, name: str) -> str:
    return (shared_data / "edgar" / name).read_text(encoding="utf-8", errors="replace")


def texts(raw: str) -> list[str]:
    """The ``<TEXT>`` parts of a full SGML submission."""
    return re.findall(r"<TEXT>(.*?)</TEXT>", raw.replace("\r\n", "\n").replace("\r", "\n"), re.S)


@pytest.fixture(scope="module")
def apple_raw(shared_data: Path) -> str:
    return read(shared_data, "Apple.10-K.html")


@pytest.fixture(scope="module")
def apple(apple_raw: str) -> str:
    return edgar_to_text(apple_raw)


def test_apple_10k_has_no_tags_or_hidden_header(apple_raw: str, apple: str):
    assert "<ix:header>" in apple_raw and "0000320193" in apple_raw and "MarketableSecuritiesCurrent" in apple_raw
    assert TAG.search(apple) is None
    assert "ix:" not in apple
    assert "0000320193" not in apple  # the CIK: only in the hidden header's contexts
    assert "MarketableSecuritiesCurrent" not in apple  # a dei/us-gaap enumeration value under ix:hidden
    assert not any(m in apple for m in MARKERS)
    assert "Apple Inc. designs" in apple or "The Company designs, manufactures and markets smartphones" in apple


def test_apple_10k_table_numbers_in_order(apple: str):
    rows = lines(apple)
    assert "Net income | $93,736 | $96,995 | $99,803" in rows
    assert "Other income/(expense), net | 269 | (565) | (334)" in rows
    sales = [r for r in rows if r.startswith("Total net sales |")]
    assert sales and all(re.fullmatch(r"Total net sales \| \$?391,035 \| .*\$?383,285 \| .*\$?394,328", r) for r in sales)


def test_apple_10k_tables_drop(apple_raw: str, apple: str):
    dropped = edgar_to_text(apple_raw, keep_tables=False)
    assert "Net income | $93,736" not in dropped
    assert "Total net sales |" not in dropped
    assert " | " not in dropped
    assert len(dropped) < len(apple)
    assert "The Company designs, manufactures and markets smartphones" in dropped


def test_apple_10k_page_furniture_removed(apple_raw: str, apple: str):
    assert apple_raw.count("Apple Inc. | 2024 Form 10-K |") > 50
    assert "Form 10-K |" not in apple
    for line in lines(apple):
        assert not re.fullmatch(r"(?:[Pp]age\s*)?-?\s*\d{1,3}\s*-?|Page \d+ of \d+|Table of Contents", line), line
    assert "\n\n\n" not in apple and "  " not in apple


def test_apple_10k_entities_decoded(apple_raw: str, apple: str):
    assert "R&amp;D" in apple_raw and "&#8217;" in apple_raw and "&#160;" in apple_raw
    assert "R&D" in apple and "Registrant’s telephone number" in apple
    assert not re.search(r"&(?:#\d+|#x[0-9a-f]+|amp|nbsp|lt|gt);", apple, re.I)
    assert "\u00a0" not in apple


def test_flushing_table_of_contents_lines_removed(shared_data: Path):
    raw = read(shared_data, "Flushing-424B5.html")
    assert raw.count("TABLE OF CONTENTS") > 40 and "&nbsp;" in raw
    out = edgar_to_text(raw)
    assert not [s for s in lines(out) if s.lower() == "table of contents"]
    assert "&nbsp;" not in out and "Defeasance and Discharge. The indenture may" in out
    assert "RISK FACTORS | S-4" in lines(out)  # the contents table itself stays, as rows


def test_cabot_running_header_in_layout_tables_removed(shared_data: Path):
    raw = read(shared_data, "cabot.DEF14A.ixbrl.html")
    out = edgar_to_text(raw)
    assert raw.count("2024 PROXY STATEMENT") > 80
    assert lines(out).count("2024 PROXY STATEMENT") == 0
    assert TAG.search(out) is None and "ix:" not in out


def test_1995_plain_text_filing_cleaned(shared_data: Path):
    docs = texts(read(shared_data, "0000950129-95-001652.txt"))
    assert len(docs) == 2 and not is_html(docs[0])
    out = edgar_to_text(docs[0])
    rows = lines(out)
    assert "<PAGE>" in docs[0] and "<PAGE>" not in out
    assert rows[0] == "U.S. SECURITIES AND EXCHANGE COMMISSION"
    assert "19,019,524 $315,907,470" in rows and "-0-" in rows
    assert "(vii) Fee due [line (i) or line (v) multiplied by" in rows
    assert "December 20, 1995" in rows
    assert not any(re.fullmatch(r"[_\-\s]+", s) for s in rows if s)
    assert "  " not in out and "\n\n\n" not in out and all(s == s.strip() for s in rows)
    assert edgar_to_text(docs[1]).startswith("[LETTERHEAD]")


def test_1998_plain_text_tables(shared_data: Path):
    docs = texts(read(shared_data, "0001011438-98-000429.txt"))
    exhibit = docs[1]
    assert "<TABLE>" in exhibit and "<S>" in exhibit
    out = edgar_to_text(exhibit)
    assert "<S>" not in out and "<C>" not in out and "<TABLE>" not in out
    assert ("I-1F 1,184,000.00 1,156,444.26 9,162.44 25,739.98 34,902.42 0.00 0.00 1,130,704.28"
            in lines(out))
    dropped = edgar_to_text(exhibit, keep_tables=False)
    assert "1,156,444.26" not in dropped and "STATEMENT TO CERTIFICATEHOLDERS" in dropped


def test_every_shared_document_converts(shared_data: Path):
    for path in sorted((shared_data / "edgar").iterdir()):
        if path.suffix not in (".html", ".txt", ".nc"):
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        parts = texts(raw) if path.suffix in (".txt", ".nc") else [raw]
        for part in parts:
            if part.lstrip().startswith("begin 644"):  # uuencoded binaries: the reader drops them
                continue
            out = edgar_to_text(part)
            assert not any(m in out for m in MARKERS), path.name
            if is_html(part):
                assert TAG.search(out) is None, (path.name, TAG.search(out))
        if path.suffix == ".html":
            assert len(edgar_to_text(raw)) > 1000, path.name
