"""One resolved pipeline file for every way a run starts.

Why: a run used to be resolved in several places (the supervisor and its child each parsed and
validated, the runner re-validated after ``{run_dir}`` expansion and pinned model files in place,
``submit`` re-encoded paths as extra ``--set`` flags and the head parsed twice more), so what ran
was whatever the last of them made of it.  Now :func:`resolve_pipeline` turns a pipeline file plus
its overrides into the final pipeline once — ``--set`` applied, ``${node.param}`` references,
``{run_dir}``, relative paths made absolute, model files pinned, defaults filled — and renders it as
``run_dir/pipeline.yaml``.  The supervised child, a resume, ``raypress submit``'s job and the
pipelines service all run that file as it is: reading a resolved file back is the identity.

Problems are found while resolving, against the user's own file, so they still name its lines.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from raypress.dag.fingerprint import is_path_key
from raypress.dag.spec import RESOLVED_KEY, PipelineSpec, Problem, Resolution
from raypress.dag.validate import (
    RUN_DIR_TOKEN,
    PipelineInvalid,
    ValidatedPipeline,
    VNode,
    print_notices,
    read_pipeline_spec,
    validate,
)
from raypress.operators.base import OpKind



@dataclass(frozen=True)
class ResolvedPipeline:
    """The final, validated pipeline of one run, and its file's text."""

    vp: ValidatedPipeline
    resolution: Resolution
    text: str

    @property
    def run_dir(self) -> Path:
        return Path(self.resolution.run_dir)

    @property
    def file(self) -> Path:
        return self.run_dir / "pipeline.yaml"

    def write(self) -> Path:
        """Write ``run_dir/pipeline.yaml`` (atomically; untouched when it already says the same)."""
        path = self.file
        with contextlib.suppress(OSError):  # no file yet (or unreadable): write it
            if path.read_text(encoding="utf-8") == self.text:
                return path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name("pipeline.yaml.tmp")
        tmp.write_text(self.text, encoding="utf-8")
        tmp.replace(path)
        return path


def resolve_pipeline(path: str | Path, overrides=(), run_dir: str | None = None, *,
                     base_dir: str | None = None, cluster_address: str | None = None,
                     stats_mode: bool = False, run_dir_suffix: str = "", inputs_here: bool = True) -> ResolvedPipeline:
    """The pipeline ``path`` with ``overrides`` as it will run in ``run_dir`` (default
    ``runs/<name>/<timestamp>`` under ``base_dir``, which defaults to the current directory).

    A file that is already resolved (a run directory's ``pipeline.yaml``) comes back as it is: it
    takes no overrides and belongs to the run directory it records.  Model files are pinned here
    unless the run goes to a cluster (``cluster_address``, or a recipe's ``ray_address``), where
    they are looked up on the machine that runs the op.  ``stats_mode``: every filter computes its
    stats and drops nothing (``raypress analyze``; its default run directory is named with
    ``run_dir_suffix``), written into the file as ``mode: stats``.  ``inputs_here``: the run lists
    its input files on this machine, so a reader pattern matching nothing here is a problem (not
    for ``submit``: the cluster may mount what this machine does not).
    Raises :class:`PipelineInvalid` listing every problem, at the user's file and line."""
    from raypress.dag.store import default_run_dir

    spec = read_pipeline_spec(path, overrides)
    recorded = spec.resolution
    if recorded is not None:
        return _already_resolved(spec, recorded, overrides, run_dir, stats_mode)
    base = os.path.abspath(base_dir or os.getcwd())
    run_root = _absolute(run_dir or default_run_dir(spec.name + run_dir_suffix), base)
    for node in spec.nodes:
        node.params = _resolved_params(node.params, run_root, base)
    try:
        vp = validate(spec, run_dir=run_root, check_inputs=inputs_here)
    finally:  # the recipe's notices and those validation adds for its ops' Data-Juicer keys
        print_notices(spec)
    if stats_mode:
        _to_stats_mode(vp)
    if not (cluster_address or spec.ray_address):
        _pin_model_files(vp)
    vp.freeze()
    resolution = Resolution(str(Path(path).resolve()), tuple(overrides), run_root, base)
    return ResolvedPipeline(vp, resolution, render(vp, resolution))


def _already_resolved(spec: PipelineSpec, recorded: Resolution, overrides, run_dir: str | None,
                      stats_mode: bool) -> ResolvedPipeline:
    where = spec.doc.file
    problems = []
    if overrides:
        problems.append(Problem("--set", None, f"{where} is a resolved pipeline (from {recorded.source}): it runs "
                                "as it is; give --set with its source file", key=" ".join(overrides)))
    if run_dir is not None and os.path.abspath(run_dir) != recorded.run_dir:
        problems.append(Problem(where, spec.line((RESOLVED_KEY, "run_dir")), f"this resolved pipeline belongs to "
                                f"{recorded.run_dir} (its paths point there); run its source {recorded.source} "
                                f"for a run in {run_dir}", key="--run-dir"))
    if problems:
        raise PipelineInvalid(problems)
    vp = validate(spec, check_inputs=True)  # where it runs: a submitted job's driver on the cluster
    if stats_mode and any(n.kind == OpKind.FILTER and not n.stats_only for n in vp.nodes.values()):
        # resolved for a plain run: analyzing it would change it (a service's analyze run is resolved
        # in stats mode, and its job analyzes that file as it is)
        raise PipelineInvalid([Problem(where, None, "analyze a source pipeline, not one resolved for a run "
                                                    f"(its source: {recorded.source})")])
    vp.freeze()
    return ResolvedPipeline(vp, recorded, render(vp, recorded))


def _resolved_params(params: dict[str, Any], run_dir: str, base: str) -> dict[str, Any]:
    """``{run_dir}`` expanded everywhere, then every string under a path-like key made absolute."""
    return {key: _absolute_paths(_expand(value, run_dir), base) if is_path_key(str(key))
            else _nested_paths(_expand(value, run_dir), base) for key, value in params.items()}


def _expand(value: Any, run_dir: str) -> Any:
    if isinstance(value, str):
        return value.replace(RUN_DIR_TOKEN, run_dir)
    if isinstance(value, list):
        return [_expand(v, run_dir) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v, run_dir) for k, v in value.items()}
    return value


def _nested_paths(value: Any, base: str) -> Any:
    """Path-like keys inside a mapping param (``data_files: {train: [...]}`` is one itself)."""
    if isinstance(value, dict):
        return {k: _absolute_paths(v, base) if is_path_key(str(k)) else _nested_paths(v, base)
                for k, v in value.items()}
    return value


def _absolute_paths(value: Any, base: str) -> Any:
    if isinstance(value, str):
        return _absolute(value, base)
    if isinstance(value, list):
        return [_absolute_paths(v, base) for v in value]
    if isinstance(value, dict):
        return {k: _absolute_paths(v, base) for k, v in value.items()}
    return value


def _absolute(text: str, base: str) -> str:
    """``text`` as a run started in ``base`` reads it: ``~`` expanded, relative made absolute; URLs
    and empty strings as they are."""
    if not text or "://" in text:
        return text
    expanded = os.path.expanduser(text)
    return expanded if os.path.isabs(expanded) else os.path.normpath(os.path.join(base, expanded))


def _to_stats_mode(vp: ValidatedPipeline) -> None:
    for node in vp.nodes.values():
        if node.kind == OpKind.FILTER:
            node.stats_only = True


def _pin_model_files(vp: ValidatedPipeline) -> None:
    """Every model file an op finds by name (Data-Juicer's sentencepiece/KenLM models, a tokenizer),
    found now and pinned in the node's params, so the workers load the files found here; a missing
    one is one line per node naming its YAML line and how to provide the file, instead of an
    actor's traceback after the nodes before it have run."""
    spec, problems = vp.spec, []
    by_id = {n.id: n for n in spec.nodes}
    for nid in vp.order:
        node = vp.nodes[nid]
        try:
            node.params = node.params.with_model_files(node.op_cls.name)
        except FileNotFoundError as exc:
            line = spec.line(by_id[nid].path) if nid in by_id else None
            problems.append(Problem(spec.doc.file, line, str(exc), node=nid))
    if problems:
        raise PipelineInvalid(problems)


def _written_params(node: VNode) -> dict[str, Any]:
    """A node's params as the resolved file holds them: every field, defaults filled, when reading
    them back gives the same params; only the fields set otherwise (an op whose validator judges
    which fields were given, e.g. `purify_baseline`'s per-method knobs).  ``allow_code`` is left
    out: validation grants it from ``settings.allow_code`` again."""
    exclude = {"allow_code"} if node.op_cls.takes_code else None
    runtime = node.runtime.keys  # Data-Juicer's per-op keys as written: validated again on reading
    full = node.params.model_dump(mode="json", exclude=exclude)
    with contextlib.suppress(ValueError):  # a full dump that does not read back: write what was set
        same = node.op_cls.Params.model_validate(full)
        if same.model_dump(mode="json", exclude=exclude) == full:
            return {**full, **runtime}
    return {**node.params.model_dump(mode="json", exclude=exclude, exclude_unset=True), **runtime}


def render(vp: ValidatedPipeline, resolution: Resolution) -> str:
    """The resolved file: every node with all its params (defaults filled), in the YAML's order."""
    spec = vp.spec
    recorded = {"source": resolution.source, "overrides": list(resolution.overrides),
                "run_dir": resolution.run_dir, "base_dir": resolution.base_dir}
    doc: dict[str, Any] = {"name": spec.name, "description": spec.description, RESOLVED_KEY: recorded,
                           "settings": dict(spec.settings)}
    if spec.ray_address:
        doc["ray_address"] = spec.ray_address
    nodes = []
    for ns in spec.nodes:
        node = vp.nodes[ns.id]
        params = _written_params(node)
        item: dict[str, Any] = {"id": node.id, "op": node.op_cls.name}
        if ns.input is not None:
            item["input"] = ns.input
        if node.stats_only:
            item["mode"] = "stats"
        if params:
            item["with"] = params
        nodes.append(item)
    doc["nodes"] = nodes
    return resolution.header() + yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=120)
