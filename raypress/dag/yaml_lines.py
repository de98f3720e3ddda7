"""Load YAML and remember the line of every key, so validation can say `file:line`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

Path_ = tuple[Any, ...]


@dataclass
class LocatedDoc:
    """A parsed YAML document plus the line number of each path (mapping key / list item)."""

    data: Any
    file: str
    lines: dict[Path_, int] = field(default_factory=dict)

    def line(self, path: Path_) -> int | None:
        """Line of ``path``, or of its nearest located ancestor."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.lines.get((), None)


class YamlSyntaxError(Exception):
    def __init__(self, file: str, line: int | None, message: str):
        super().__init__(message)
        self.file, self.line, self.message = file, line, message


def load_located(text: str, file: str) -> LocatedDoc:
    """Parse ``text``; raise :class:`YamlSyntaxError` with the line on malformed YAML."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        msg = " ".join(str(x) for x in (exc.context, exc.problem) if x)
        raise YamlSyntaxError(file, line, f"YAML syntax error: {msg}") from None
    except yaml.YAMLError as exc:
        raise YamlSyntaxError(file, None, f"YAML error: {exc}") from None
    finally:
        loader.dispose()
    doc = LocatedDoc(data=data, file=file)
    if node is not None:
        _record(node, (), doc.lines)
    return doc


def _record(node: yaml.Node, path: Path_, lines: dict[Path_, int]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else str(key_node)
            lines[path + (key,)] = key_node.start_mark.line + 1
            _record(value_node, path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _record(item, path + (i,), lines)
