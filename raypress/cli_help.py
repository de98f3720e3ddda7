"""Readable ``--help``: every value an option takes is named for what it is, and flags take none.

Why: typer 0.29 prints each parameter's Python type where a value goes (``--run-dir <str>``,
``--port <int>``, ``--set <list[str]>``) and ``<bool>`` after flags that take no value at all
(``--help <bool>``).  Options declare their own names for values (``metavar="HOST:PORT"``); the
:class:`ReadableGroup` fills in the rest when a command is looked up: nothing after a flag, the
argument's name in capitals (its type column left empty), and for an option without one a name
from its type (``N`` for a count, ``SECONDS`` / ``X`` for numbers) or its own name (``--reason REASON``).
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperArgument, TyperGroup, TyperOption


class _NamedArgument(TyperArgument):
    """An argument whose name (``FILE``) is its whole description: no ``<str>`` beside it."""

    def display_type_rich(self, ctx: Any) -> str | None:
        return None


def value_name(param: TyperOption) -> str:
    """A name for the value an option takes, when it declares none."""
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    long_name = max(param.opts, key=len).lstrip("-").replace("-", "_").upper()
    if annotation is int:
        return "N"
    if annotation is float:
        return "SECONDS" if long_name.endswith(("_S", "_SECONDS")) else "X"
    return long_name


def make_readable(params: list[Any]) -> None:
    """Give each parameter a readable value name (in place; a second call changes nothing)."""
    for param in params:
        if isinstance(param, TyperArgument):
            if param.metavar is None:
                param.metavar = (param.name or "").upper()
            if type(param) is TyperArgument:
                param.__class__ = _NamedArgument
        elif isinstance(param, TyperOption) and param.metavar is None:
            param.metavar = "" if param.is_flag else value_name(param)


class ReadableGroup(TyperGroup):
    """The CLI's group: its own options and each command's are made readable when looked up."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        make_readable(params)
        return params

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            make_readable(command.params)
            help_option = command.get_help_option(ctx)
            if help_option is not None:
                make_readable([help_option])
        return command
