"""``datasets`` with the Hugging Face Hub switched off, for ``read_hf_dataset`` and ``write_hf_dataset``.

raypress never downloads from the Hub: both ops import ``datasets`` through here so that the
offline switch is set in one place, whichever op runs first.  The environment variables alone
are not enough: ``datasets`` and ``huggingface_hub`` read them once, at import, and a process that
imported them before (another library, a test session) asked the Hub for a missing dataset and
retried with backoff for ~20 s before saying so."""

from __future__ import annotations

import os
from typing import Any

OFFLINE_SWITCHES = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")


def offline_datasets() -> Any:
    """Import ``datasets`` with the Hub switched off (unless the user set these themselves)."""
    chosen = [name for name in OFFLINE_SWITCHES if name in os.environ]
    for name in OFFLINE_SWITCHES:
        os.environ.setdefault(name, "1")
    import datasets
    import huggingface_hub.constants as hub

    if "HF_HUB_OFFLINE" not in chosen:  # already imported: switch the values they read at import
        hub.HF_HUB_OFFLINE = True
        datasets.config.HF_HUB_OFFLINE = True
    return datasets


def datasets_cache(datasets: Any) -> str:
    """The datasets cache folder ``datasets`` looks in (fixed when it was imported)."""
    return str(datasets.config.HF_DATASETS_CACHE)
