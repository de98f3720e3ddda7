"""JSON round trips of the small config dataclasses a Model directory carries (``config.json``).

Why shared: every network's config must refuse a key it does not know by name (a misspelt or
newer key would otherwise be dropped silently and a different network built) and write tuples as
JSON lists; one helper keeps those rules identical for the U-Net, the classifier and the bridge.
"""

from __future__ import annotations

import json
from dataclasses import asdict, fields
from pathlib import Path
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


def read_model_config(path: Path, config_file: str, kind: str, section: str, what: str, writer: str,
                      kind_note: str = "") -> dict[str, Any]:
    """A Model directory's ``config.json``, checked to be ``kind`` with its ``section``: a directory
    holding another kind of model fails here, naming the kind found, not later on state-dict keys."""
    config_path = path / config_file
    if not config_path.is_file():
        raise FileNotFoundError(f"{path} is not a saved {what}: {config_file} is missing")
    config = json.loads(config_path.read_text())
    found = config.get("kind") if isinstance(config, dict) else None
    if found != kind:
        raise ValueError(f"{path} holds a model of kind {found!r}, expected {kind!r}{kind_note}")
    if section not in config:
        raise ValueError(f"{config_path} has no {section!r} section; it was not written by {writer}")
    return config


def save_model_dir(model: Any, directory: str | Path, kind: str, section: str, extra: Mapping[str, Any] | None,
                   writer: str, config_file: str = "config.json", weights_file: str = "model.pt") -> Path:
    """Write a Model directory: ``config_file`` (``kind``, the network's config under ``section``, and
    ``extra``, which must be JSON-able and may not use those two keys) and ``weights_file`` (the
    state dict on CPU).  The one saver behind ``save_bridge`` and ``save_classifier`` (``writer``
    names the caller in the error); ``read_model_config`` reads what it writes."""
    import torch

    extra = dict(extra or {})
    for reserved in ("kind", section):
        if reserved in extra:
            raise ValueError(f"config key {reserved!r} is reserved by {writer}")
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    manifest = {"kind": kind, section: model.config.to_dict(), **extra}
    (path / config_file).write_text(json.dumps(manifest, indent=2, sort_keys=True))
    torch.save({k: v.detach().cpu() for k, v in model.state_dict().items()}, path / weights_file)
    return path
