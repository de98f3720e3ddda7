"""The pipeline spec: YAML (node list or Data-Juicer `process:` shorthand) -> plain node specs.

Pure and Ray-free, so validation, `raypress plan` and the pipelines service can use it without
starting anything.  Every node keeps the YAML path it came from, so problems can name a line.
"""

from __future__ import annotations

import copy
import fnmatch
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from raypress.dag import dj_compat
from raypress.dag.yaml_lines import LocatedDoc, load_located, read_pipeline_text
from raypress.schema import STATS_COL
from raypress.suggest import did_you_mean

NATIVE_TOP_KEYS = ("name", "description", "resolved", "settings", "profiles", "nodes")
RESOLVED_KEY = "resolved"  # the top-level key that marks a resolved file (dag/resolve.py) and says from what
RESOLVED_FIELDS = ("source", "overrides", "run_dir", "base_dir")
TOP_KEYS = NATIVE_TOP_KEYS + tuple(k for k in dj_compat.GLOBAL_KEYS if k not in NATIVE_TOP_KEYS)
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
        "in_memory_mb": 64,  # materialized outputs up to this size (in memory, not on disk) stay in the object store
        "concurrent_steps": 1,  # steps (segments, stages) run at once when they do not depend on each other
        # a reader's rows cut into blocks of this many: a task per block (dag/blocks.py); "auto" cuts
        # segments whose ops load a model, at 256 rows
        "rows_per_block": "auto",
        "stateful_ops": "tasks",  # a stateful CPU op: tasks keeping the op per worker, or "actors" (a pool)
        "allow_code": False,  # ops that run code from the file (python_lambda_mapper) need true; a service never sets it
        # how the embedded Ray's Serve takes HTTP (serve_llm): Serve's Python proxy, Serve's HAProxy
        # ingress (dag/haproxy_loopback.py), or "auto" (HAProxy where the binary is installed)
        "serve_ingress": "auto",
        # a column naming each row's source (tag_source_mapper writes it): the ledger then counts every
        # node's rows per source too (`by_source`), and says which source a cross-source duplicate lost to
        "source_key": None,
        # a named set of parameter values from the file's `profiles:` (e.g. `reduced`, `cluster`), applied
        # before the `--set` overrides (`--profile NAME` or `--set settings.profile=NAME`)
        "profile": None,
    }


@dataclass(frozen=True)
class Resolution:
    """Where a resolved pipeline came from: recorded in its file, so any process can run it as is."""

    source: str  # the user's pipeline file (absolute)
    overrides: tuple[str, ...]  # the `--set` flags it was resolved with
    run_dir: str  # absolute; `{run_dir}` in params is expanded to it
    base_dir: str  # what relative paths were relative to (the directory the run was started from)

    def header(self) -> str:
        sets = " ".join(f"--set {o}" for o in self.overrides)
        return (f"# Resolved by raypress from {self.source}{' with ' + sets if sets else ''}.\n"
                "# Every process of this run runs this file as it is (overrides, references, {run_dir},\n"
                "# absolute paths, model files and defaults are already applied); edit the source instead.\n")


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
    notices: list[str] = field(default_factory=list)  # accepted Data-Juicer keys: what raypress does instead
    text_key: str | None = None  # Data-Juicer's `text_keys`: the default `text_key` of the recipe's ops
    ray_address: str | None = None  # Data-Juicer's `ray_address` when it names a cluster (not "auto")
    resolution: Resolution | None = None  # set when the file is a resolved one (dag/resolve.py)

    def line(self, path: tuple) -> int | None:
        return self.doc.line(path)


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

    if "process" in data:  # Data-Juicer's command line sets its global keys: `--set dataset_path=...`
        data, overrides = _recipe_key_overrides(data, overrides, problems)
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

    dj = _read_dj_globals(data, doc, problems)
    if data.get("open_tracer") is True and "keep_rejects" not in raw_settings:
        settings["keep_rejects"] = True  # Data-Juicer's tracer shows what each op removed: rejects/ does
    if "process" in data:
        nodes = _expand_process(data, doc, problems, dj)
    else:
        nodes = _read_nodes(data, doc, problems)

    spec = PipelineSpec(
        name=str(data.get("name") or data.get("project_name") or default_name),
        description=str(data.get("description") or ""),
        settings=settings,
        nodes=nodes,
        doc=doc,
        problems=problems,
        notices=dj.notices,
        text_key=dj.text_key,
        ray_address=dj.ray_address,
    )
    if RESOLVED_KEY in data:
        resolution = resolution_from(data[RESOLVED_KEY])
        if isinstance(resolution, str):
            problems.append(Problem(f, doc.line((RESOLVED_KEY,)), resolution, key=RESOLVED_KEY))
        else:
            spec.resolution = resolution
    if spec.resolution is None:  # a resolved file holds the profile's values already (and no profiles)
        apply_profile(spec, data, doc, overrides)
    apply_overrides(spec, overrides)
    resolve_param_references(spec)
    return spec


def apply_profile(spec: PipelineSpec, data: dict, doc: LocatedDoc, overrides) -> None:
    """The values of the chosen profile (``settings.profile``, from the file or `--set`): each entry of
    ``profiles.NAME`` is ``NODE.PARAM: VALUE`` or ``settings.KEY: VALUE``, set as a `--set` would set it
    (before the command line's, which win); ``description`` says what the profile is for."""
    chosen = spec.settings.get("profile")
    for item in overrides or ():
        if item.startswith("settings.profile="):
            chosen = yaml.safe_load(item.split("=", 1)[1]) or None
    profiles = data.get("profiles") or {}
    f = doc.file
    if not isinstance(profiles, dict) or not all(isinstance(v, dict) for v in profiles.values()):
        spec.problems.append(Problem(f, doc.line(("profiles",)), "`profiles` must map each profile's name to a "
                                     "mapping of `NODE.PARAM: VALUE`", key="profiles"))
        return
    if chosen is None:
        return
    if chosen not in profiles:
        known = ", ".join(map(str, profiles)) or "none"
        spec.problems.append(Problem(f, doc.line(("settings", "profile")), f"unknown profile {chosen!r} "
                                     f"(this file's profiles: {known})", key="settings.profile"))
        return
    by_id = {n.id: n for n in spec.nodes}
    for key, value in profiles[chosen].items():
        if key == "description":
            continue
        where = Problem(f, doc.line(("profiles", chosen, key)), "", key=f"profiles.{chosen}.{key}")
        if not isinstance(key, str) or "." not in key:
            where.message = "a profile's entry is `NODE.PARAM: VALUE` or `settings.KEY: VALUE`"
            spec.problems.append(where)
            continue
        node_id, param = key.split(".", 1)
        _set_value(spec, by_id, node_id, param, value, where)


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
        if not NODE_ID.match(str(node_id)):
            problems.append(Problem(f, doc.line(path + ("id",)), f"node id {str(node_id)!r} names the node's folders "
                                    "(nodes/, rejects/, quarantine/): no '/', '\\', leading '.' or NUL, at most "
                                    "200 characters", node=label, key="id"))
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


@dataclass
class DjGlobals:
    """Data-Juicer's global keys as raypress applies them (see ``raypress.dag.dj_compat``)."""

    notices: list[str] = field(default_factory=list)
    text_key: str | None = None
    ray_address: str | None = None
    shards: bool = False  # export_shard_size > 0: a folder of parts instead of one file
    keep_stats: bool = False  # keep_stats_in_res_ds (Data-Juicer's default: false)
    suffixes: list[str] = field(default_factory=list)
    export_type: str | None = None


EXPORT_TYPES = {"jsonl": "write_jsonl", "json": "write_jsonl", "parquet": "write_parquet"}
CACHE_NOTICE = ("raypress keeps each step's output in the run directory and skips a step whose inputs and "
                "config are unchanged when rerun with the same `--run-dir`; there is no Hugging Face cache")


def _read_dj_globals(data: dict, doc: LocatedDoc, problems: list[Problem]) -> DjGlobals:
    """Check and apply Data-Juicer's global keys; the accepted-but-different ones become notices."""
    f = doc.file
    dj = DjGlobals()

    def bad(key: str, message: str) -> None:
        problems.append(Problem(f, doc.line((key,)), message, key=key))

    def note(key: str, text: str) -> None:
        line = doc.line((key,))
        dj.notices.append(f"{f}:{line} `{key}`: {text}" if line else f"{f} `{key}`: {text}")

    def flag(key: str) -> bool | None:
        value = data.get(key)
        if value is not None and not isinstance(value, bool):
            bad(key, f"{key} must be true or false (got {value!r})")
            return None
        return value

    for key, text in dj_compat.NOTICES.items():
        if text and data.get(key) not in (None, False, [], {}, ""):
            note(key, text)
    keys = data.get("text_keys")
    if isinstance(keys, str) and keys:
        dj.text_key = keys
    elif isinstance(keys, list) and keys and all(isinstance(k, str) and k for k in keys):
        dj.text_key = keys[0]
        if len(keys) > 1:
            note("text_keys", f"raypress's text ops read one column each: {keys[0]!r} is every op's "
                              "default `text_key` (give an op `text_key` to read another)")
    elif keys is not None:
        bad("text_keys", f"text_keys must be a column name or a list of them (got {keys!r})")
    executor = data.get("executor_type")
    if executor is not None and executor not in ("default", "ray"):
        bad("executor_type", f"executor_type must be 'default' or 'ray' (got {executor!r}); "
                             "raypress runs both on Ray")
    address = data.get("ray_address")
    if address is not None and not isinstance(address, str):
        bad("ray_address", f"ray_address must be a string (got {address!r})")
    elif address and address != "auto":
        dj.ray_address = address
    shard = data.get("export_shard_size")
    if shard is not None and (not isinstance(shard, int) or isinstance(shard, bool) or shard < 0):
        bad("export_shard_size", f"export_shard_size must be an integer >= 0 (got {shard!r})")
    elif shard:
        dj.shards = True
        note("export_shard_size", "raypress writes the export as a folder of parts (one per Ray block, "
                                  "not cut at a byte size), named after export_path without its suffix")
    flag("export_in_parallel")  # raypress always writes parts in parallel and joins them
    dj.keep_stats = bool(flag("keep_stats_in_res_ds"))
    suffixes = data.get("suffixes")
    if isinstance(suffixes, str):
        suffixes = [suffixes]
    if suffixes is not None and not (isinstance(suffixes, list) and all(isinstance(x, str) and x for x in suffixes)):
        bad("suffixes", f"suffixes must be a list of file suffixes such as ['.jsonl'] (got {suffixes!r})")
    elif suffixes:
        dj.suffixes = ["." + x.lstrip(".") for x in suffixes]
    for key in ("use_cache", "use_checkpoint"):
        if flag(key):
            note(key, CACHE_NOTICE)
    for key in ("ds_cache_dir", "cache_compress"):
        if data.get(key) is not None:
            note(key, CACHE_NOTICE)
    export_type = data.get("export_type")
    if export_type is not None and export_type not in EXPORT_TYPES:
        bad("export_type", f"raypress exports {', '.join(EXPORT_TYPES)} (got {export_type!r})")
    elif export_type:
        dj.export_type = export_type
    return dj


def _local_dataset(dataset: Any, doc: LocatedDoc, problems: list[Problem]) -> str | NodeSpec | None:
    """The path of Data-Juicer's `dataset: {configs: [{type: local, path: …}]}` (one local source),
    or the reader of a Hugging Face Hub dataset (`type: remote, source: huggingface`), which raypress
    reads from the local Hugging Face cache, never from the network."""
    configs = dataset.get("configs") if isinstance(dataset, dict) else None
    if isinstance(configs, list) and len(configs) == 1 and isinstance(configs[0], dict):
        cfg = configs[0]
        if cfg.get("type") == "local" and isinstance(cfg.get("path"), str) and cfg["path"]:
            return cfg["path"]
        if cfg.get("type") == "remote" and cfg.get("source") == "huggingface" and isinstance(cfg.get("path"), str):
            params = {"hub_id": cfg["path"], "hub_config": cfg.get("name"), "split": cfg.get("split")}
            return NodeSpec("dataset", "read_hf_dataset", {k: v for k, v in params.items() if v is not None},
                            None, ("dataset",))
        if cfg.get("type") == "remote":
            problems.append(Problem(doc.file, doc.line(("dataset",)), f"a remote dataset ({cfg.get('source')}: "
                                    f"{cfg.get('path')}) needs network access: download it and give its local "
                                    "path as `dataset_path` (raypress reads Hugging Face Hub datasets from the "
                                    "local cache only)", key="dataset"))
            return None
    problems.append(Problem(doc.file, doc.line(("dataset",)), "raypress reads `dataset_path` or one local "
                            "source in `dataset.configs` (`type: local`, `path`); for several sources write "
                            "a raypress `nodes:` pipeline", key="dataset"))
    return None


def _dataset_node(dataset_path: str, dj: DjGlobals, doc: LocatedDoc, problems: list[Problem]) -> NodeSpec:
    """The reader for `dataset_path`: a file by its suffix; a folder by `suffixes` (Data-Juicer reads
    the files with those suffixes below it), else as a Hugging Face dataset."""
    reader = _reader_for(dataset_path)
    if reader == "read_hf_dataset" and dj.suffixes:
        readers = {_reader_for("x" + s) for s in dj.suffixes}
        if len(readers) == 1 and "read_hf_dataset" not in readers:
            root = dataset_path.rstrip("/")
            return NodeSpec("dataset", readers.pop(), {"paths": [f"{root}/**/*{s}" for s in dj.suffixes]},
                            None, ("dataset_path",))
        problems.append(Problem(doc.file, doc.line(("suffixes",)), "raypress reads one kind of file per "
                                f"recipe (.jsonl/.json, .parquet or .txt/.md), got {dj.suffixes}", key="suffixes"))
    if reader == "read_hf_dataset":
        return NodeSpec("dataset", reader, {"path": dataset_path}, None, ("dataset_path",))
    return NodeSpec("dataset", reader, {"paths": [dataset_path]}, None, ("dataset_path",))


def _export_node(export_path: str, prev: str | None, dj: DjGlobals) -> NodeSpec:
    writer = EXPORT_TYPES[dj.export_type] if dj.export_type else _writer_for(export_path)
    path = export_path
    if dj.shards:
        stem = Path(export_path)
        path = str(stem.with_suffix("")) if stem.suffix else export_path
    return NodeSpec("export", writer, {"path": path}, prev, ("export_path",))


# a node's id is the name of its folders in the run directory
NODE_ID = re.compile(r"^[^/\\\x00.][^/\\\x00]{0,199}$")
_EXPONENT_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)[eE][-+]?\d+")


def _yaml11_number(value: Any) -> Any:
    """`2e5` is a string to YAML 1.1 (it wants `2.0e+5`) but a number to Data-Juicer's parser, and
    its recipes write it so (`max_num: 2e5`); an integral one becomes an int."""
    if isinstance(value, str) and _EXPONENT_NUMBER.fullmatch(value.strip()):
        number = float(value)
        return int(number) if number.is_integer() else number
    return value


def _expand_process(data: dict, doc: LocatedDoc, problems: list[Problem],
                    dj: DjGlobals | None = None) -> list[NodeSpec]:
    """Data-Juicer recipe -> a linear node list: reader, each `process` op, (stats dropped), writer."""
    f = doc.file
    dj = dj or DjGlobals()
    nodes: list[NodeSpec] = []
    dataset_path = data.get("dataset_path")
    if not dataset_path and "dataset" in data:
        dataset_path = _local_dataset(data["dataset"], doc, problems)
    elif not dataset_path:
        problems.append(Problem(f, doc.line(("process",)), "a `process:` recipe needs `dataset_path`",
                                key="dataset_path"))
    if isinstance(dataset_path, NodeSpec):
        nodes.append(dataset_path)
    elif dataset_path:
        nodes.append(_dataset_node(str(dataset_path), dj, doc, problems))
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
        if isinstance(params, dict):
            params = {k: _yaml11_number(v) for k, v in params.items()}
        seen[op] = seen.get(op, 0) + 1
        node_id = op if seen[op] == 1 else f"{op}_{seen[op]}"
        prev = nodes[-1].id if nodes else None
        nodes.append(NodeSpec(node_id, str(op), dict(params or {}), prev, path + (op,)))
    export_path = data.get("export_path")
    if export_path:
        if not dj.keep_stats and nodes:  # Data-Juicer's export drops the filters' stats by default
            nodes.append(NodeSpec("drop_stats", "drop_columns", {"columns": [STATS_COL]}, nodes[-1].id,
                                  ("keep_stats_in_res_ds",) if "keep_stats_in_res_ds" in data else ("export_path",)))
        prev = nodes[-1].id if nodes else None
        nodes.append(_export_node(str(export_path), prev, dj))
    return nodes


def _recipe_key_overrides(data: dict, overrides, problems: list[Problem]) -> tuple[dict, list[str]]:
    """A Data-Juicer recipe with its top-level keys set from `--set KEY=VALUE` (``dataset_path``,
    ``export_path``, ``np``, ... as Data-Juicer's `--dataset_path` does), and the other overrides."""
    rest: list[str] = []
    data = dict(data)
    for item in overrides or ():
        key, _, raw = item.partition("=")
        if not _ or "." in key or key not in TOP_KEYS or key in ("nodes", "settings", "process"):
            rest.append(item)
            continue
        try:
            data[key] = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError as exc:
            problems.append(Problem("--set", None, f"value is not valid YAML: {exc}", key=item))
        if key == "dataset_path":
            data.pop("dataset", None)  # the path given replaces the recipe's `dataset:` sources
    return data, rest


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
    the param on every matching node) and `--set settings.KEY=VALUE`; bad ones become problems
    (a Data-Juicer recipe's `--set dataset_path=...` is applied before, by _recipe_key_overrides)."""
    by_id = {n.id: n for n in spec.nodes}
    for item in overrides or ():
        where = Problem("--set", None, "", key=item)
        if "=" not in item or "." not in item.split("=", 1)[0]:
            where.message = ("expected NODE.PARAM=VALUE (a Data-Juicer recipe also takes its top-level keys: "
                             "`--set dataset_path=...`)")
            spec.problems.append(where)
            continue
        target, raw_value = item.split("=", 1)
        node_id, param = target.split(".", 1)
        try:
            value = yaml.safe_load(raw_value) if raw_value != "" else ""
        except yaml.YAMLError as exc:
            where.message = f"value is not valid YAML: {exc}"
            spec.problems.append(where)
            continue
        _set_value(spec, by_id, node_id, param, value, where)


def _set_value(spec: PipelineSpec, by_id: dict, node_id: str, param: str, value: Any, where: Problem) -> None:
    """Set ``node_id.param`` (a glob of node ids, or ``settings``) to ``value``, or say why not at ``where``."""
    targets = _override_targets(node_id, param, by_id)
    if isinstance(targets, str):
        where.message = targets
        spec.problems.append(where)
        return
    if not targets:  # settings.KEY: a bad value is reported by validate, like one in the file
        spec.settings[param] = value
    for nid in targets:
        node = by_id[nid]
        node.params = copy.deepcopy(node.params)
        node.params[param] = copy.deepcopy(value)


PARAM_REFERENCE = re.compile(r"^\$\{([A-Za-z0-9_.-]+)\.([A-Za-z0-9_]+)\}$")


def resolve_param_references(spec: PipelineSpec) -> None:
    """A param whose value is exactly ``"${NODE.PARAM}"`` takes that node's param value, after the
    `--set` overrides: one setting feeds several nodes (MINT-1T's pages and images come from the same
    WARCs: ``--set warc.paths=...`` moves both), and setting the referring param itself still wins.
    A reference to a missing node or param, or to another reference, is a problem on its line."""
    by_id = {n.id: n for n in spec.nodes}
    for node in spec.nodes:
        for key, value in list(node.params.items()):
            match = PARAM_REFERENCE.match(value) if isinstance(value, str) else None
            if match is None:
                continue
            target_id, param = match.groups()
            target = by_id.get(target_id)
            where = Problem(spec.doc.file, spec.line(node.path + ("with", key)) or spec.line(node.path),
                            "", node=node.id, key=key)
            if target is None:
                where.message = f"{value}: no node {target_id!r}{did_you_mean(target_id, by_id)}"
            elif param not in target.params:
                where.message = f"{value}: node {target_id!r} sets no param {param!r} (a reference needs a value)"
            elif isinstance(target.params[param], str) and PARAM_REFERENCE.match(target.params[param]):
                where.message = f"{value}: refers to another reference ({target.params[param]}); name the value"
            else:
                node.params = {**node.params, key: copy.deepcopy(target.params[param])}
                continue
            spec.problems.append(where)


def resolution_from(raw: Any) -> Resolution | str:
    """The ``resolved:`` mapping of a file as a Resolution, or why it is not one."""
    if not isinstance(raw, dict) or set(raw) != set(RESOLVED_FIELDS):
        return f"`{RESOLVED_KEY}` must be a mapping of {', '.join(RESOLVED_FIELDS)} (raypress writes it)"
    if not all(isinstance(raw[k], str) and os.path.isabs(raw[k]) for k in ("source", "run_dir", "base_dir")):
        return f"`{RESOLVED_KEY}`: source, run_dir and base_dir must be absolute paths"
    overrides = raw["overrides"]
    if not isinstance(overrides, list) or not all(isinstance(o, str) for o in overrides):
        return f"`{RESOLVED_KEY}.overrides` must be a list of strings"
    return Resolution(raw["source"], tuple(overrides), raw["run_dir"], raw["base_dir"])
