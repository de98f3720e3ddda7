"""remove_comments_mapper (Data-Juicer): remove LaTeX ``%`` comments with RedPajama's two regexes.

The regexes are Data-Juicer's, byte for byte (operators/shared/latex_source.py), not TeX's rules:
the inline pass also removes the character before the ``%``, and a comment right after ``\\\\`` stays."""

from __future__ import annotations

from pydantic import Field

from raypress.operators.base import TextMapper, TextParams
from raypress.operators.registry import register
from raypress.operators.shared.latex_source import dj_remove_comments


class RemoveCommentsParams(TextParams):
    doc_type: str | list[str] = Field(
        default="tex",
        description="type(s) of document; as in Data-Juicer, TeX comments are removed whatever it says",
    )
    inline: bool = Field(default=True, description="remove comments that follow text on a line")
    multiline: bool = Field(default=True, description="remove lines that start with '%'")


@register("remove_comments_mapper")
class RemoveCommentsMapper(TextMapper[RemoveCommentsParams]):
    """Remove TeX comments as Data-Juicer does: ``[^\\\\]%.+$`` per line, then ``^%.*\\n?``."""

    def process_text(self, text: str) -> str:
        return dj_remove_comments(text, inline=self.params.inline, multiline=self.params.multiline)
