"""clean_email_mapper (Data-Juicer): remove e-mail addresses with a regex."""

from __future__ import annotations

from raypress.operators.registry import register
from raypress.operators.text.templates.anchors import Anchors
from raypress.operators.text.templates.regex_clean import RegexCleanMapper, RegexCleanParams

EMAIL_PATTERN = r"[A-Za-z0-9.\-+_]+@[a-z0-9.\-+_]+\.[a-z]+"
# A match holds no whitespace (all its classes are ASCII non-space) and has a local-part
# character, '@' and a domain character side by side.
EMAIL_ANCHORS = Anchors(sequences=((r"[A-Za-z0-9.\-+_]", "@", r"[a-z0-9.\-+_]"),))


@register("clean_email_mapper")
class CleanEmailMapper(RegexCleanMapper[RegexCleanParams]):
    """Remove e-mail addresses from text (Data-Juicer clean_email_mapper)."""

    default_pattern = EMAIL_PATTERN
    default_needle = "@"
    default_anchors = EMAIL_ANCHORS
