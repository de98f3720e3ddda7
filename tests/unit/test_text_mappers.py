"""Data-Juicer-compatible text mappers: outputs pinned on hand-made and Data-Juicer's own cases."""

from __future__ import annotations

import random
import re
import time

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.base import OpKind
from raypress.operators.registry import get_op
from raypress.operators.text.clean_email_mapper import CleanEmailMapper
from raypress.operators.text.clean_links_mapper import CleanLinksMapper
from raypress.operators.text.punctuation_normalization_mapper import PunctuationNormalizationMapper
from raypress.operators.text.whitespace_normalization_mapper import WhitespaceNormalizationMapper

MAPPERS = {
    "clean_email_mapper": CleanEmailMapper,
    "clean_links_mapper": CleanLinksMapper,
    "whitespace_normalization_mapper": WhitespaceNormalizationMapper,
    "punctuation_normalization_mapper": PunctuationNormalizationMapper,
}


def run(cls, texts, **params):
    op = cls(cls.Params(**params))
    out = op.process_batch(pa.table({"text": texts}))
    return out.column("text").to_pylist()


@pytest.mark.parametrize("name", sorted(MAPPERS))
def test_registered_as_mapper(name):
    cls = get_op(name)
    assert cls is MAPPERS[name]
    assert cls.name == name and cls.kind is OpKind.MAPPER
    assert cls(cls.Params()).columns_read() == ("text",)


@pytest.mark.parametrize("cls", list(MAPPERS.values()))
def test_other_columns_nulls_and_text_key_survive(cls):
    table = pa.table({"id": ["a", "b"], "content": ["x", None], "text": ["keep", "me"]})
    out = cls(cls.Params(text_key="content")).process_batch(table)
    assert out.column_names == ["id", "content", "text"]
    assert out.column("content").to_pylist() == ["x", None]
    assert out.column("text").to_pylist() == ["keep", "me"]
    assert out.column("id").to_pylist() == ["a", "b"]


def test_unknown_param_is_rejected():
    with pytest.raises(ValidationError):
        CleanEmailMapper.Params(replacement="x")


# -- clean_email_mapper: Data-Juicer's test cases ---------------------------------------------

EMAIL_CASES = [
    ("happy day euqdh@cjqi.com", "happy day "),
    ("请问你是谁dasoidhao@1264fg.45om", "请问你是谁dasoidhao@1264fg.45om"),  # TLD must be letters
    ("ftp://examplema-nièrdash@hqbchd.ckdhnfes.cds", "ftp://examplema-niè"),
    ("👊23da44sh12@46hqb12chd.ckdhnfes.comd.dasd.asd.dc", "👊"),
    ("no address here", "no address here"),
    ("", ""),
]


def test_clean_email():
    texts = [t for t, _ in EMAIL_CASES]
    assert run(CleanEmailMapper, texts) == [want for _, want in EMAIL_CASES]


def test_clean_email_repl_and_custom_raw_pattern():
    assert run(CleanEmailMapper, ["happy day euqdh@cjqi.com"], repl="<EMAIL>") == ["happy day <EMAIL>"]
    # Data-Juicer accepts a pattern written as a raw literal; \d is a regex digit here.
    assert run(CleanEmailMapper, ["id 1234 and 5"], pattern=r"r'\d+'", repl="#") == ["id # and #"]
    # A custom pattern is applied even to text without '@' (the fast path is for the default only).
    assert run(CleanEmailMapper, ["a-b"], pattern="-", repl="+") == ["a+b"]


def test_invalid_pattern_is_a_validation_error():
    with pytest.raises(ValidationError, match="invalid regular expression"):
        CleanEmailMapper.Params(pattern="([a-z")


# -- clean_links_mapper ------------------------------------------------------------------------

LINK_CASES = [  # Data-Juicer's test cases
    ("ftp://user:password@ftp.example.com:21/", ""),
    ("FTP://www.example.com/path/to/file.txt", ""),
    ("Ftp://example.com/my-page.HTMl", ""),
    ("hTTps://www.example.com/file.html?param1=value1&param2=value2", ""),
    ("HTTPS://EXAMPLE.COM", ""),
    ("This is a test,https://www.example.com/file.html?param1=value1&param2=value2", "This is a test,"),
    ("这是个测试,https://example.com", "这是个测试,"),
    ("This is a sample@example for test", "This is a sample@example for test"),
    ("abcd:/e f is a sample for test", "abcd:/e f is a sample for test"),
    ("abcd://ef is a sample for test", " is a sample for test"),
    ("This is a test,http://www.测试.com/path/file.html?param1=value1&param2=value2", "This is a test,"),
    ("see www.example.org.", "see ."),  # the final '.' is not part of the link
    ("(see http://a.b/c_(d))", "(see )"),  # balanced parentheses belong to the link
    ("，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％►", "，。、„”“«»１」「《》´∶：？！（）；–—．～’…━〈〉【】％►"),
]


def test_clean_links():
    texts = [t for t, _ in LINK_CASES]
    assert run(CleanLinksMapper, texts) == [want for _, want in LINK_CASES]
    assert run(CleanLinksMapper, ["abcd://ef is"], repl="<LINKS>") == ["<LINKS> is"]


# Data-Juicer's pattern as written there: the oracle for the rewritten (linear-time) one.
DJ_LINKS_PATTERN = (
    r"(?i)\b("
    r"(?:[a-z][\w-]+:(?:\/{1,3}|[a-z0-9%])|www\d{0,3}[.]|[a-z0-9.\-]+[.][a-z]{2,4}\/)"
    r"(?:[^\s()<>]+|\(([^\s()<>]+|(\([^\s()<>]+\)))*\))"
    r"+(?:\(([^\s()<>]+|(\([^\s()<>]+\)))*\)|[^\s`!()\[\]{};:\'\".,<>?«»“”‘’])"
    r")"
)


def test_clean_links_matches_data_juicer_pattern_on_random_text():
    dj = re.compile(DJ_LINKS_PATTERN, re.DOTALL)
    op = CleanLinksMapper(CleanLinksMapper.Params())
    rng = random.Random(7)
    alphabet = "ab:/.()w1 -_'\"é,?x%c<>«"
    for _ in range(4000):
        body = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 14)))
        text = rng.choice(["", "http://", "www.", "x.com/", "ab:"]) + body
        assert op.process_text(text) == dj.sub("", text), text


def test_clean_links_does_not_backtrack_exponentially():
    # Data-Juicer's pattern needs ~2**n steps here; 20 dots already take seconds there.
    text = "ab:c" + "." * 3000 + " tail"
    start = time.perf_counter()
    assert run(CleanLinksMapper, [text]) == [text]
    assert time.perf_counter() - start < 2.0


# -- whitespace_normalization_mapper -------------------------------------------------------------


def test_whitespace_normalization():
    texts = [
        " \u3000a\u2003b\u200bc\n\td\u00a0 ",  # ends stripped (str.strip), inner kinds -> ' '
        "\u200bx",  # zero-width space is not str.isspace: not stripped, but becomes ' '
        "line1\nline2",  # newlines inside are kept
        "a\u0084b\ufffcc\u2060d",  # the control/object/joiner characters of Data-Juicer's list
        "",
        "\u2028",  # a line separator is stripped at the ends
    ]
    assert run(WhitespaceNormalizationMapper, texts) == ["a b c\n d", " x", "line1\nline2", "a b c d", "", ""]


# -- punctuation_normalization_mapper ------------------------------------------------------------


def test_punctuation_normalization():
    texts = [
        "你好，世界。“引号”…",
        "「a」《b》【c】〈d〉（e）",
        "x—y–z．w",
        "１％？！：；～’´►━∶、«»„",
        "ascii stays: ,.!?",
        "",
    ]
    assert run(PunctuationNormalizationMapper, texts) == [
        '你好,世界."引号"...',
        '"a""b"[c]<d>(e)',
        "x - y-z. w",
        "\"%?!:;~''--:,\"\"\"",
        "ascii stays: ,.!?",
        "",
    ]


def test_normalizers_match_data_juicer_character_by_character_definition():
    from raypress.operators.text.punctuation_normalization_mapper import PUNCTUATION_UNICODE
    from raypress.operators.text.words.vocabulary import VARIOUS_WHITESPACES

    rng = random.Random(11)
    alphabet = list("ab \t\n.,") + sorted(VARIOUS_WHITESPACES) + sorted(PUNCTUATION_UNICODE) + ["é", "日", "\u2028"]
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 25))) for _ in range(2000)]
    whitespace = [
        "".join(" " if c in VARIOUS_WHITESPACES else c for c in t.strip()) for t in texts
    ]
    punctuation = ["".join(PUNCTUATION_UNICODE.get(c, c) for c in t) for t in texts]
    assert run(WhitespaceNormalizationMapper, texts) == whitespace
    assert run(PunctuationNormalizationMapper, texts) == punctuation
