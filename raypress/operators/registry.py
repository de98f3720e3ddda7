"""Operator registry: names -> classes.

Op modules are found by a static scan for `@register("name")` and imported only when an op is
asked for, so validating a text pipeline never pays for importing torch."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
import re
from pathlib import Path
from typing import TypeVar

from raypress.operators.base import Operator

_REGISTRY: dict[str, type[Operator]] = {}
_LOADED = False
T = TypeVar("T", bound=type[Operator])


def register(name: str):
    """Class decorator: make an operator available to pipelines under ``name``."""

    def wrap(cls: T) -> T:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"operator {name!r} registered twice ({_REGISTRY[name]} and {cls})")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return wrap


def load_all() -> None:
    """Import every module under ``raypress.operators`` so their ``@register`` calls run."""
    global _LOADED
    if _LOADED:
        return
    import raypress.operators as pkg

    for mod in pkgutil.walk_packages(pkg.__path__, prefix=pkg.__name__ + "."):
        if mod.name.rsplit(".", 1)[-1] in ("base", "registry"):
            continue
        importlib.import_module(mod.name)
    _LOADED = True


_REGISTER_CALL = re.compile(r"""@register\(\s*["']([^"']+)["']""")
_INDEX: dict[str, str] | None = None


def _index() -> dict[str, str]:
    """op name -> module that registers it, read from the sources without importing them."""
    global _INDEX
    if _INDEX is None:
        import raypress.operators as pkg

        root = Path(pkg.__path__[0])
        index: dict[str, str] = {}
        for path in sorted(root.rglob("*.py")):
            if path.name in ("base.py", "registry.py"):
                continue
            module = ".".join((pkg.__name__, *path.relative_to(root).with_suffix("").parts))
            for name in _REGISTER_CALL.findall(path.read_text(encoding="utf-8")):
                index.setdefault(name, module)
        _INDEX = index
    return _INDEX


def get_op(name: str) -> type[Operator] | None:
    if name not in _REGISTRY and name in _index():
        importlib.import_module(_index()[name])
    if name not in _REGISTRY and not _LOADED and name not in _index():
        return None
    return _REGISTRY.get(name)


def known_names() -> set[str]:
    """Every op name, without importing op modules (for "did you mean")."""
    return set(_index()) | set(_REGISTRY)


def all_ops() -> dict[str, type[Operator]]:
    load_all()
    return dict(sorted(_REGISTRY.items()))


SUGGEST_FROM_AT_MOST = 1000  # names; past that a suggestion per problem would make validation quadratic


def did_you_mean(word: str, choices) -> str:
    """A close name, when there are few enough names to compare against (a generated pipeline with
    thousands of nodes and as many bad references must not take minutes to report)."""
    if not hasattr(choices, "__len__"):
        choices = list(choices)
    if len(choices) > SUGGEST_FROM_AT_MOST:
        return ""
    close = difflib.get_close_matches(word, choices, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
