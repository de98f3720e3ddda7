"""What a node consumed and produced, as data on disk — the evidence resume decides on.

Why: a config hash alone trusts saved state.  The same input path with new content (5,000 →
20,000 lines) was skipped as "config unchanged", and deleted outputs as "output exists".  So a
node's state records:

- *consumed*: every file its parameters name (a file, a folder walked, or a glob matched), as
  size + mtime + a hash of a content sample (first and last 64 KiB), and the digest of each
  upstream node's output;
- *produced*: every file of its output (materialized parts, a writer's files, the
  ``rejects/<node>/`` and ``quarantine/<node>/`` of each of its nodes, a model folder, a report)
  with its size.

Resume re-runs a node when any of it differs, and says which file and how.
"""

from __future__ import annotations

import glob
import hashlib
import os
import stat
from pathlib import Path
from typing import Any, Iterable

SAMPLE_BYTES = 64 << 10
MAX_WALK_FILES = 20_000  # a parameter naming a huge folder is fingerprinted by its first files
MAX_SAMPLED_FILES = 2_000  # beyond these, size + mtime only (reading samples of 20k files costs seconds)
GLOB_CHARS = "*?["

FileSig = list  # [size, mtime_ns, sample_digest]


def sample_digest(path: str, size: int) -> str:
    """blake2b of the first and last 64 KiB (the whole file when smaller): cheap, catches most edits."""
    h = hashlib.blake2b(digest_size=12)
    with open(path, "rb") as fh:
        h.update(fh.read(SAMPLE_BYTES))
        if size > 2 * SAMPLE_BYTES:
            fh.seek(size - SAMPLE_BYTES)
        h.update(fh.read(SAMPLE_BYTES))
    return h.hexdigest()


def file_sig(path: str, sample: bool = True) -> FileSig | None:
    try:
        st = os.stat(path)
        return [st.st_size, st.st_mtime_ns, sample_digest(path, st.st_size) if sample else ""]
    except OSError:
        return None


# Parameters that name files by their name (`paths`, `root`, `image_dir`, `domains_path`, ...):
# only these are read, so a `route_prefix: "/"` or a `lang: en` is never taken for a path.
PATH_KEYS = frozenset({"path", "paths", "root", "images", "labels", "data_files"})
PATH_SUFFIXES = ("_path", "_paths", "_dir", "_dirs", "_file", "_files", "_root")


def is_path_key(key: str) -> bool:
    return key in PATH_KEYS or key.endswith(PATH_SUFFIXES)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def _param_strings(params: dict[str, Any]) -> Iterable[str]:
    """The strings under path-like keys, at any depth (``data_files: {train: [...]}`` included)."""
    for key, value in params.items():
        if is_path_key(str(key)):
            yield from _strings(value)
        elif isinstance(value, dict):
            yield from _param_strings(value)


def _is_regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)  # never a device, a FIFO or a socket (reads block)
    except OSError:
        return False


def _files_of(text: str) -> list[str]:
    """The regular files a parameter string names: itself, a folder's files, or a glob's matches."""
    if not text or "\n" in text or len(text) > 4096:
        return []
    expanded = os.path.expanduser(text)
    if os.path.abspath(expanded) in (os.sep, os.path.expanduser("~")):
        return []  # a whole file system or home is no one's input
    if any(ch in expanded for ch in GLOB_CHARS):
        try:
            return sorted(p for p in glob.glob(expanded, recursive=True) if _is_regular(p))[:MAX_WALK_FILES]
        except (OSError, ValueError):
            return []
    if _is_regular(expanded):
        return [expanded]
    if os.path.isdir(expanded):
        found: list[str] = []
        for root, dirs, files in os.walk(expanded):
            dirs.sort()
            found.extend(p for p in (os.path.join(root, f) for f in sorted(files)) if _is_regular(p))
            if len(found) >= MAX_WALK_FILES:
                return found[:MAX_WALK_FILES]
        return found
    return []


def input_files(params: dict[str, Any], exclude: Iterable[Path] = ()) -> dict[str, FileSig]:
    """Signatures of every file the path-like parameters name, outside ``exclude`` (the run directory, a
    writer's own destination: those are outputs, tracked by manifests)."""
    skip = [str(Path(p).resolve()) for p in exclude]
    sigs: dict[str, FileSig] = {}
    for text in _param_strings(params):
        for f in _files_of(text):
            absolute = os.path.abspath(f)
            if absolute in sigs or any(absolute == s or absolute.startswith(s + os.sep) for s in skip):
                continue
            sig = file_sig(absolute, sample=len(sigs) < MAX_SAMPLED_FILES)
            if sig is not None:
                sigs[absolute] = sig
    return sigs


def files_under(paths: Iterable[str | Path]) -> dict[str, int]:
    """Every file under each path (a file or a folder), absolute path -> size: a produced manifest."""
    out: dict[str, int] = {}
    for p in paths:
        p = Path(p)
        if p.is_file():
            out[str(p.resolve())] = p.stat().st_size
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file():
                    out[str(f.resolve())] = f.stat().st_size
    return out


def digest(manifest: dict[str, Any]) -> str:
    h = hashlib.sha256()
    for key in sorted(manifest):
        h.update(f"{key}\0{manifest[key]}\n".encode())
    return h.hexdigest()[:16]


def input_change(old: dict[str, FileSig], new: dict[str, FileSig]) -> str | None:
    """Why the consumed files differ, in words (None when they do not)."""
    for path in sorted(set(old) | set(new)):
        a, b = old.get(path), new.get(path)
        if a == b:
            continue
        if a is None:
            return f"new input file {path}"
        if b is None:
            return f"input file {path} is gone"
        if a[0] != b[0]:
            return f"input file {path} changed (size {a[0]:,} → {b[0]:,} bytes)"
        if a[2] != b[2]:
            return f"input file {path} changed (content differs, same size)"
        return f"input file {path} changed (modified since the last run)"
    return None


def output_change(recorded: dict[str, int]) -> str | None:
    """Why a recorded output no longer holds on disk (None when every file is there, same size)."""
    for path, size in sorted(recorded.items()):
        try:
            now = os.stat(path).st_size
        except OSError:
            return f"output file {path} is missing"
        if now != size:
            return f"output file {path} changed (size {size:,} → {now:,} bytes)"
    return None
