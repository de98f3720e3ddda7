"""Data-Juicer's notion of a file's suffix, for readers that feed suffix_filter or honour `suffixes`.

Data-Juicer selects input files by suffix (the recipe's global ``suffixes``) and, when a recipe
has a ``suffix_filter``, stores each row's file suffix in a column (``__dj__suffix__``).  Both use
the same rule (``find_files_with_suffix``): the last suffix, lower-cased, or the last two when the
file is zstd-compressed (``.jsonl.zst``); a file without one gets ``"."``."""

from __future__ import annotations

from pathlib import PurePath

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


def dj_suffix(path: str, head: bytes | None = None) -> str:
    """The suffix Data-Juicer records for a row read from ``path`` (".py", ".jsonl.zst", ".").

    ``head``: the file's first bytes, when the caller has them; otherwise they are read, as
    Data-Juicer decides "compressed" by the zstd magic number, not by the name."""
    p = PurePath(path)
    if head is None:
        try:
            with open(path, "rb") as f:
                head = f.read(len(ZSTD_MAGIC))
        except OSError:
            head = b""
    if head.startswith(ZSTD_MAGIC):
        suffix = "".join(s.lower() for s in p.suffixes[-2:])
    else:
        suffix = p.suffix.lower()
    # Data-Juicer keys its files by the suffix without its dot and adds the dot back
    return "." + suffix.strip(".")


def normalize_suffixes(suffixes: str | list[str] | None) -> list[str]:
    """The recipe's global ``suffixes`` as Data-Juicer compares them: lower-case, leading dot."""
    if suffixes is None:
        return []
    if isinstance(suffixes, str):
        suffixes = [suffixes]
    return [s.lower() if s.startswith(".") else "." + s.lower() for s in suffixes]
