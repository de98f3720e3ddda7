"""read_warc's per-file parser (no Ray): the shared sample WARCs, bad files, charsets, resynchronisation."""

from __future__ import annotations

import gzip
import hashlib
import io
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from raypress.operators.io.read_warc import (
    HTML_SCHEMA,
    IMAGE_SCHEMA,
    ReadWarc,
    read_warc_file,
)
from raypress.operators.io.sniff.html_charset import UndecodableHtml, decode_html
from raypress.schema import DETAIL_COL, KIND_COL, NODE_COL, REASON_COL, TOMBSTONE_COLS

PNG_1x1 = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)


def rows_of(path: Path | str, content: str = "html", **kw) -> list[dict]:
    tables = list(read_warc_file(str(path), str(path), "warc", content, **kw))
    schema = tables[0].schema if tables else None
    assert all(t.schema == schema for t in tables)  # one schema per file: blocks concatenate
    return [r for t in tables for r in t.to_pylist()]


def live(rows: list[dict]) -> list[dict]:
    return [r for r in rows if r[NODE_COL] is None]


def dead(rows: list[dict]) -> list[tuple[str, str]]:
    return [(r[KIND_COL], r[REASON_COL]) for r in rows if r[NODE_COL] is not None]


# ---- the shared sample files --------------------------------------------------------------------

VALID = {  # file -> (live html rows, tombstones (kind, reason))
    "resiliparse/warcfile.warc.gz": (16, []),
    "resiliparse/clueweb-quirk.warc.gz": (29, []),
    "warcio/example.warc.gz": (1, []),
    "warcio/example-iana.org-chunked.warc": (1, []),
    "warcio/post-test.warc.gz": (0, [("filtered", "not_html")] * 3),
    "warcio/example-resource.warc.gz": (1, []),
    "warcio/example.arc.gz": (1, []),
}


@pytest.mark.parametrize("name", sorted(VALID))
def test_valid_files_give_one_row_per_response_record(shared_data, name):
    rows = rows_of(shared_data / "warc" / name)
    n_live, tomb = VALID[name]
    assert len(live(rows)) == n_live
    assert sorted(dead(rows)) == sorted(tomb)
    assert len({r["id"] for r in rows}) == len(rows)
    for r in live(rows):
        assert r["source"] == "html" and r["html"] and r["charset"] and r["url"].startswith("http")


def test_common_crawl_charsets_decode(shared_data):
    rows = {r["url"]: r for r in live(rows_of(shared_data / "warc/resiliparse/warcfile.warc.gz"))}
    ru = rows["http://01spb.ru/company/"]
    assert ru["charset"] == "cp1251" and ru["http_status"] == 200
    assert sum("\u0400" <= c <= "\u04ff" for c in ru["html"]) > 100  # Cyrillic, not mojibake
    cn = rows["http://037426.cn/"]  # HTTP says gb2312: decoded with its superset gb18030
    assert cn["charset"] == "gb18030" and sum("\u4e00" <= c <= "\u9fff" for c in cn["html"]) > 100
    assert all(r["html"].count("\ufffd") == 0 for r in rows.values())
    assert rows["http://003338.cn/l41/481397.html"]["id"].endswith("warcfile.warc.gz@940")


def test_clueweb_quirks_warc_018_euc_jp_broken_dates(shared_data):
    rows = live(rows_of(shared_data / "warc/resiliparse/clueweb-quirk.warc.gz"))
    assert {r["charset"] for r in rows} == {"euc_jp"}
    assert rows[0]["warc_date"] == "2008-10-294T05:21:46-0700"  # kept as written, not parsed
    assert sum("\u3040" <= c <= "\u30ff" for c in rows[0]["html"]) > 50  # kana
    assert rows[0]["id"].endswith("@317")


def test_chunked_transfer_encoding_is_undone(shared_data):
    (row,) = live(rows_of(shared_data / "warc/warcio/example-iana.org-chunked.warc"))
    assert row["id"].endswith("@405")
    assert "Internet Assigned Numbers Authority" in row["html"]
    assert row["html"].rstrip().endswith("</html>")


def test_resource_record_has_no_http_status(shared_data):
    (row,) = live(rows_of(shared_data / "warc/warcio/example-resource.warc.gz"))
    assert row["http_status"] is None and row["content_type"] == "text/html"


def test_arc_file_is_read_as_warc(shared_data):
    (row,) = live(rows_of(shared_data / "warc/warcio/example.arc.gz"))
    assert row["url"] == "http://example.com/" and "Example Domain" in row["html"]


def test_clipped_gzip_goes_to_quarantine(shared_data):
    rows = rows_of(shared_data / "warc/bad/clipped.warc.gz")
    assert dead(rows) == [("error", "truncated_record")]
    assert "lacks 13068 of its 88275 bytes" in rows[0][DETAIL_COL]
    assert rows[0]["url"].startswith("http://www.houstonpress.com/")  # the tombstone says what was lost


def test_wrong_content_length_goes_to_quarantine_and_reading_goes_on(shared_data):
    rows = rows_of(shared_data / "warc/bad/example-trunc.warc")
    assert dead(rows) == [("error", "malformed_record")]
    assert rows[0]["id"].endswith("@1197") and "Content-Length (973)" in rows[0][DETAIL_COL]


def test_single_member_gzip_is_read_whole(shared_data):
    (row,) = rows_of(shared_data / "warc/bad/example-bad-non-chunked.warc.gz")
    assert row[NODE_COL] is None and row["id"].endswith("@0+1197")  # member 0, 1197 bytes into it
    assert "Example Domain" in row["html"]


def test_records_split_across_gzip_members_are_joined(shared_data):
    (row,) = rows_of(shared_data / "warc/bad/example-wrong-chunks.warc.gz")
    assert row[NODE_COL] is None and row["html"].rstrip().endswith("</html>")


def test_images_read_filters_html_records(shared_data):
    rows = rows_of(shared_data / "warc/resiliparse/warcfile.warc.gz", "images")
    assert dead(rows) == [("filtered", "not_image")] * 16
    assert set(rows[0]) == set(IMAGE_SCHEMA.names) | set(TOMBSTONE_COLS)


# ---- synthetic WARCs ----------------------------------------------------------------------------


def build_warc(records: list[tuple], gz: bool = True) -> tuple[bytes, list[int]]:
    """Records (url, body, content_type, status[, type]) as WARC bytes, and each record's offset."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=gz)
    offsets = []
    for url, body, ctype, status, *rest in records:
        rtype = rest[0] if rest else "response"
        offsets.append(out.tell())
        if rtype == "resource":
            rec = writer.create_warc_record(url, "resource", payload=io.BytesIO(body), warc_content_type=ctype)
        else:
            headers = [("Content-Type", ctype)] if ctype else []
            http = StatusAndHeaders(status, headers, protocol="HTTP/1.1")
            rec = writer.create_warc_record(url, rtype, payload=io.BytesIO(body), http_headers=http)
        writer.write_record(rec)
    return out.getvalue(), offsets


def page(text: str, charset: str = "utf-8") -> bytes:
    return f"<html><body><p>{text}</p></body></html>".encode(charset)


THREE = [
    ("http://a.test/1", page("first"), "text/html; charset=utf-8", "200 OK"),
    ("http://a.test/2", page("second"), "text/html; charset=utf-8", "200 OK"),
    ("http://a.test/3", page("third"), "text/html; charset=utf-8", "200 OK"),
]


def write(tmp_path: Path, data: bytes, name: str = "x.warc.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def htmls(rows: list[dict]) -> list[str]:
    return [r["html"] for r in live(rows)]


def test_ids_are_path_at_offset_and_stable(tmp_path):
    data, offsets = build_warc(THREE)
    path = write(tmp_path, data)
    rows = rows_of(path)
    assert [r["id"] for r in rows] == [f"{path}@{o}" for o in offsets]
    assert [r["id"] for r in rows_of(path)] == [r["id"] for r in rows]


def test_corrupt_gzip_member_is_quarantined_and_later_records_read(tmp_path):
    data, offsets = build_warc(THREE)
    broken = bytearray(data)
    mid = (offsets[1] + offsets[2]) // 2
    broken[mid:mid + 40] = b"\x00" * 40  # the deflate data of record 2
    rows = rows_of(write(tmp_path, bytes(broken)))
    assert [r["url"] for r in live(rows)] == ["http://a.test/1", "http://a.test/3"]
    (bad,) = [r for r in rows if r[NODE_COL] is not None]
    assert bad[REASON_COL] == "corrupt_gzip"  # zlib's message depends on where the damage lands
    assert f"gzip member at offset {offsets[1]} is corrupt" in bad[DETAIL_COL]
    assert bad["id"].startswith(f"{tmp_path / 'x.warc.gz'}@{offsets[1]}")


def test_file_cut_inside_a_record(tmp_path):
    data, offsets = build_warc(THREE)
    rows = rows_of(write(tmp_path, data[: offsets[1] + 200]))
    assert [r["url"] for r in live(rows)] == ["http://a.test/1"]
    assert dead(rows) == [("error", "truncated_record")]


def test_garbage_between_members_is_skipped(tmp_path):
    data, offsets = build_warc(THREE)
    junk = b"this is not gzip at all\n" * 10
    rows = rows_of(write(tmp_path, data[: offsets[1]] + junk + data[offsets[1]:]))
    assert [r["url"] for r in live(rows)] == ["http://a.test/1", "http://a.test/2", "http://a.test/3"]
    assert dead(rows) == [("error", "malformed_record")]
    assert rows[1]["id"].endswith(f"@{offsets[1]}")  # where the junk starts
    assert rows[2]["id"].endswith(f"@{offsets[1] + len(junk)}")  # record 2 keeps its true offset


def test_nul_padding_at_the_end_is_not_an_error(tmp_path):
    data, _ = build_warc(THREE)
    rows = rows_of(write(tmp_path, data + b"\x00" * 512))
    assert len(live(rows)) == 3 and dead(rows) == []


def test_plain_warc_with_a_malformed_header_resynchronises(tmp_path):
    data, offsets = build_warc(THREE, gz=False)
    bad = b"WARC/1.0\r\nWARC-Type: response\r\nContent-Length: lots\r\n\r\n"  # not a length
    spliced = data[: offsets[1]] + b"garbage line\r\n" + data[offsets[1]:]
    rows = rows_of(write(tmp_path, spliced, "x.warc"))
    assert [r["url"] for r in live(rows)] == ["http://a.test/1", "http://a.test/2", "http://a.test/3"]
    assert dead(rows) == [("error", "malformed_record")]  # the stray line before record 2
    rows = rows_of(write(tmp_path, data[: offsets[1]] + bad + data[offsets[1]:], "y.warc"))
    assert [r["url"] for r in live(rows)] == ["http://a.test/1", "http://a.test/2", "http://a.test/3"]
    assert [d[1] for d in dead(rows)] == ["malformed_record"]


def test_not_a_warc_at_all_is_one_tombstone(tmp_path):
    rows = rows_of(write(tmp_path, b"<html>just a page</html>\n" * 5, "page.warc"))
    assert dead(rows) == [("error", "not_a_warc")]
    rows = rows_of(write(tmp_path, gzip.compress(b"hello, not a warc\n"), "hello.warc.gz"))
    assert dead(rows) == [("error", "not_a_warc")]


def test_non_2xx_and_oversized_records_are_filtered(tmp_path):
    data, _ = build_warc([
        ("http://a.test/404", page("gone"), "text/html", "404 Not Found"),
        ("http://a.test/301", b"", "text/html", "301 Moved Permanently"),
        ("http://a.test/big", page("x" * 5000), "text/html", "200 OK"),
    ])
    path = write(tmp_path, data)
    assert dead(rows_of(path, max_record_bytes=4000)) == [
        ("filtered", "http_status_not_2xx"), ("filtered", "http_status_not_2xx"), ("filtered", "record_too_large")]
    rows = rows_of(path, only_2xx=False)
    assert [r["http_status"] for r in live(rows)] == [404, 200]
    assert dead(rows) == [("filtered", "empty_body")]


def test_images_content_keeps_image_records_keyed_by_url(tmp_path):
    data, _ = build_warc([
        ("http://a.test/p", page("page"), "text/html", "200 OK"),
        ("http://a.test/i.png", PNG_1x1, "image/png", "200 OK"),
        ("http://a.test/sniffed", PNG_1x1, "application/octet-stream", "200 OK"),
        ("http://a.test/data.json", b"{}", "application/json", "200 OK"),
    ])
    path = write(tmp_path, data)
    rows = rows_of(path, "images")
    assert [(r["url"], r["content_type"]) for r in live(rows)] == [
        ("http://a.test/i.png", "image/png"), ("http://a.test/sniffed", "application/octet-stream")]
    assert live(rows)[0]["image_bytes"] == PNG_1x1
    assert live(rows)[0]["sha256"] == hashlib.sha256(PNG_1x1).hexdigest()
    assert dead(rows) == [("filtered", "not_image"), ("filtered", "not_image")]
    html_rows = rows_of(path, "html")
    assert [r["url"] for r in live(html_rows)] == ["http://a.test/p"]
    assert dead(html_rows) == [("filtered", "not_html")] * 3
    assert set(html_rows[0]) == set(HTML_SCHEMA.names) | set(TOMBSTONE_COLS)


def test_html_without_content_type_is_sniffed(tmp_path):
    data, _ = build_warc([
        ("http://a.test/1", b"<!DOCTYPE html><html><p>x</p></html>", None, "200 OK"),
        ("http://a.test/2", b"plain words, no markup", None, "200 OK"),
    ])
    rows = rows_of(write(tmp_path, data))
    assert [r["url"] for r in live(rows)] == ["http://a.test/1"]
    assert dead(rows) == [("filtered", "not_html")]


# ---- charsets -----------------------------------------------------------------------------------


def test_charset_from_http_header_then_meta_then_detection():
    ru = "<html><body><p>" + "Привет, мир! Это проверка кодировки. " * 20 + "</p></body></html>"
    assert decode_html(ru.encode("cp1251"), "windows-1251") == (ru, "cp1251")
    meta = ru.replace("<html>", '<html><head><meta http-equiv="Content-Type" content="text/html; charset=koi8-r">')
    assert decode_html(meta.encode("koi8-r"), None) == (meta, "koi8-r")
    meta5 = ru.replace("<html>", "<html><head><meta charset='windows-1251'>")
    assert decode_html(meta5.encode("cp1251"), "bogus-charset") == (meta5, "cp1251")
    text, codec = decode_html(ru.encode("cp1251"), None)  # no label anywhere: uchardet
    assert text == ru and codec == "cp1251"


def test_latin1_label_means_windows_1252_and_bom_wins():
    assert decode_html("caf\u00e9 \u2019".encode("cp1252"), "iso-8859-1") == ("caf\u00e9 \u2019", "cp1252")
    assert decode_html(b"\xef\xbb\xbf<p>caf\xc3\xa9</p>", "cp1252") == ("<p>caf\u00e9</p>", "utf-8")


def test_a_few_invalid_bytes_are_replaced_not_fatal():
    body = ("<p>" + "valid text " * 200 + "</p>").encode() + b"\xff"
    text, codec = decode_html(body, "utf-8")
    assert codec == "utf-8" and text.count("\ufffd") == 1


def test_invalid_utf8_beyond_tolerance_falls_back_to_another_charset():
    body = ("<p>" + "d\u00e9j\u00e0 vu, na\u00efve caf\u00e9 " * 50 + "</p>").encode("cp1252")
    text, codec = decode_html(body, "utf-8")  # header lies: 150 invalid UTF-8 sequences
    assert codec == "cp1252" and "na\u00efve" in text


def test_binary_body_labelled_html_is_a_decode_error(tmp_path):
    blob = bytes(range(256)) * 40  # invalid in UTF-8 and detected as nothing better
    with pytest.raises(UndecodableHtml, match="invalid characters with every charset tried"):
        decode_html(blob, "utf-8")
    controls = bytes(range(1, 9)) * 200 + page("valid ASCII, but mostly control characters")
    with pytest.raises(UndecodableHtml, match="binary data"):
        decode_html(controls, "utf-8")
    data, _ = build_warc([("http://a.test/bin", blob, "text/html", "200 OK")])
    rows = rows_of(write(tmp_path, data))
    assert dead(rows) == [("error", "decode_error")]


def test_params_and_declared_columns():
    op = ReadWarc(ReadWarc.Params(paths="x/*.warc.gz"))
    assert op.params.paths == ["x/*.warc.gz"] and op.params.content == "html"
    assert "html" in op.columns_written() and "charset" in op.columns_written()
    img = ReadWarc(ReadWarc.Params(paths=["a"], content="images"))
    assert img.columns_written() == ("url", "image_bytes", "content_type", "sha256")
    with pytest.raises(ValueError):
        ReadWarc.Params(paths=["a"], content="pdf")
    with pytest.raises(ValueError):
        ReadWarc.Params(paths=["a"], unknown=1)
    assert all(f.description for f in ReadWarc.Params.model_fields.values())
    assert pa.types.is_int32(HTML_SCHEMA.field("http_status").type)
    assert Counter(HTML_SCHEMA.names)["id"] == 1
