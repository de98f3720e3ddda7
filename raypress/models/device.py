"""Which torch device a model runs on: the one rule every stage, mapper and Serve replica uses."""

from __future__ import annotations


def choose_device(asked: str | None = None, gpu: bool = True) -> str:
    """``asked`` as given (``"cpu"``, ``"cuda"``, ``"cuda:1"``, ...); ``None`` or ``"auto"``: ``"cuda"``
    when ``gpu`` (e.g. the replica was given a GPU) and torch sees a CUDA device, else ``"cpu"``.

    A CUDA device asked for where torch sees none raises ValueError here, naming the cause, rather
    than later inside the model's ``.to``."""
    import torch

    if asked in (None, "", "auto"):
        return "cuda" if gpu and torch.cuda.is_available() else "cpu"
    if str(asked).startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {asked!r} was asked for but torch sees no CUDA device")
    return str(asked)
