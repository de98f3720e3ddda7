"""remove_bibliography_mapper (Data-Juicer): cut a LaTeX text at its appendix or bibliography.

The text ends before the first ``\\appendix``, ``\\begin{references}``, ``\\begin{REFERENCES}``,
``\\begin{thebibliography}`` or ``\\bibliography{...}``, with Data-Juicer's regex
(operators/shared/latex_source.py)."""

from __future__ import annotations

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register
from raypress.operators.shared.latex_source import dj_remove_bibliography


@register("remove_bibliography_mapper")
class RemoveBibliographyMapper(TextMapper[TextParams]):
    """Remove everything from the first appendix/bibliography command on (Data-Juicer's op)."""

    def process_text(self, text: str) -> str:
        return dj_remove_bibliography(text)
