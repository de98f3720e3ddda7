"""expand_macro_mapper (Data-Juicer): inline a LaTeX document's own argument-less macros.

Only one-line ``\\newcommand{\\x}{body}`` and ``\\def\\x{body}`` definitions count, found and
expanded with Data-Juicer's regexes (operators/shared/latex_source.py); macros with arguments stay."""

from __future__ import annotations

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register
from raypress.operators.shared.latex_source import dj_expand_macros


@register("expand_macro_mapper")
class ExpandMacroMapper(TextMapper[TextParams]):
    """Replace each argument-less macro defined in the text by its body (Data-Juicer's op)."""

    def process_text(self, text: str) -> str:
        return dj_expand_macros(text)
