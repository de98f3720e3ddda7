"""pii_mapper: replace e-mail addresses and IPv4/IPv6 addresses with fixed placeholders.

MINT-1T removes PII by replacing e-mail and IP addresses with templates.  Placeholders are
fixed strings (not random fakes as in datatrove's PIIFormatter) so the output is deterministic:
``email@example.com`` (the RFC 2606 example domain, as DCLM/FineWeb use), ``0.0.0.0`` and
``::`` (the unspecified addresses).  A regular expression finds candidates and the
``ipaddress`` module decides: ``999.1.1.1``, ``1.2.3.4.5``, ``01.02.03.04``, times such as
``12:30:45`` and MAC addresses are not valid addresses and stay as they are.  Version strings
with exactly four numbers <= 255 (``1.2.3.4``) are valid IPv4 addresses and are replaced.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Callable

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Mapper, Params
from raypress.operators.registry import register

# local part @ one or more domain labels . a TLD of letters; the lookbehind keeps a match from
# starting inside a longer token, the TLD needs 2+ letters so "a@b.c1" is not an address.
EMAIL_RE = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]*@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,63}\b"
)
# four dot-separated numbers, not part of a longer dotted/word token (1.2.3.4.5, v1.2.3.4)
IPV4_RE = re.compile(r"(?<![\w.])\d{1,3}(?:\.\d{1,3}){3}(?![\w]|\.\d)")
# hex groups and colons (2+ colons), optionally ending in an embedded IPv4 (::ffff:1.2.3.4)
IPV6_RE = re.compile(
    r"(?<![\w:.])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:\d{1,3}(?:\.\d{1,3}){3}|[0-9A-Fa-f]{1,4})?(?![\w:]|\.\d)"
)


def _is_ipv4(text: str) -> bool:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return False
    return True


def _is_ipv6(text: str) -> bool:
    if not any(c != ":" for c in text):  # a bare "::" (C++ scope, Haskell type) is not an address here
        return False
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


class PiiParams(Params):
    text_key: str | None = Field(
        default=None,
        description="column of plain text to clean; None: every text position of the interleaved "
        "document (its `texts` column)",
    )
    email_placeholder: str = Field(default="email@example.com", description="replaces each e-mail address")
    ipv4_placeholder: str = Field(default="0.0.0.0", description="replaces each valid IPv4 address")
    ipv6_placeholder: str = Field(default="::", description="replaces each valid IPv6 address")


@register("pii_mapper")
class PiiMapper(Mapper[PiiParams]):
    """Replace e-mail addresses and valid IPv4/IPv6 addresses with fixed placeholders
    (email@example.com, 0.0.0.0, ::) in every text position, or in one text column."""

    reads = ("texts",)
    writes = ("texts",)

    def __init__(self, params: PiiParams, artifacts=None):
        super().__init__(params, artifacts)
        p = params
        self._email = lambda m: p.email_placeholder
        self._ipv4 = _if_valid(_is_ipv4, p.ipv4_placeholder)
        self._ipv6 = _if_valid(_is_ipv6, p.ipv6_placeholder)

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.text_key,) if self.params.text_key else self.reads

    def columns_written(self) -> tuple[str, ...]:
        return self.columns_read()

    def scrub(self, text: str) -> str:
        """``text`` with its e-mail and IP addresses replaced (cheap pre-checks skip the regexes)."""
        if "@" in text:
            text = EMAIL_RE.sub(self._email, text)
        if ":" in text:
            text = IPV6_RE.sub(self._ipv6, text)
        if "." in text:
            text = IPV4_RE.sub(self._ipv4, text)
        return text

    def process_batch(self, table: pa.Table) -> pa.Table:
        key = self.params.text_key or "texts"
        values = table.column(key).to_pylist()
        if self.params.text_key:
            out = pa.array([None if t is None else self.scrub(t) for t in values], pa.string())
        else:
            out = pa.array(
                [None if ts is None else [None if t is None else self.scrub(t) for t in ts] for ts in values],
                pa.list_(pa.string()),
            )
        return table.set_column(table.schema.get_field_index(key), key, out)


def _if_valid(check: Callable[[str], bool], placeholder: str) -> Callable[[re.Match], str]:
    """A re.sub callback: the placeholder where ``check`` accepts the match, else the match."""
    return lambda m: placeholder if check(m.group(0)) else m.group(0)
