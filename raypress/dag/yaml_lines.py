"""Load YAML and remember the line of every key, so validation can say `file:line`.

A pipeline file is data from anyone: loading it is bounded (file size, nodes the document expands
to, nesting) so that no file can exhaust the machine, and every way a file can be unreadable ends
in one :class:`PipelineFileError` with a one-line message instead of a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.resolver import Resolver

Path_ = tuple[Any, ...]

MAX_BYTES = 8 * 2**20  # a pipeline file larger than this is not a pipeline
MAX_NODES = 1_000_000  # YAML nodes the document expands to, an alias counting each time it is used
MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass
class DuplicateKey:
    """A mapping key written twice (YAML keeps the last one silently)."""

    key: str
    line: int
    first_line: int


@dataclass
class LocatedDoc:
    """A parsed YAML document plus the line number of each path (mapping key / list item)."""

    data: Any
    file: str
    lines: dict[Path_, int] = field(default_factory=dict)
    duplicates: list[DuplicateKey] = field(default_factory=list)

    def line(self, path: Path_) -> int | None:
        """Line of ``path``, or of its nearest located ancestor."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.lines.get((), None)


class PipelineFileError(Exception):
    """The file cannot be read as a pipeline at all (missing, binary, too large, bad YAML ...)."""

    def __init__(self, file: str, line: int | None, message: str):
        super().__init__(message)
        self.file, self.line, self.message = file, line, message


class YamlSyntaxError(PipelineFileError):
    """Malformed YAML, or YAML past the loader's bounds."""


def read_pipeline_text(path: str | Path) -> str:
    """The file's text, or :class:`PipelineFileError` saying in one line why it has none."""
    name = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_BYTES + 1)  # bounded even for /dev/zero or a file still growing
    except IsADirectoryError:
        raise PipelineFileError(name, None, "is a directory, not a pipeline file") from None
    except OSError as exc:
        raise PipelineFileError(name, None, f"cannot read pipeline: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise PipelineFileError(name, None, f"file is larger than {MAX_BYTES // 2**20} MiB; "
                                "a pipeline file is not that big")
    return _decode(data, name)


def _decode(data: bytes, name: str) -> str:
    """UTF-8 text without NUL bytes: anything else is a binary file given by mistake."""
    nul = data.find(b"\x00")
    if nul >= 0:
        raise PipelineFileError(name, _line_at(data, nul), "not a text file (NUL byte); a pipeline is UTF-8 YAML")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PipelineFileError(name, _line_at(data, exc.start), f"not UTF-8 text (byte 0x{data[exc.start]:02x} "
                                f"at offset {exc.start}); a pipeline is UTF-8 YAML") from None


def _line_at(data: bytes | str, offset: int) -> int:
    newline = b"\n" if isinstance(data, bytes) else "\n"
    return data.count(newline, 0, offset) + 1  # type: ignore[arg-type]


class _BoundedComposer(Composer):
    """PyYAML's composer, counting what each node expands to (aliases are shared nodes, so this is
    cheap) and stopping before a document can blow up; it also notes duplicate keys."""

    def __init__(self) -> None:
        super().__init__()
        self.sizes: dict[int, int] = {}  # id(node) -> nodes it expands to; absent while being composed
        self.composed = 0
        self.duplicates: list[DuplicateKey] = []

    def compose_node(self, parent, index):
        if self.check_event(AliasEvent):
            event = self.peek_event()
            target = self.anchors.get(event.anchor)
            if target is not None and id(target) not in self.sizes:
                raise _bounds_error(event.start_mark, f"recursive alias *{event.anchor} (it refers to itself)")
            return super().compose_node(parent, index)
        node = super().compose_node(parent, index)
        self.composed += 1
        size = 1 + sum(self.sizes[id(child)] for child in _children(node))
        if size > MAX_NODES or self.composed > MAX_NODES:
            raise _bounds_error(node.start_mark, f"document expands to more than {MAX_NODES:,} YAML nodes "
                                "(aliases count each time they are used)")
        self.sizes[id(node)] = size
        node.end_mark = None  # not needed once composed; halves the memory a node keeps
        return node

    def compose_mapping_node(self, anchor):
        node = super().compose_mapping_node(anchor)
        self.duplicates.extend(_duplicate_keys(node))
        return node


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return node.value
    return []


def _duplicate_keys(node: yaml.MappingNode) -> list[DuplicateKey]:
    first: dict[tuple[str, str], int] = {}
    found = []
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE_TAG:
            continue  # `<<: *base` overriding merged keys is the point of a merge
        line = key_node.start_mark.line + 1
        ident = (key_node.tag, key_node.value)
        if ident in first:
            found.append(DuplicateKey(key_node.value, line, first[ident]))
        else:
            first[ident] = line
    return found


class _OutOfBounds(yaml.MarkedYAMLError):
    """The document is well-formed but past what a pipeline file may be."""


def _bounds_error(mark, problem: str) -> yaml.MarkedYAMLError:
    return _OutOfBounds(None, None, problem, mark)


class _Constructor(SafeConstructor):
    """SafeConstructor whose value errors (`2020-13-01`, `!!int abc`) carry the node's line."""

    def construct_object(self, node, deep=False):
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, OverflowError) as exc:
            raise ConstructorError(None, None, f"cannot read value {str(node.value)[:40]!r}: {exc}",
                                   node.start_mark) from None


def _loader_class() -> type:
    """libyaml's parser (fast, compact marks) under our composer; the pure-Python one without it."""
    if getattr(yaml, "__with_libyaml__", False):
        from yaml._yaml import CParser as parser
    else:
        from yaml.reader import Reader
        from yaml.scanner import Scanner
        from yaml.parser import Parser

        class parser(Reader, Scanner, Parser):  # type: ignore[no-redef]
            def __init__(self, stream):
                Reader.__init__(self, stream)
                Scanner.__init__(self)
                Parser.__init__(self)

    class BoundedLoader(_BoundedComposer, parser, _Constructor, Resolver):
        def __init__(self, stream):
            parser.__init__(self, stream)
            _BoundedComposer.__init__(self)
            _Constructor.__init__(self)
            Resolver.__init__(self)

    return BoundedLoader


_Loader = _loader_class()


def load_located(text: str, file: str) -> LocatedDoc:
    """Parse ``text``; raise :class:`YamlSyntaxError` with the line on malformed or oversized YAML."""
    if len(text) > MAX_BYTES:
        raise YamlSyntaxError(file, None, f"document is larger than {MAX_BYTES // 2**20} MiB")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except _OutOfBounds as exc:
        raise YamlSyntaxError(file, exc.problem_mark.line + 1, f"YAML too large: {exc.problem}") from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        msg = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        raise YamlSyntaxError(file, line, f"YAML syntax error: {_one_line(msg)}") from None
    except yaml.reader.ReaderError as exc:
        raise YamlSyntaxError(file, _line_at(text, exc.position), f"not a text file: control character "
                              f"#x{exc.character:04x} is not allowed in YAML") from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(file, None, f"YAML error: {_one_line(str(exc))}") from None
    except RecursionError:
        raise YamlSyntaxError(file, None, "YAML nested too deeply") from None
    finally:
        loader.dispose()
    if node is None:
        raise YamlSyntaxError(file, None, "the file is empty (no YAML document)")
    doc = LocatedDoc(data=data, file=file, duplicates=loader.duplicates)
    _record(node, (), doc.lines, set())
    return doc


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _record(node: yaml.Node, path: Path_, lines: dict[Path_, int], seen: set[int]) -> None:
    """Lines of every path; an aliased node is walked once (paths through a later alias resolve
    to the alias's own key, the nearest located ancestor)."""
    lines.setdefault(path, node.start_mark.line + 1)
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            lines[path + (key,)] = key_node.start_mark.line + 1
            _record(value_node, path + (key,), lines, seen)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record(item, path + (i,), lines, seen)
