"""Operator registry: names -> classes, discovered by importing every operator module once."""

from __future__ import annotations

import difflib
import importlib
import pkgutil
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


def get_op(name: str) -> type[Operator] | None:
    load_all()
    return _REGISTRY.get(name)


def all_ops() -> dict[str, type[Operator]]:
    load_all()
    return dict(sorted(_REGISTRY.items()))


def did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""
