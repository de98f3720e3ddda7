"""clean_links_mapper (Data-Juicer): remove links with a regex."""

from __future__ import annotations

import re

from raypress.operators.registry import register
from raypress.operators.text.templates.anchors import Anchors
from raypress.operators.text.templates.regex_clean import RegexCleanMapper, RegexCleanParams

# Data-Juicer's pattern (after kallewesterling/CleanText): scheme URLs (http, ftp, mailto...),
# www.* hosts and bare host/paths such as example.com/page.  Data-Juicer repeats ``[^\s()<>]+``
# inside a ``+``, which backtracks exponentially on a long token with no valid last character
# (e.g. "ab:c" followed by 30 dots); repeating single characters instead matches exactly the
# same text (each character decides which branch applies) in linear time per start position.
LINKS_PATTERN = (
    r"(?i)\b("
    r"(?:[a-z][\w-]+:(?:\/{1,3}|[a-z0-9%])|www\d{0,3}[.]|[a-z0-9.\-]+[.][a-z]{2,4}\/)"
    r"(?:[^\s()<>]|\(([^\s()<>]|(\([^\s()<>]+\)))*\))"
    r"+(?:\(([^\s()<>]|(\([^\s()<>]+\)))*\)|[^\s`!()\[\]{};:\'\".,<>?«»“”‘’])"
    r")"
)

# A match holds no whitespace (every class of the pattern excludes \s) and holds one of these,
# read from the pattern's three openings: ``[a-z][\w-]+:(?:\/{1,3}|[a-z0-9%])`` ends its scheme
# with a [\w-] character, ':' and '/' or [a-z0-9%]; ``www\d{0,3}[.]`` starts with 'www'; and
# ``[a-z0-9.\-]+[.][a-z]{2,4}\/`` ends with '.', 2 to 4 letters and '/'.  Case-insensitive, as the
# pattern is.
LINKS_ANCHORS = Anchors(
    sequences=(
        (r"[\w-]", ":", r"[/a-z0-9%]"),
        ("w", "w", "w"),
        ("[.]", "[a-z]", "[a-z]", "/"),
        ("[.]", "[a-z]", "[a-z]", "[a-z]", "/"),
        ("[.]", "[a-z]", "[a-z]", "[a-z]", "[a-z]", "/"),
    ),
    flags=re.IGNORECASE,
)


@register("clean_links_mapper")
class CleanLinksMapper(RegexCleanMapper[RegexCleanParams]):
    """Remove links (http/https/ftp URLs, www hosts, host/path) from text (Data-Juicer clean_links_mapper)."""

    default_pattern = LINKS_PATTERN
    default_anchors = LINKS_ANCHORS
