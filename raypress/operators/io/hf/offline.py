"""``datasets`` with the Hugging Face Hub switched off, for ``read_hf_dataset`` and ``write_hf_dataset``.

raypress never downloads from the Hub: both ops import ``datasets`` through here so that the
offline switch is set in one place, before the first import, whichever op runs first."""

from __future__ import annotations

import os
from typing import Any


def offline_datasets() -> Any:
    """Import ``datasets`` with the Hub switched off (unless the user set these themselves)."""
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import datasets

    return datasets
