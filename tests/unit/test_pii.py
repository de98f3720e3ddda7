"""pii_mapper: e-mails and valid IPv4/IPv6 addresses -> fixed placeholders, nothing else touched."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.shared.documents import Document, documents_to_table, table_to_documents
from raypress.operators.curation.pii_mapper import PiiMapper
from raypress.operators.registry import get_op


@pytest.fixture(scope="module")
def scrub():
    return PiiMapper(PiiMapper.Params()).scrub


def test_registered():
    assert get_op("pii_mapper") is PiiMapper


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Write to jane.doe+news@mail.example.co.uk.", "Write to email@example.com."),
        ("Contact: <JOHN_SMITH99@Example.ORG>, or call.", "Contact: <email@example.com>, or call."),
        ("a@b.io and c.d@e-f.example.net", "email@example.com and email@example.com"),
        ("mailto:info@debian.org?subject=hi", "mailto:email@example.com?subject=hi"),
        ("twitter @handle and x@y and a@b.c1", "twitter @handle and x@y and a@b.c1"),
        ("end of line info@example.com", "end of line email@example.com"),
    ],
)
def test_emails(scrub, text, expected):
    assert scrub(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Server at 192.168.1.254 is down.", "Server at 0.0.0.0 is down."),
        ("ping 8.8.8.8; curl http://10.0.0.1:8080/admin", "ping 0.0.0.0; curl http://0.0.0.0:8080/admin"),
        ("subnet 172.16.0.0/12", "subnet 0.0.0.0/12"),
        ("255.255.255.255 and 0.0.0.0", "0.0.0.0 and 0.0.0.0"),
        ("invalid 999.1.1.1 and 256.0.0.1", "invalid 999.1.1.1 and 256.0.0.1"),
        ("version 1.2.3.4.5 and v1.2.3.4", "version 1.2.3.4.5 and v1.2.3.4"),
        ("zero-padded 01.02.03.04", "zero-padded 01.02.03.04"),
        ("at 12.30.45 on 01.02.2023, pi 3.14159", "at 12.30.45 on 01.02.2023, pi 3.14159"),
    ],
)
def test_ipv4(scrub, text, expected):
    assert scrub(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("full 2001:0db8:85a3:0000:0000:8a2e:0370:7334.", "full ::."),
        ("compressed 2001:db8::8a2e:370:7334, done", "compressed ::, done"),
        ("loopback ::1 and link-local fe80::1ff:fe23:4567:890a", "loopback :: and link-local ::"),
        ("prefix fe80:: here", "prefix :: here"),
        ("mapped ::ffff:192.0.2.128 ok", "mapped :: ok"),
        ("url http://[2001:db8::1]:443/x", "url http://[::]:443/x"),
        ("time 12:30:45, mac 00:1A:2B:3C:4D:5E", "time 12:30:45, mac 00:1A:2B:3C:4D:5E"),
        ("C++ std::vector<int> and f :: Int -> Int", "C++ std::vector<int> and f :: Int -> Int"),
        ("too many 1:2:3:4:5:6:7:8:9", "too many 1:2:3:4:5:6:7:8:9"),
    ],
)
def test_ipv6(scrub, text, expected):
    assert scrub(text) == expected


def test_plain_text_untouched(scrub):
    text = "Nothing to hide here: 3 apples, 4.5 pears, ratio 16:9 and a@ sign."
    assert scrub(text) == text


def test_custom_placeholders():
    op = PiiMapper(PiiMapper.Params(email_placeholder="<EMAIL>", ipv4_placeholder="<IP>", ipv6_placeholder="<IP6>"))
    assert op.scrub("me@x.com 1.1.1.1 ::1") == "<EMAIL> <IP> <IP6>"
    with pytest.raises(ValidationError):
        PiiMapper.Params(email="x")


def test_interleaved_documents_every_text_position():
    d = Document(id="d", url="https://example.com", source="html")
    d.add_text("mail me: a@example.com")
    d.add_image("https://example.com/img.jpg", b"bytes")
    d.add_text("from 10.1.2.3")
    empty = Document(id="e", url=None, source="html")
    table = documents_to_table([d, empty], extra={"other": ["x@y.com", None]})
    out = PiiMapper(PiiMapper.Params()).process_batch(table)
    docs = table_to_documents(out)
    assert docs[0].texts == ["mail me: email@example.com", None, "from 0.0.0.0"]
    assert docs[0].images == [None, "https://example.com/img.jpg", None]  # images and URLs untouched
    assert docs[0].image_bytes[1] == b"bytes"
    assert docs[1].texts == []
    assert out.column("other").to_pylist() == ["x@y.com", None]  # other columns untouched
    assert out.schema == table.schema


def test_null_texts_list_and_null_positions():
    table = pa.table({"texts": pa.array([None, [None, "ip 1.2.3.4"]], pa.list_(pa.string()))})
    out = PiiMapper(PiiMapper.Params()).process_batch(table)
    assert out.column("texts").to_pylist() == [None, [None, "ip 0.0.0.0"]]


def test_text_key_mode():
    op = PiiMapper(PiiMapper.Params(text_key="text"))
    assert op.columns_read() == ("text",) and op.columns_written() == ("text",)
    table = pa.table({"text": pa.array(["a@b.com at ::1", None, ""], pa.string()), "n": [1, 2, 3]})
    out = op.process_batch(table)
    assert out.column("text").to_pylist() == ["email@example.com at ::", None, ""]
    assert out.column("n").to_pylist() == [1, 2, 3]


def test_long_adversarial_input_is_fast(scrub):
    """No catastrophic backtracking on long runs of address-like characters."""
    import time

    text = ("a" * 5000 + "@") * 20 + ":" * 10000 + "1." * 10000
    start = time.perf_counter()
    scrub(text)
    assert time.perf_counter() - start < 2.0
