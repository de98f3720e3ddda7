"""arXiv LaTeX sources as rows: the main file with its ``\\input`` files inlined, plus its figures.

A *source* is a directory, or an e-print file as arXiv serves it: a gzipped tar (the project
files at the top level, sometimes under one folder), a plain tar, or a single gzipped ``.tex``.
One row per source:

- ``id``: the path as matched; ``url``: ``arxiv:<id>`` when the file name is an arXiv id
  (``2401.01234v2.tar.gz``, ``hep-th9901001.gz``), else the path;
- ``main_file``: the ``.tex`` with ``\\documentclass`` (or LaTeX 2.09's ``\\documentstyle``),
  else the one with ``\\begin{document}``; ties go to ``main.tex``, then the shallowest, shortest
  path.  Commented-out markers do not count.  Its folder is the project root, as for ``latex``;
- ``tex``: the main file with ``\\input{x}`` / ``\\input x`` / ``\\include{x}`` / ``\\subfile{x}``
  replaced by the file (``x``, else ``x.tex``; relative to the project root, else to the
  including file), recursively.  Commented-out inputs stay as they are.  An input that is
  missing, that would close a cycle, that lies deeper than ``max_input_depth`` or that would grow
  ``tex`` past ``max_tex_chars`` is not inlined: a ``%`` comment note takes its place and
  ``inputs_missing`` counts it;
- ``files``: the figure files (``.png .jpg .jpeg .pdf .eps``) whose name (without extension)
  occurs in ``tex``: ``list<struct{path, data}>``, path inside the source.  Which of them a figure
  really uses is decided by ``latex_to_interleaved``, which sees the parsed document; shipping
  only name matches keeps unrelated images (arXiv sources carry many) out of the rows.

Text files are decoded as UTF-8 (a BOM dropped), else as Latin-1: arXiv's 8-bit sources predate
UTF-8 and mostly use ``inputenc``'s latin1; Latin-1 maps every byte, so nothing is lost.

Safety: archives are read in memory, never extracted.  Members with absolute paths or ``..``,
links and devices are ignored; a source whose readable bytes exceed ``max_source_bytes`` is
refused.  In a directory, symbolic links are not followed.  Gzip and tar are recognised by
content, never by name.  Error tombstones (the row keeps its id, reason and detail):
``unreadable_archive`` (not a tar where a tar is named, corrupt or truncated gzip/tar: the detail
says what the file looks like), ``source_too_large``, ``no_main_file`` (also a single file that
is not LaTeX at all: a PDF, an HTML page, an image), ``unreadable_file``.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import posixpath
import re
import tarfile
import zlib
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, Iterator

import pyarrow as pa
from pydantic import Field

from raypress.operators.base import Params, Reader, RunContext
from raypress.operators.io.sniff.magic import HEAD_BYTES, describe, kind
from raypress.operators.registry import register
from raypress.operators.shared.files import Globs, map_files
from raypress.operators.shared.latex_source import FIGURE_EXTENSIONS, comment_start, strip_comments
from raypress.operators.shared.rows import combine
from raypress.schema import ID_COL, TombstoneKind, with_tombstones

FILE_TYPE = pa.struct([("path", pa.string()), ("data", pa.binary())])
SCHEMA = pa.schema(
    [
        (ID_COL, pa.string()),
        ("url", pa.string()),
        ("main_file", pa.string()),
        ("tex", pa.string()),
        ("files", pa.list_(FILE_TYPE)),
        ("inputs_missing", pa.int32()),
    ]
)
COLUMNS = tuple(SCHEMA.names)
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz")
# formats (as sniff.kind names them) a single-file source cannot be LaTeX in
NOT_TEX = frozenset({"PDF", "PostScript", "HTML", "XML", "zip", "zip (empty)", "PNG", "JPEG", "GIF", "WebP", "bzip2",
                     "xz", "zstd", "7z", "gzip", "WARC", "ARC", "RTF", "MS Office (OLE)"})
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".gz")
_NEW_ID = re.compile(r"\d{4}\.\d{4,5}(v\d+)?")
_OLD_ID = re.compile(r"([a-z][a-z\-]*(?:\.[A-Z]{2})?)(\d{7}(?:v\d+)?)")


class SourceError(Exception):
    """A source that yields no row: ``reason`` is the ledger category, the message the detail."""

    def __init__(self, reason: str, detail: str):
        super().__init__(detail)
        self.reason = reason


class ReadArxivParams(Params):
    paths: Globs = Field(
        description="glob patterns of source directories or files (.tar.gz, .tgz, .tar, a gzipped single "
        ".tex, or an extension-less arXiv e-print), relative to the current directory"
    )
    max_input_depth: int = Field(default=20, ge=1, description="deepest \\input nesting that is inlined")
    max_tex_chars: int = Field(
        default=20_000_000, ge=1,
        description="inlining stops (with a note) once tex would exceed this many characters",
    )
    max_source_bytes: int = Field(
        default=512 * 2**20, ge=1,
        description="uncompressed bytes one source may hold; larger ones become tombstones",
    )


@register("read_arxiv")
class ReadArxiv(Reader[ReadArxivParams]):
    """Read arXiv LaTeX sources (directories or e-print tarballs): main file with inputs inlined, plus figure files."""

    writes = COLUMNS

    def read(self, ctx: RunContext):
        sources = expand_sources(self.params.paths)
        p = self.params
        return map_files(
            sources,
            partial(read_source, node=ctx.node_id, max_input_depth=p.max_input_depth, max_tex_chars=p.max_tex_chars,
                    max_source_bytes=p.max_source_bytes),
            ctx=ctx,
        )


def expand_sources(patterns: list[str]) -> list[str]:
    """Sorted, de-duplicated directories and files matching each pattern (a pattern matching
    nothing is an error).  Paths keep their pattern's form: they become row ids."""
    found: dict[str, None] = {}  # ordered set
    for pattern in patterns:
        matches = sorted(p.rstrip("/") or "/" for p in glob.glob(os.path.expanduser(pattern), recursive=True)
                         if os.path.isdir(p) or os.path.isfile(p))
        if not matches:
            raise FileNotFoundError(f"no source directory or file matches {pattern!r} (relative to {os.getcwd()})")
        found.update(dict.fromkeys(matches))
    return list(found)


def read_source(path: str, abs_path: str, node: str, max_input_depth: int = 20, max_tex_chars: int = 20_000_000,
                max_source_bytes: int = 512 * 2**20) -> Iterator[pa.Table]:
    """One table with one row: the source, or an error tombstone saying why there is none."""
    try:
        tree = load_source(abs_path, max_source_bytes)
        main = find_main_file(tree)
        inliner = Inliner(tree, posixpath.dirname(main), max_input_depth, max_tex_chars)
        tex = inliner.expand(main)
        files = figure_files(tree, tex)
    except SourceError as exc:
        yield dead_source(path, node, exc.reason, str(exc))
        return
    row = {ID_COL: path, "url": source_url(path), "main_file": main, "tex": tex, "files": files,
           "inputs_missing": inliner.missing}
    yield combine(pa.Table.from_pylist([row], schema=SCHEMA), None)


def dead_source(path: str, node: str, reason: str, detail: str) -> pa.Table:
    """A tombstone with the live rows' columns (nulls), so every block has one schema."""
    row = {ID_COL: path, "url": source_url(path)}
    table = pa.Table.from_pylist([row], schema=SCHEMA)
    return with_tombstones(table, node, TombstoneKind.ERROR, reasons=[reason], details=[detail])


def source_url(path: str) -> str:
    """``arxiv:<id>`` when the file name is an arXiv identifier, else the path itself."""
    name = os.path.basename(path.rstrip("/"))
    for suffix in ARCHIVE_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if _NEW_ID.fullmatch(name):
        return f"arxiv:{name}"
    old = _OLD_ID.fullmatch(name)
    if old:
        return f"arxiv:{old.group(1)}/{old.group(2)}"
    return path


# -- loading a source ----------------------------------------------------------------------------


@dataclass
class SourceTree:
    """The files of one source by path inside it (POSIX, normalised); bytes read on demand."""

    names: list[str]
    read: Callable[[str], bytes]
    _cache: dict[str, str] = field(default_factory=dict)

    def text(self, name: str) -> str:
        if name not in self._cache:
            self._cache[name] = decode_tex(self.read(name))
        return self._cache[name]


def decode_tex(data: bytes) -> str:
    """UTF-8 (BOM dropped), else Latin-1 (see the module docstring)."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def load_source(abs_path: str, max_bytes: int) -> SourceTree:
    if os.path.isdir(abs_path):
        return directory_tree(abs_path, max_bytes)
    try:
        with open(abs_path, "rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as exc:
        raise SourceError("unreadable_file", f"{type(exc).__name__}: {exc}") from exc
    name = os.path.basename(abs_path)
    if len(raw) > max_bytes:
        raise SourceError("source_too_large", f"more than max_source_bytes={max_bytes} bytes")
    gzipped = raw[:2] == b"\x1f\x8b"  # by content: the name may say .tar.gz of a plain tar, or nothing
    if gzipped:
        raw = gunzip(raw, max_bytes)
    if looks_like_tar(raw):
        return tar_tree(raw, max_bytes)
    what = ("once decompressed, it " if gzipped else "it ") + describe(raw[:HEAD_BYTES])
    if name.lower().endswith(TAR_SUFFIXES):
        raise SourceError("unreadable_archive", f"{name} is not a tar archive: {what}")
    if kind(raw[:HEAD_BYTES]) in NOT_TEX:  # e.g. the PDF arXiv serves for a paper without source
        raise SourceError("no_main_file", f"{name} is a single file that is not LaTeX: {what}")
    # a single file: arXiv serves one-file papers as a gzipped .tex
    stem = name[:-3] if name.lower().endswith(".gz") else name
    single = stem if stem.lower().endswith(".tex") else stem + ".tex"
    return SourceTree([single], lambda _name: raw)


def gunzip(data: bytes, max_bytes: int) -> bytes:
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
            out = f.read(max_bytes + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise SourceError("unreadable_archive", f"corrupt gzip: {type(exc).__name__}: {exc}") from exc
    if len(out) > max_bytes:
        raise SourceError("source_too_large", f"more than max_source_bytes={max_bytes} bytes once decompressed")
    return out


def looks_like_tar(data: bytes) -> bool:
    """A valid first tar header (checksum included): tarfile's own test, on bytes in memory."""
    try:
        return tarfile.is_tarfile(io.BytesIO(data))
    except (OSError, EOFError, tarfile.TarError):
        return False


def safe_member_name(name: str) -> str | None:
    """The normalised path of a tar member, or None for an absolute or ``..`` path."""
    name = name.replace("\\", "/")
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return None
    if ".." in name.split("/"):
        return None
    norm = posixpath.normpath(name)
    return None if norm in (".", "") else norm


def tar_tree(data: bytes, max_bytes: int) -> SourceTree:
    """Every regular member with a safe name, read into memory (never written to disk)."""
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
            for member in tar:
                if not member.isreg():
                    continue
                name = safe_member_name(member.name)
                if name is None:
                    continue
                total += member.size
                if total > max_bytes:
                    raise SourceError("source_too_large", f"members exceed max_source_bytes={max_bytes} bytes")
                handle = tar.extractfile(member)
                if handle is None:
                    continue
                files[name] = handle.read()
                if len(files[name]) != member.size:
                    raise SourceError("unreadable_archive", f"member {name!r} is truncated")
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise SourceError("unreadable_archive", f"corrupt tar: {type(exc).__name__}: {exc}") from exc
    return SourceTree(sorted(files), files.__getitem__)


def directory_tree(root: str, max_bytes: int) -> SourceTree:
    """The regular files under ``root`` (symbolic links not followed), read when asked for."""
    names: list[str] = []
    for folder, dirs, filenames in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not os.path.islink(os.path.join(folder, d)))
        for filename in filenames:
            full = os.path.join(folder, filename)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            names.append(os.path.relpath(full, root).replace(os.sep, "/"))
    budget = [max_bytes]

    def read(name: str) -> bytes:
        try:
            with open(os.path.join(root, name), "rb") as f:
                data = f.read(budget[0] + 1)
        except OSError as exc:
            raise SourceError("unreadable_file", f"{name}: {type(exc).__name__}: {exc}") from exc
        budget[0] -= len(data)
        if budget[0] < 0:
            raise SourceError("source_too_large", f"files read exceed max_source_bytes={max_bytes} bytes")
        return data

    return SourceTree(sorted(names), read)


# -- main file and inlining ----------------------------------------------------------------------

_DOCUMENTCLASS = re.compile(r"\\document(?:class|style)(?![a-zA-Z@])")
_BEGIN_DOCUMENT = re.compile(r"\\begin\s*\{document\}")


def find_main_file(tree: SourceTree) -> str:
    """The main ``.tex`` (see the module docstring); SourceError ``no_main_file`` when none."""
    tex_files = [n for n in tree.names if n.lower().endswith(".tex")]
    ranked = []
    for name in tex_files:
        text = strip_comments(tree.text(name))
        if _DOCUMENTCLASS.search(text):
            rank = 0
        elif _BEGIN_DOCUMENT.search(text):
            rank = 1
        else:
            continue
        ranked.append((rank, posixpath.basename(name) != "main.tex", name.count("/"), len(name), name))
    if not ranked:
        raise SourceError("no_main_file", f"no .tex file with \\documentclass or \\begin{{document}} "
                                          f"({len(tex_files)} .tex of {len(tree.names)} files)")
    return min(ranked)[-1]


_INPUT = re.compile(r"\\(input|include|subfile)(?![a-zA-Z@])\s*(?:\{([^{}]*)\}|([^\s{}\\%]+))")


class Inliner:
    """Replaces input commands by the files they name, recursively, with the guards above."""

    def __init__(self, tree: SourceTree, root: str, max_depth: int, max_chars: int):
        self.tree = tree
        self.names = set(tree.names)
        self.root = root
        self.max_depth = max_depth
        self.max_chars = max_chars
        self.missing = 0
        self.chars = 0

    def expand(self, name: str, stack: tuple[str, ...] = ()) -> str:
        text = self.tree.text(name)
        self.chars += len(text)
        stack = (*stack, name)
        lines = text.split("\n")
        for i, line in enumerate(lines):
            cut = comment_start(line)
            code, comment = (line, "") if cut < 0 else (line[:cut], line[cut:])
            if "\\" in code and _INPUT.search(code):
                lines[i] = _INPUT.sub(lambda m: self._replace(m, stack), code) + comment
        return "\n".join(lines)

    def _replace(self, m: re.Match, stack: tuple[str, ...]) -> str:
        command, arg = m.group(1), (m.group(2) if m.group(2) is not None else m.group(3)).strip().strip('"')
        target = self.resolve(arg, command, stack[-1])
        problem = None
        if target is None:
            problem = "not found in the source"
        elif target in stack:
            problem = "would be a cycle"
        elif len(stack) > self.max_depth:
            problem = f"is deeper than max_input_depth={self.max_depth}"
        elif self.chars + len(self.tree.text(target)) > self.max_chars:
            problem = f"would exceed max_tex_chars={self.max_chars}"
        if problem is not None:
            self.missing += 1
            return f"%raypress: \\{command}{{{arg}}} {problem}, not inlined\n"
        content = self.expand(target, stack)
        return content if content.endswith("\n") else content + "\n"  # a trailing % must not eat the line

    def resolve(self, arg: str, command: str, including: str) -> str | None:
        """``x`` then ``x.tex`` (``\\include``: only ``x.tex``), from the root, then from the
        including file's folder."""
        if not arg:
            return None
        suffixes = (".tex",) if command == "include" else ("", ".tex")
        for folder in dict.fromkeys((self.root, posixpath.dirname(including))):
            base = posixpath.normpath(posixpath.join(folder, arg))
            for suffix in suffixes:
                candidate = base + suffix
                if candidate in self.names:
                    return candidate
        return None


def figure_files(tree: SourceTree, tex: str) -> list[dict[str, object]]:
    """Figure files whose name (without extension) occurs in ``tex``, with their bytes."""
    out = []
    for name in tree.names:
        stem, ext = posixpath.splitext(posixpath.basename(name))
        if ext.lower() in FIGURE_EXTENSIONS and stem and stem in tex:
            out.append({"path": name, "data": tree.read(name)})
    return out
