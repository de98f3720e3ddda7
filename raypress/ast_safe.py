"""``ast.parse`` / ``ast.unparse`` behind one lock.

Why: CPython 3.11 keeps the AST converter's recursion depth in interpreter-wide state, so two threads
converting trees at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(python/cpython#106905).  raypress parses expressions in threads — policies trained in parallel
build their corpora with the task families' checkers, steps run concurrently — and a run died of
it; parsing is microseconds, so one lock costs nothing.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.RLock()


def parse(source: str, mode: str = "exec") -> ast.AST:
    with _LOCK:
        return ast.parse(source, mode=mode)


def unparse(node: ast.AST) -> str:
    with _LOCK:
        return ast.unparse(node)
