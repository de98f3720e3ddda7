"""The shape of Data-Juicer's question-answer rewriting ops (calibrate_*, optimize_*): a system
prompt and a user message built from the row; the parsed (question, answer) replaces the pair,
a part the answer leaves empty keeps its value."""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, TypeVar

import pyarrow as pa

from raypress.operators.llm.api.ops import LLMMapper, system_and_user
from raypress.operators.llm.api.params import QAParams

QP = TypeVar("QP", bound=QAParams)
Pair = tuple[str | None, str | None]


class QARewrite(LLMMapper[QP]):
    """Subclasses build the user message (``build_input``) and parse the answer (``parse_output``:
    (question, answer) or None); ``system_prompt`` is set from the params or the op's default."""

    system_prompt: str = ""

    def columns_read(self) -> tuple[str, ...]:
        return (self.params.query_key, self.params.response_key)

    def output_columns(self) -> dict[str, pa.DataType]:
        return {self.params.query_key: pa.string(), self.params.response_key: pa.string()}

    @abstractmethod
    def build_input(self, row: dict[str, Any]) -> str:
        """The user message for one row."""

    def build_messages(self, row: dict[str, Any]) -> list[dict[str, str]]:
        return system_and_user(self.system_prompt, self.build_input(row))

    def row_outputs(self, row: dict[str, Any], parsed: Pair) -> dict[str, Any]:
        question, answer = parsed
        out = {}
        if question:
            out[self.params.query_key] = question
        if answer:
            out[self.params.response_key] = answer
        return out


def pair_or_none(question: str | None, answer: str | None) -> Pair | None:
    """Data-Juicer's success test: a question or an answer."""
    return (question, answer) if question or answer else None
