"""Inputs that match nothing, found while the run is resolved instead of after Ray has started.

A reader's glob that matches no file used to pass validation and fail in the reader, ~12 s later,
once Ray was up.  A run checks its readers' patterns on its own machine (the driver lists the
files there too); ``raypress submit`` does not, since the cluster may mount what this machine does
not (its probe checks there).  ``raypress validate`` checks the file alone, not this machine: a
Data-Juicer recipe's ``dataset_path: /path/to/your/dataset`` validates unchanged.

Not checked, because they exist only once something runs: remote URLs, paths in the run
directory, and paths at or below another writer's destination in the same pipeline."""

from __future__ import annotations

import glob
import os
import re
from typing import Iterable, Mapping

from raypress.dag.spec import PipelineSpec, Problem
from raypress.operators.base import OpKind
from raypress.operators.shared.files import glob_fields

_GLOB_CHARS = re.compile(r"[*?\[]")


def unmatched_inputs(nodes: Mapping, specs: Mapping, spec: PipelineSpec, run_dir: str | None) -> list[Problem]:
    """A problem on each reader pattern that matches no path here."""
    writers = [_norm(p) for p in _writer_paths(nodes, run_dir)]
    later = [_norm(run_dir)] if run_dir else []
    problems = []
    for nid, node in nodes.items():
        if node.kind != OpKind.READER or node.params is None:
            continue
        ns = specs[nid]
        for key in glob_fields(type(node.params)):
            for i, pattern in enumerate(getattr(node.params, key) or []):
                if not _checkable(pattern, [*writers, *later]) or _matches(pattern):
                    continue
                line = (spec.line(ns.path + ("with", key, i)) or spec.line(ns.path + ("with", key))
                        or spec.line(ns.path))
                where = "" if os.path.isabs(os.path.expanduser(pattern)) else f" (relative to {os.getcwd()})"
                problems.append(Problem(spec.doc.file, line, f"no file matches {pattern!r}{where}", node=nid, key=key))
    return problems


def _writer_paths(nodes: Mapping, run_dir: str | None) -> Iterable[str]:
    for node in nodes.values():
        path = getattr(node.params, "path", None) if node.kind == OpKind.WRITER else None
        if isinstance(path, str) and path:
            yield path.replace("{run_dir}", run_dir) if run_dir else path


def _norm(path: str) -> str:
    return os.path.normpath(os.path.abspath(os.path.expanduser(path)))


def _checkable(pattern: str, made_by_the_run: list[str]) -> bool:
    """Whether ``pattern`` names this machine's files as they are before the run: not a URL, not in
    the run directory, not where another node of this pipeline writes."""
    if not pattern or "://" in pattern or "{run_dir}" in pattern:
        return False
    fixed, wild = (_GLOB_CHARS.split(pattern, 1) + [""])[:2]  # literal part, and what follows a wildcard
    prefix = _norm(fixed) if fixed.strip() else _norm(".")
    descends = "**" in pattern or os.sep in wild  # the wildcards can reach into folders below the prefix
    for made in made_by_the_run:
        if prefix == made or prefix.startswith(made + os.sep):
            return False  # reads (part of) what the run writes
        if descends and made.startswith(prefix.rstrip(os.sep) + os.sep):
            return False
    return True


def _matches(pattern: str) -> bool:
    expanded = os.path.expanduser(pattern)
    if not _GLOB_CHARS.search(expanded):
        return os.path.exists(expanded)
    return next(glob.iglob(expanded, recursive=True), None) is not None
