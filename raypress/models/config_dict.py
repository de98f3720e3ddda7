"""JSON round trips of the small config dataclasses a Model directory carries (``config.json``).

Why shared: every network's config must refuse a key it does not know by name (a misspelt or
newer key would otherwise be dropped silently and a different network built) and write tuples as
JSON lists; one helper keeps those rules identical for the U-Net, the classifier and the bridge.
"""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any, Mapping, TypeVar

T = TypeVar("T")


def config_to_dict(config: Any) -> dict[str, Any]:
    """``asdict`` with tuples as lists (what JSON gives back)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(config).items()}


def checked_fields(cls: type[T], data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` as keyword arguments for ``cls``; a key that is not one of its fields raises ValueError."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys {unknown} (known: {sorted(known)})")
    return dict(data)
