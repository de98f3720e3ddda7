"""remove_header_mapper (Data-Juicer): drop what precedes a LaTeX document's first sectioning command.

Data-Juicer's regex (operators/shared/latex_source.py) finds the first ``\\chapter``, ``\\part``,
``\\section``, ``\\subsection`` or ``\\subsubsection`` (``\\paragraph`` only when ``\\subparagraph``
follows it at once, a quirk of that pattern) and keeps the text from there on."""

from __future__ import annotations

from pydantic import Field

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register
from raypress.operators.shared.latex_source import dj_from_first_header


class RemoveHeaderParams(TextParams):
    drop_no_head: bool = Field(
        default=True,
        description="Data-Juicer's switch to empty texts without a header; its code never writes the "
        "emptied text back, so such texts pass unchanged either way, here as there",
    )


@register("remove_header_mapper")
class RemoveHeaderMapper(TextMapper[RemoveHeaderParams]):
    """Keep a LaTeX text from its first header on; a text without one is left as it is.

    Data-Juicer (as of commit c07c2d7) sets ``text = ""`` for ``drop_no_head`` and then
    ``continue``s past the write-back, so its output keeps such texts whole; raypress gives the same
    output, so a Data-Juicer recipe keeps the same rows."""

    def process_text(self, text: str) -> str:
        body = dj_from_first_header(text)
        return text if body is None else body
