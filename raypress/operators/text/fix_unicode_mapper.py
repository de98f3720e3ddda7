"""fix_unicode_mapper (Data-Juicer): repair mojibake and odd Unicode with ftfy, then normalize.

``ftfy.fix_text`` with its default fixes (mojibake, HTML entities in text without '<', curly
quotes, ligatures, width, control characters, line breaks...) and the chosen normalization form,
exactly the call Data-Juicer makes."""

from __future__ import annotations

import ftfy
from pydantic import Field, field_validator

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register

FORMS = ("NFC", "NFKC", "NFD", "NFKD")


class FixUnicodeParams(TextParams):
    normalization: str | None = Field(
        default=None,
        description="Unicode normalization form: NFC, NFKC, NFD or NFKD (any case; None or '' -> NFC)",
    )

    @field_validator("normalization")
    @classmethod
    def _known_form(cls, value: str | None) -> str:
        form = value.upper() if value else "NFC"
        if form not in FORMS:
            raise ValueError(f"normalization {value!r} is not supported; use one of {', '.join(FORMS)}")
        return form


@register("fix_unicode_mapper", requires={"ftfy": "text"})
class FixUnicodeMapper(TextMapper[FixUnicodeParams]):
    """Fix broken Unicode (mojibake, entities, ...) with ftfy and normalize it (Data-Juicer's op)."""

    def __init__(self, params: FixUnicodeParams, artifacts=None):
        super().__init__(params, artifacts)
        self._form = params.normalization or "NFC"

    def process_text(self, text: str) -> str:
        return ftfy.fix_text(text, normalization=self._form)
