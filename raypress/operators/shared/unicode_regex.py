"""Patterns with Data-Juicer's semantics: what its ops compile with the ``regex`` package compiles
the same here.

Data-Juicer's deduplicators and most of its cleaning mappers (`clean_email_mapper`,
`remove_specific_chars_mapper`, `replace_content_mapper`, ...) do ``import regex as re``, so a
recipe's pattern may use what Python's ``re`` refuses or reads differently: ``\\p{P}`` / ``\\p{Han}``
property classes (``ignore_pattern: '\\p{P}'`` is in 23 of its recipes), ``\\X``, variable-width
look-behind, POSIX classes ``[[:alpha:]]``, set operations ``[a--b]``.  ``compile_pattern`` is the
one place every op that takes a pattern compiles it: with ``re`` where ``re`` reads the pattern
without complaint (the same meaning, and ``re`` is faster on the common cases), otherwise with the
``regex`` package itself, as Data-Juicer does.  The flags are ``re``'s (``re.DOTALL``, ...), mapped.
"""

from __future__ import annotations

import contextlib
import functools
import re
import warnings

import regex

_FLAGS = ((re.IGNORECASE, regex.IGNORECASE), (re.MULTILINE, regex.MULTILINE), (re.DOTALL, regex.DOTALL),
          (re.VERBOSE, regex.VERBOSE), (re.ASCII, regex.ASCII), (re.UNICODE, regex.UNICODE))


def _regex_flags(flags: int) -> int:
    out = 0
    for re_flag, regex_flag in _FLAGS:
        if flags & re_flag:
            out |= regex_flag
    return out


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str, flags: int = 0) -> "re.Pattern[str] | regex.Pattern[str]":
    """``pattern`` compiled with Data-Juicer's semantics (see the module); ValueError with the
    ``regex`` package's reason for a pattern neither accepts.  Both results have ``sub``,
    ``split``, ``search``, ``finditer``, ``findall`` alike."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)  # "possible nested set": regex reads it otherwise
        with contextlib.suppress(re.error, FutureWarning):  # re refuses it or reads it otherwise: regex below
            return re.compile(pattern, flags)
    try:
        return regex.compile(pattern, _regex_flags(flags))
    except regex.error as exc:
        raise ValueError(str(exc)) from None


def check_pattern(pattern: str, flags: int = 0) -> str:
    """A pydantic validator's body: ``pattern`` if it compiles, else ValueError saying why."""
    try:
        compile_pattern(pattern, flags)
    except ValueError as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return pattern
