"""html_to_interleaved: DOM simplification, document order, URL resolution, broken and empty pages."""

from __future__ import annotations

import pyarrow as pa
import pytest

from raypress.operators.curation.html.extract import html_document, html_parts, image_url
from raypress.operators.curation.html_to_interleaved import HtmlToInterleaved
from raypress.operators.registry import get_op
from raypress.operators.shared.documents import DOCUMENT_COLUMNS, table_to_documents

PAGE = "https://example.org/docs/guide/page.html"


def parts(html: str, url: str | None = PAGE) -> list[tuple[str, str]]:
    return html_parts(html, url)


def test_text_and_images_alternate_in_page_order():
    html = """<html><head><title>Title is not content</title></head><body>
      <h1>Heading</h1><p>First <b>bold</b> paragraph.</p><img src="a.png">
      <p>Second</p><p>Third</p><img src="/img/b.jpg"><img src="https://cdn.example.net/c.webp">
      <div>Last</div></body></html>"""
    assert parts(html) == [
        ("text", "Heading\n\nFirst bold paragraph."),
        ("image", "https://example.org/docs/guide/a.png"),
        ("text", "Second\n\nThird"),
        ("image", "https://example.org/img/b.jpg"),
        ("image", "https://cdn.example.net/c.webp"),
        ("text", "Last"),
    ]


def test_boilerplate_elements_are_removed_with_their_content():
    html = """<body><nav>Home | About</nav><script>var x = "script text";</script>
      <style>p { color: red }</style><noscript>enable js</noscript><form>Name <input value="v">
      <button>Send</button><select><option>opt</option></select></form><iframe src="f.html">frame</iframe>
      <svg><text>svg text</text></svg><aside>related links</aside><!-- a comment -->
      <p>The article.</p><footer>Copyright</footer></body>"""
    assert parts(html) == [("text", "The article.")]


def test_formatting_tags_are_unwrapped_into_the_surrounding_text():
    html = '<p>Hello <b>bo</b>ld, <a href="x">a link</a>, <span>span</span><em>!</em> H<sub>2</sub>O</p>'
    assert parts(html) == [("text", "Hello bold, a link, span! H2O")]


def test_blocks_and_line_breaks_end_paragraphs():
    html = "<div>before<p>inside</p>after<br>next line<ul><li>one</li><li>two</li></ul><td>cell</td></div>"
    assert parts(html) == [("text", "before\n\ninside\n\nafter\n\nnext line\n\none\n\ntwo\n\ncell")]


def test_whitespace_collapses_but_pre_keeps_its_lines():
    html = "<p>  many \n\n   spaces\u00a0and\tnbsp </p><pre>def f():\n    return 1\n</pre>"
    assert parts(html) == [("text", "many spaces and nbsp\n\ndef f():\n    return 1")]


def test_base_href_is_honoured():
    html = '<head><base href="https://static.example.com/v2/"></head><body><img src="pic.png"><img src="/root.png"></body>'
    assert parts(html) == [("image", "https://static.example.com/v2/pic.png"), ("image", "https://static.example.com/root.png")]
    relative_base = '<head><base href="../assets/"></head><body><img src="p.png"></body>'
    assert parts(relative_base) == [("image", "https://example.org/docs/assets/p.png")]


def test_image_url_fallbacks_and_skips():
    base = PAGE
    assert image_url({"src": "  x.png\n"}, base) == "https://example.org/docs/guide/x.png"
    assert image_url({"src": "//cdn.example.com/y.png"}, base) == "https://cdn.example.com/y.png"
    assert image_url({"src": "data:image/gif;base64,R0lGOD", "data-src": "real.jpg"}, base).endswith("/guide/real.jpg")
    assert image_url({"srcset": "small.png 1x, big.png 2x"}, base).endswith("/guide/small.png")
    assert image_url({"src": "data:image/png;base64,AAAA"}, base) is None
    assert image_url({"src": "javascript:void(0)"}, base) is None
    assert image_url({}, base) is None
    assert image_url({"src": "rel.png"}, None) is None  # nothing to resolve against
    assert image_url({"src": "http://abs.example/p.png"}, None) == "http://abs.example/p.png"
    assert image_url({"src": "http://[bad-ipv6/x.png"}, base) is None


def test_broken_html_does_not_raise():
    html = "<<<p>>><div><p>unclosed <b>bold <i>both</div></span></table>tail &amp &nbsp; &#xZZ; <img src=ok.png"
    out = parts(html)
    assert out[0][0] == "text" and "unclosed bold both" in out[0][1]
    assert all(kind in ("text", "image") for kind, _ in out)
    deep = "<div>" * 20_000 + "deep text" + "</div>" * 20_000  # no recursion limit
    assert parts(deep) == [("text", "deep text")]


@pytest.mark.parametrize("html", ["", "   \n ", "<html><head><title>t</title></head><body></body></html>",
                                  "<script>only()</script>", "<img src='data:image/png;base64,AA'>", "<!-- -->"])
def test_pages_without_content_give_an_empty_document(html):
    doc = html_document("id1", PAGE, html)
    assert doc.texts == [] and doc.images == [] and doc.source == "html"


def test_odd_characters_survive():
    assert parts("<p>caf\u00e9 \U0001f600 \ufffd \x00nul</p>") == [("text", "caf\u00e9 \U0001f600 \ufffd nul")]


def table(htmls: list[str | None], urls: list[str | None] | None = None) -> pa.Table:
    n = len(htmls)
    return pa.table({
        "id": [f"w@{i}" for i in range(n)],
        "url": pa.array(urls or [PAGE] * n, pa.string()),
        "html": pa.array(htmls, pa.string()),
        "charset": ["utf-8"] * n,
        "source": ["html"] * n,
    })


def test_process_batch_writes_documents_and_drops_html():
    op = get_op("html_to_interleaved")(HtmlToInterleaved.Params())
    out = op.process_batch(table(['<p>a</p><img src="i.png"><p>b</p>', None, "<script>x</script>"]))
    assert out.num_rows == 3
    assert list(out.column_names[: len(DOCUMENT_COLUMNS)]) == list(DOCUMENT_COLUMNS)
    assert "html" not in out.column_names and out.column("charset").to_pylist() == ["utf-8"] * 3
    docs = table_to_documents(out)
    assert docs[0].texts == ["a", None, "b"]
    assert docs[0].images == [None, "https://example.org/docs/guide/i.png", None]
    assert docs[0].image_bytes == [None] * 3 and docs[0].image_metadata == [None] * 3
    assert [d.id for d in docs] == ["w@0", "w@1", "w@2"]
    assert docs[1].texts == [] and docs[2].texts == []  # null html and a script-only page: empty documents


def test_keep_html_and_custom_tag_lists():
    op = HtmlToInterleaved(HtmlToInterleaved.Params(keep_html=True, drop_tags=["h1"], inline_tags=["p"]))
    out = op.process_batch(table(["<h1>gone</h1><p>x</p><p>y</p><nav>kept now</nav>"]))
    assert out.column("html").to_pylist() == ["<h1>gone</h1><p>x</p><p>y</p><nav>kept now</nav>"]
    assert table_to_documents(out)[0].texts == ["xy\n\nkept now"]
    assert op.columns_read() == ("html", "url")
    with pytest.raises(ValueError):
        HtmlToInterleaved.Params(drop=["x"])
    assert all(f.description for f in HtmlToInterleaved.Params.model_fields.values())


def test_real_pages_from_the_shared_warcs(shared_data):
    from raypress.operators.io.read_warc import read_warc_file

    path = shared_data / "warc" / "resiliparse" / "warcfile.warc.gz"
    rows = [r for t in read_warc_file(str(path), str(path), "w") for r in t.to_pylist() if r["_rp_node"] is None]
    docs = table_to_documents(HtmlToInterleaved(HtmlToInterleaved.Params()).process_batch(
        pa.Table.from_pylist([{k: r[k] for k in ("id", "url", "html", "source")} for r in rows])))
    assert len(docs) == 16
    texts = [d.text() for d in docs]
    assert sum(len(t) > 200 for t in texts) >= 12
    assert not any("function(" in t or "<script" in t for t in texts)  # no script left in the text
    images = [i for d in docs for i in d.images if i]
    assert images and all(i.startswith(("http://", "https://")) for i in images)
