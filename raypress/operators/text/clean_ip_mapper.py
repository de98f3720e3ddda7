"""clean_ip_mapper (Data-Juicer): remove (or replace) IPv4 and IPv6 addresses with a regex.

The built-in pattern is Data-Juicer's: a dotted quad of decimal octets 0-255 (no leading zeros
beyond a single 0, tried longest-first the way Data-Juicer orders its alternatives, and with no
word boundaries, so ``example.com/188.46.244.216my-page`` loses the address), or eight colon-
separated groups of 1-4 hex digits (the full IPv6 form, no ``::`` shorthand)."""

from __future__ import annotations

from pydantic import Field, ValidationInfo, field_validator

from raypress.operators.base import TextParams
from raypress.operators.registry import register
from raypress.operators.text.templates.user_patterns import SubstituteMapper, check_replacement, recipe_pattern

# Alternatives in Data-Juicer's order (it matters: the first that lets the whole match succeed wins).
_OCTET = r"(?:1[0-9]{2}|2[0-4][0-9]|25[0-5]|[1-9][0-9]|[0-9])"
IPV4 = rf"(?:{_OCTET}\.){{3}}{_OCTET}"
IPV6 = r"([\da-fA-F]{1,4}:){7}[\da-fA-F]{1,4}"  # one group, as Data-Juicer's, for a repl's \1
IP_PATTERN = f"{IPV4}|{IPV6}"


def _pattern_of(pattern: str | None) -> str:
    return IP_PATTERN if pattern is None else pattern  # "" is a pattern (it matches everywhere)


class CleanIpParams(TextParams):
    pattern: str | None = Field(
        default=None, description="regular expression to clean (None: IPv4 and full-form IPv6 addresses); "
        "matched with DOTALL, Data-Juicer's `regex` semantics; r'...' quoting is accepted")
    repl: str = Field(default="", description="replacement for each match")

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str | None) -> str | None:
        return None if value is None else recipe_pattern(value)

    @field_validator("repl")
    @classmethod
    def _repl(cls, value: str, info: ValidationInfo) -> str:
        if "pattern" not in info.data:  # the pattern itself failed: that is the error to report
            return value
        return check_replacement(_pattern_of(info.data["pattern"]), value)


@register("clean_ip_mapper")
class CleanIpMapper(SubstituteMapper[CleanIpParams]):
    """Remove IPv4/IPv6 addresses from text, or replace them with `repl` (Data-Juicer clean_ip_mapper)."""

    def substitutions(self) -> list[tuple[str, str]]:
        return [(_pattern_of(self.params.pattern), self.params.repl)]
