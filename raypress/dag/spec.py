"""The pipeline spec: YAML (node list or Data-Juicer `process:` shorthand) -> plain node specs.

Pure and Ray-free, so validation, `raypress plan` and the pipelines service can use it without
starting anything.  Every node keeps the YAML path it came from, so problems can name a line.
"""

from __future__ import annotations

import copy
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from raypress.dag.yaml_lines import LocatedDoc, load_located, read_pipeline_text
from raypress.suggest import did_you_mean

TOP_KEYS = ("name", "description", "settings", "nodes", "process", "dataset_path", "export_path",
            "np", "project_name", "text_keys")
NODE_KEYS = ("id", "op", "with", "input", "mode", "description")
NODE_MODES = ("run", "stats")


@dataclass
class Problem:
    """One thing wrong with a pipeline, located as precisely as we can."""

    file: str
    line: int | None
    message: str
    node: str | None = None
    key: str | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        parts = [where]
        if self.node:
            parts.append(f"node '{self.node}'")
        if self.key:
            parts.append(f"key '{self.key}'")
        return " ".join(parts) + f": {self.message}"


class Settings:
    """Run-wide settings with their defaults (validated in ``validate``)."""

    DEFAULTS: dict[str, Any] = {
        "seed": 0,
        "max_error_ratio": 0.01,
        "keep_rejects": False,
        "np": None,
        "in_memory_mb": 256,  # materialized outputs up to this size stay in the object store for their readers
        "concurrent_steps": 1,  # steps (segments, stages) run at once when they do not depend on each other
        "allow_code": False,  # ops that run code from the file (python_lambda_mapper) need true; a service never sets it
    }


@dataclass
class NodeSpec:
    """One node as written: `op`, `with` params, `input` (None, a name, a list, or a mapping)."""

    id: str
    op: str
    params: dict[str, Any]
    input: Any
    path: tuple  # YAML path of this node, for line numbers
    mode: str = "run"  # "stats": a filter computes its stats but drops nothing (analysis)

    def input_slots(self) -> dict[str, list[str]]:
        """Normalize `input`: a name or a list feed the main `data` slot; a mapping names slots."""
        if self.input is None:
            return {}
        if isinstance(self.input, str):
            return {"data": [self.input]}
        if isinstance(self.input, list):
            return {"data": [str(x) for x in self.input]}
        if isinstance(self.input, dict):
            return {str(k): ([str(x) for x in v] if isinstance(v, list) else [str(v)])
                    for k, v in self.input.items()}
        return {"data": [str(self.input)]}


@dataclass
class PipelineSpec:
    name: str
    description: str
    settings: dict[str, Any]
    nodes: list[NodeSpec]
    doc: LocatedDoc
    problems: list[Problem] = field(default_factory=list)

    def line(self, path: tuple) -> int | None:
        return self.doc.line(path)

    def resolved_yaml(self) -> str:
        """The pipeline as it will run (overrides applied, shorthand expanded)."""
        out = {
            "name": self.name,
            "description": self.description,
            "settings": self.settings,
            "nodes": [
                {k: v for k, v in (("id", n.id), ("op", n.op), ("input", n.input),
                                   ("mode", None if n.mode == "run" else n.mode),
                                   ("with", n.params)) if v not in (None, {})}
                for n in self.nodes
            ],
        }
        return yaml.safe_dump(out, sort_keys=False)


def read_spec(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> PipelineSpec:
    """Parse a pipeline file; structural problems are collected, not raised (see `problems`)."""
    path = Path(path)
    doc = load_located(read_pipeline_text(path), str(path))
    return spec_from_doc(doc, overrides, default_name=path.stem)


def _duplicate_key_problems(doc: LocatedDoc) -> list[Problem]:
    """YAML keeps the last of two equal keys silently; the first one is usually what was meant."""
    return [Problem(doc.file, d.line, f"duplicate key {d.key!r} (first at line {d.first_line})")
            for d in doc.duplicates]


def spec_from_doc(doc: LocatedDoc, overrides=(), default_name: str = "pipeline") -> PipelineSpec:
    problems: list[Problem] = _duplicate_key_problems(doc)
    data = doc.data
    f = doc.file
    if not isinstance(data, dict):
        problems.append(Problem(f, doc.line(()), "a pipeline must be a YAML mapping with `nodes:` "
                                "(or a Data-Juicer `process:` list)"))
        return PipelineSpec(default_name, "", dict(Settings.DEFAULTS), [], doc, problems)

    for key in data:
        if key not in TOP_KEYS:
            problems.append(Problem(f, doc.line((key,)), f"unknown top-level key{did_you_mean(str(key), TOP_KEYS)}",
                                    key=str(key)))
    settings = dict(Settings.DEFAULTS)
    raw_settings = data.get("settings") or {}
    if not isinstance(raw_settings, dict):
        problems.append(Problem(f, doc.line(("settings",)), "`settings` must be a mapping", key="settings"))
        raw_settings = {}
    for key, value in raw_settings.items():
        if key not in Settings.DEFAULTS:
            problems.append(Problem(f, doc.line(("settings", key)),
                                    f"unknown setting{did_you_mean(str(key), Settings.DEFAULTS)}",
                                    key=f"settings.{key}"))
        settings[key] = value
    if data.get("np") is not None:
        settings["np"] = data["np"]

    if "process" in data:
        nodes = _expand_process(data, doc, problems)
    else:
        nodes = _read_nodes(data, doc, problems)

    spec = PipelineSpec(
        name=str(data.get("name") or data.get("project_name") or default_name),
        description=str(data.get("description") or ""),
        settings=settings,
        nodes=nodes,
        doc=doc,
        problems=problems,
    )
    apply_overrides(spec, overrides)
    return spec


def _read_nodes(data: dict, doc: LocatedDoc, problems: list[Problem]) -> list[NodeSpec]:
    f = doc.file
    raw = data.get("nodes")
    if raw is None:
        problems.append(Problem(f, doc.line(()), "no `nodes:` list (and no Data-Juicer `process:` list)"))
        return []
    if not isinstance(raw, list):
        problems.append(Problem(f, doc.line(("nodes",)), "`nodes` must be a list", key="nodes"))
        return []
    nodes = []
    for i, item in enumerate(raw):
        path = ("nodes", i)
        if not isinstance(item, dict):
            problems.append(Problem(f, doc.line(path), "each node must be a mapping with `id` and `op`"))
            continue
        node_id = item.get("id")
        label = str(node_id) if node_id is not None else f"#{i + 1}"
        for key in item:
            if key not in NODE_KEYS:
                problems.append(Problem(f, doc.line(path + (key,)),
                                        f"unknown node key{did_you_mean(str(key), NODE_KEYS)}",
                                        node=label, key=str(key)))
        if node_id is None or not isinstance(node_id, (str, int)):
            problems.append(Problem(f, doc.line(path), "node has no `id`", node=label, key="id"))
            continue
        op = item.get("op")
        if not isinstance(op, str):
            problems.append(Problem(f, doc.line(path), "node has no `op`", node=label, key="op"))
            op = ""
        params = item.get("with") or {}
        if not isinstance(params, dict):
            problems.append(Problem(f, doc.line(path + ("with",)), "`with` must be a mapping of parameters",
                                    node=label, key="with"))
            params = {}
        mode = item.get("mode", "run")
        if mode not in NODE_MODES:
            problems.append(Problem(f, doc.line(path + ("mode",)), f"mode must be one of {', '.join(NODE_MODES)} "
                                    f"(got {mode!r})", node=label, key="mode"))
            mode = "run"
        nodes.append(NodeSpec(str(node_id), op, dict(params), item.get("input"), path, mode))
    return nodes


def _reader_for(path: str) -> str:
    p = path.lower()
    if p.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        return "read_jsonl"
    if p.endswith(".parquet"):
        return "read_parquet"
    if p.endswith((".txt", ".md")):
        return "read_text_files"
    return "read_hf_dataset"


def _writer_for(path: str) -> str:
    p = path.lower()
    if p.endswith((".jsonl", ".json")):
        return "write_jsonl"
    if p.endswith(".parquet"):
        return "write_parquet"
    return "write_hf_dataset"


def _expand_process(data: dict, doc: LocatedDoc, problems: list[Problem]) -> list[NodeSpec]:
    """Data-Juicer recipe -> a linear node list: reader, each `process` op, writer."""
    f = doc.file
    nodes: list[NodeSpec] = []
    dataset_path = data.get("dataset_path")
    if not dataset_path:
        problems.append(Problem(f, doc.line(("process",)), "a `process:` recipe needs `dataset_path`",
                                key="dataset_path"))
    else:
        reader = _reader_for(str(dataset_path))
        params: dict[str, Any] = {"paths": [str(dataset_path)]}
        if reader == "read_hf_dataset":
            params = {"path": str(dataset_path)}
        nodes.append(NodeSpec("dataset", reader, params, None, ("dataset_path",)))
    process = data.get("process")
    if not isinstance(process, list):
        problems.append(Problem(f, doc.line(("process",)), "`process` must be a list of `{op_name: {params}}`",
                                key="process"))
        process = []
    seen: dict[str, int] = {}
    for i, item in enumerate(process):
        path = ("process", i)
        if isinstance(item, str):
            item = {item: {}}
        if not isinstance(item, dict) or len(item) != 1:
            problems.append(Problem(f, doc.line(path), "each `process` item must be `{op_name: {params}}`"))
            continue
        (op, params), = item.items()
        seen[op] = seen.get(op, 0) + 1
        node_id = op if seen[op] == 1 else f"{op}_{seen[op]}"
        prev = nodes[-1].id if nodes else None
        nodes.append(NodeSpec(node_id, str(op), dict(params or {}), prev, path + (op,)))
    export_path = data.get("export_path")
    if export_path:
        prev = nodes[-1].id if nodes else None
        nodes.append(NodeSpec("export", _writer_for(str(export_path)), {"path": str(export_path)}, prev,
                              ("export_path",)))
    return nodes


def _override_targets(node_id: str, param: str, by_id: dict) -> list[str] | str:
    """The node ids `--set NODE.PARAM` applies to (``[]`` for `settings.KEY`), or why it applies to none."""
    if node_id == "settings" and node_id not in by_id:
        return [] if param in Settings.DEFAULTS else f"unknown setting{did_you_mean(param, Settings.DEFAULTS)}"
    if any(ch in node_id for ch in "*?["):  # a glob sets one param on every matching node
        return [nid for nid in by_id if fnmatch.fnmatchcase(nid, node_id)] or f"no node matches {node_id!r}"
    if node_id not in by_id:
        return f"no node {node_id!r}{did_you_mean(node_id, by_id)}"
    return [node_id]


def apply_overrides(spec: PipelineSpec, overrides) -> None:
    """`--set NODE.PARAM=VALUE` (VALUE parsed as YAML; NODE may be a glob such as `bridge_*`, setting
    the param on every matching node) and `--set settings.KEY=VALUE`; bad ones become problems."""
    by_id = {n.id: n for n in spec.nodes}
    for item in overrides or ():
        where = Problem("--set", None, "", key=item)
        if "=" not in item or "." not in item.split("=", 1)[0]:
            where.message = "expected NODE.PARAM=VALUE"
            spec.problems.append(where)
            continue
        target, raw_value = item.split("=", 1)
        node_id, param = target.split(".", 1)
        targets = _override_targets(node_id, param, by_id)
        if isinstance(targets, str):
            where.message = targets
            spec.problems.append(where)
            continue
        try:
            value = yaml.safe_load(raw_value) if raw_value != "" else ""
        except yaml.YAMLError as exc:
            where.message = f"value is not valid YAML: {exc}"
            spec.problems.append(where)
            continue
        if not targets:  # settings.KEY: a bad value is reported by validate, like one in the file
            spec.settings[param] = value
        for nid in targets:
            node = by_id[nid]
            node.params = copy.deepcopy(node.params)
            node.params[param] = copy.deepcopy(value)
