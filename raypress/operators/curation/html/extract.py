"""An HTML page -> an interleaved document (texts and image URLs in page order): the extraction
behind ``html_to_interleaved``, kept apart from the op so benchmarks and tests call it directly.

OBELICS-style simplification with selectolax (lexbor), done in one document-order walk of the
DOM: boilerplate elements are skipped with their content (scripts, styles, navigation, footers,
forms, embedded frames...), formatting tags are unwrapped so their text joins the surrounding text.
Text inside one block element is one paragraph (whitespace collapsed, ``<pre>`` kept as is);
block elements and ``<br>`` end a paragraph; an ``<img>`` ends the paragraph and becomes an image
position.  Consecutive paragraphs are one text position joined by a blank line, so text and
image positions alternate as in OBELICS/MINT-1T.

Image URLs are resolved against ``<base href>`` (else the page URL) with urljoin; ``data:`` URIs
and anything that does not resolve to http(s) are skipped; ``srcset``/``data-src`` stand in for a
missing ``src``.  No bytes are fetched here (``attach_images`` does that, offline).

A page that yields neither text nor image becomes an *empty document* (empty lists), not an
error: it is a valid, merely useless, document that the following filters drop with a reason.
Broken HTML does not raise (lexbor repairs it as browsers do).
"""

from __future__ import annotations

import re
from urllib.parse import urljoin, urlsplit

from raypress.operators.shared.documents import Document

# Removed with everything inside: never content (or not text a reader sees as the page's prose).
DROP_TAGS = frozenset((
    "head", "script", "style", "noscript", "template", "nav", "footer", "aside", "form", "iframe", "frame",
    "frameset", "object", "embed", "applet", "svg", "math", "canvas", "video", "audio", "map", "button",
    "input", "select", "textarea", "option", "dialog",
))
# Unwrapped (tag removed, text kept in the surrounding paragraph).
INLINE_TAGS = frozenset((
    "a", "abbr", "acronym", "b", "bdi", "bdo", "big", "cite", "code", "data", "del", "dfn", "em", "font", "i",
    "ins", "kbd", "label", "mark", "nobr", "picture", "q", "s", "samp", "small", "span", "strike", "strong",
    "sub", "sup", "time", "tt", "u", "var", "wbr",
))
# Attributes tried, in order, when <img src> is missing or a data: URI (lazy loading).
LAZY_SRC_ATTRS = ("data-src", "data-lazy-src", "data-original", "data-url")
SRCSET_ATTRS = ("srcset", "data-srcset")
_URL_NOISE = re.compile(r"[\t\n\r]")


def html_document(doc_id: str, url: str | None, html: str | None, drop_tags=DROP_TAGS,
                  inline_tags=INLINE_TAGS) -> Document:
    """The interleaved document of one page (empty when nothing is left)."""
    doc = Document(id=doc_id, url=url, source="html")
    for kind, value in html_parts(html or "", url, drop_tags, inline_tags):
        if kind == "text":
            doc.add_text(value)
        else:
            doc.add_image(value)
    return doc


def html_parts(html: str, url: str | None, drop_tags=DROP_TAGS, inline_tags=INLINE_TAGS) -> list[tuple[str, str]]:
    """[("text", paragraphs joined by a blank line) | ("image", absolute URL), ...] in page order,
    never two text parts in a row."""
    from selectolax.lexbor import LexborHTMLParser

    if not html.strip():
        return []
    tree = LexborHTMLParser(html)
    root = tree.body or tree.root
    if root is None:
        return []
    walker = _Walker(_base_url(tree, url), _tag_set(drop_tags), _tag_set(inline_tags))
    walker.walk(root)
    return walker.parts()


def _tag_set(tags) -> frozenset[str]:
    return tags if isinstance(tags, frozenset) else frozenset(t.lower() for t in tags)


def _base_url(tree, url: str | None) -> str | None:
    """What relative URLs resolve against: <base href> (itself resolved against the page URL)."""
    node = tree.css_first("base[href]")
    href = node.attributes.get("href") if node is not None else None
    if href:
        href = _URL_NOISE.sub("", href.strip())
        try:
            return urljoin(url, href) if url else href
        except ValueError:  # an unparsable <base>: browsers ignore it too
            return url
    return url


class _Walker:
    """Document-order walk emitting paragraphs and images (iterative: deep broken pages nest a lot).

    Dropping and unwrapping happen here rather than with selectolax's strip_tags/unwrap_tags:
    those scan the whole tree once per tag name, ten times the cost of this single walk on
    large pages.  A dropped element is not entered; an inline one is entered without ending the
    paragraph, which is exactly what unwrapping it would give."""

    def __init__(self, base: str | None, drop: frozenset[str], inline: frozenset[str]):
        self.base = base
        self.drop = drop
        self.inline = inline
        self.buf: list[str] = []
        self.items: list[tuple[str, str]] = []

    def walk(self, root) -> None:
        stack: list[tuple[object, bool]] = []
        node = root.child
        while node is not None:
            tag = node.tag
            if tag == "-text":
                self.buf.append(node.text_content or "")
            elif tag.startswith("-") or tag in self.drop:
                tag = ""  # comments, doctype, dropped elements: not entered
            elif tag == "img":
                self.flush()
                src = image_url(node.attributes, self.base)
                if src:
                    self.items.append(("image", src))
            elif tag == "br":
                self.flush()
            elif tag == "pre":
                self.flush()
                self._text(_pre_text(node.text(deep=True)))
            else:
                block = tag not in self.inline
                if block:
                    self.flush()
                child = node.child
                if child is not None:
                    stack.append((node, block))
                    node = child
                    continue
            # next sibling, climbing out of finished elements
            while node is not None:
                nxt = node.next
                if nxt is not None:
                    node = nxt
                    break
                if not stack:
                    node = None
                    break
                node, block = stack.pop()
                if block:
                    self.flush()
        self.flush()

    def flush(self) -> None:
        if self.buf:
            self._text(" ".join("".join(self.buf).split()))
            self.buf.clear()

    def _text(self, text: str) -> None:
        if text:
            self.items.append(("text", text))

    def parts(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for kind, value in self.items:
            if kind == "text" and out and out[-1][0] == "text":
                out[-1] = ("text", out[-1][1] + "\n\n" + value)
            else:
                out.append((kind, value))
        return out


def _pre_text(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    return "\n".join(lines).strip("\n")


def image_url(attrs: dict[str, str | None], base: str | None) -> str | None:
    """The absolute http(s) URL of an <img>: src, else a lazy-loading attribute, else srcset's first."""
    candidates = [attrs.get("src")] + [attrs.get(a) for a in LAZY_SRC_ATTRS]
    for attr in SRCSET_ATTRS:
        srcset = attrs.get(attr)
        if srcset:
            candidates.append(srcset.strip().split(",")[0].strip().split(" ")[0])
    for raw in candidates:
        if not raw:
            continue
        ref = _URL_NOISE.sub("", raw.strip())
        if not ref or ref.lower().startswith("data:"):
            continue
        try:
            resolved = urljoin(base, ref) if base else ref
            scheme = urlsplit(resolved).scheme.lower()
        except ValueError:  # e.g. an invalid IPv6 host: not a usable URL
            continue
        if scheme in ("http", "https"):
            return resolved
    return None
