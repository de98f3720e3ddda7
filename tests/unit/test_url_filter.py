"""url_blocklist_filter: domain blocklist (host and parents), strict/hard/soft URL words."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pydantic import ValidationError

from raypress.operators.curation.url_blocklist_filter import (
    SHIPPED_DIR,
    STAT_NAMES,
    UrlBlocklistFilter,
    load_list,
    normalize,
    parent_domains,
    url_host,
    url_words,
)
from raypress.operators.registry import get_op


def run(urls, **params):
    op = UrlBlocklistFilter(UrlBlocklistFilter.Params(**params))
    stats = op.compute_stats(pa.table({"url": pa.array(urls, pa.string())}))
    assert tuple(stats) == STAT_NAMES
    return stats, op.drop_reasons(stats)


def reasons(urls, **params):
    return run(urls, **params)[1]


def test_registered_and_shipped_lists():
    assert get_op("url_blocklist_filter") is UrlBlocklistFilter
    for name, kind in [("domains.txt", "domain"), ("strict_words.txt", "subword"),
                       ("hard_words.txt", "word"), ("soft_words.txt", "word")]:
        entries = load_list(str(SHIPPED_DIR / name), kind)
        assert len(entries) >= 10, name
        assert not any(e.startswith("#") or " " in e for e in entries)
    assert "pornhub.com" in load_list(str(SHIPPED_DIR / "domains.txt"), "domain")


def test_helpers():
    assert normalize("https://My-PORN_site.com/") == "httpsmypornsitecom"
    assert url_words("https://www.Hot-Sex.net/x?a=1") == {"https", "www", "hot", "sex", "net", "x", "a", "1"}
    assert url_host("HTTPS://user:pw@WWW.Example.COM.:8080/p") == "www.example.com"
    assert url_host("example.com/page") == "example.com"
    assert url_host("http://[::1]:80/") == "::1"
    assert url_host("http://[bad/") is None
    assert url_host("not a url") is None
    assert url_host("mailto:someone@example.com") is None
    assert parent_domains("a.b.example.com") == ["a.b.example.com", "b.example.com", "example.com", "com"]


def test_domain_matches_host_and_parents_only():
    got = reasons([
        "https://pornhub.com/view",
        "https://www.pornhub.com/",
        "http://a.b.xvideos.com:8080/x",
        "https://XNXX.COM./",
        "https://notchaturbate.com/",           # a different domain ending in a listed one's name
        "https://chaturbate.com.example.org/",  # the listed name as a subdomain elsewhere
        "https://en.wikipedia.org/wiki/Sex_education",
    ])
    assert got[:4] == ["url_domain_blocklisted"] * 4
    assert got[4] is None and got[5] is None
    assert got[6] == "url_hard_word"  # "sex" is a whole word of the URL


def test_strict_words_match_inside_words():
    stats, got = run([
        "https://example.com/MyPornCollection",
        "https://example.com/some-hentai-gallery",
        "https://example.com/sussex-camera-club",  # "sexcam" is deliberately not a strict word
        "https://example.com/ice-cream-pie",
    ])
    assert got == ["url_strict_word", "url_strict_word", None, None]
    assert stats["url_strict_hits"][0] == 1


def test_hard_words_are_whole_words():
    got = reasons([
        "https://example.com/xxx/pictures",
        "https://example.com/data-analysis",  # contains "anal" but not as a word
        "https://www.sussex.ac.uk/",            # contains "sex" but not as a word
        "https://example.com/Anal-Fissure",
    ])
    assert got == ["url_hard_word", None, None, "url_hard_word"]


def test_soft_words_threshold_boundary():
    stats, got = run([
        "https://example.com/teen-books",                 # 1 soft word
        "https://example.com/teen-dating-advice",         # 2 different soft words
        "https://example.com/teen/teen/teen",             # 1 different soft word, repeated
        "https://example.com/hot-teen-dating",            # 3
    ])
    assert stats["url_soft_hits"] == [1, 2, 1, 3]
    assert got == [None, "url_soft_words", None, "url_soft_words"]
    assert reasons(["https://example.com/teen-dating-advice"], soft_threshold=3) == [None]
    assert reasons(["https://example.com/teen-books"], soft_threshold=1) == ["url_soft_words"]


def test_reason_order_domain_before_words():
    assert reasons(["https://pornhub.com/teen-dating-xxx"]) == ["url_domain_blocklisted"]
    assert reasons(["https://example.com/porn/xxx"]) == ["url_strict_word"]


def test_missing_urls():
    urls = [None, "", "   ", "mailto:someone", "https://example.com/ok"]
    stats, got = run(urls)
    assert got == ["url_missing"] * 4 + [None]
    assert stats["url_missing"] == [True, True, True, True, False]
    # kept when asked: the word rules still see the string
    assert reasons(urls + ["file:///data/xxx.html"], drop_missing_url=False) == [None] * 5 + ["url_hard_word"]


def test_custom_lists_and_allowlist(tmp_path):
    domains = tmp_path / "domains.txt"
    domains.write_text("# comment\n*.Bad-Site.org\n\nother.net.\n")
    words = tmp_path / "words.txt"
    words.write_text("casino\n")
    allow = tmp_path / "allow.txt"
    allow.write_text("good.edu\n")
    got = reasons(
        ["https://x.bad-site.org/", "https://other.net/", "https://casino.example/",
         "https://lib.good.edu/xxx-porn", "https://example.com/porn"],
        domains_path=str(domains), hard_words_path=str(words), strict_words_path=str(words),
        soft_words_path=str(words), allow_domains_path=str(allow),
    )
    assert got == ["url_domain_blocklisted", "url_domain_blocklisted", "url_strict_word", None, None]


def test_bad_params():
    with pytest.raises(FileNotFoundError, match="does not exist"):
        UrlBlocklistFilter(UrlBlocklistFilter.Params(domains_path="/nonexistent/list.txt"))
    with pytest.raises(ValidationError):
        UrlBlocklistFilter.Params(soft_threshold=0)


def test_url_key_column():
    op = UrlBlocklistFilter(UrlBlocklistFilter.Params(url_key="page_url"))
    assert op.columns_read() == ("page_url",)
    stats = op.compute_stats(pa.table({"page_url": ["https://pornhub.com/"]}))
    assert op.drop_reasons(stats) == ["url_domain_blocklisted"]
