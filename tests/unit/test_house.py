"""The house rules a newcomer relies on (DESIGN.md §1 and the README's Layout), checked on the
sources: an op's file is its name, one op per module, params declared one way, no two classes with
one name.  The import layers themselves are import-linter's job (`lint-imports` in `make test`)."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import raypress
from raypress.operators.registry import _REGISTER_CALL, _index, all_ops, op_packages

ROOT = Path(raypress.__file__).parent


def _sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(ROOT.rglob("*.py"))}


def test_an_ops_file_is_its_name():
    """In the operators, or in a package the top layer added with ``add_op_package`` (tests/conftest.py
    adds serving, as ``raypress.cli.main`` does)."""
    packages = op_packages()
    wrong = {name: module for name, module in _index().items()
             if module.rsplit(".", 1)[-1] != name
             or not any(module.startswith(package + ".") for package in packages)}
    assert not wrong, f"op -> module whose file is not named after it: {wrong}"


OPS = ROOT / "operators"
NOT_A_DOMAIN = {"shared"}  # what two domains need: helpers only, no ops


def _registers(path: Path) -> list[str]:
    """The op names ``path`` registers (``@register("name")``), read from its source."""
    return _REGISTER_CALL.findall(path.read_text(encoding="utf-8"))


def test_a_domain_folder_holds_only_op_files_on_top():
    """DESIGN.md §1: in each ``operators/<domain>/``, the top holds op files (a module registering
    exactly one op, named as the file) and ``__init__.py``; the machinery lives in sub-packages
    named after the technique (``dedup/minhash/``, ``reasoning/search/``)."""
    wrong = []
    for domain in sorted(d for d in OPS.iterdir() if d.is_dir() and (d / "__init__.py").exists()):
        if domain.name in NOT_A_DOMAIN:
            continue
        for path in sorted(domain.glob("*.py")):
            if path.name == "__init__.py":
                continue
            names = _registers(path)
            if names != [path.stem]:
                wrong.append(f"operators/{domain.name}/{path.name} registers {names or 'no op'}")
    assert not wrong, "not an op file on a domain's top (move it into a sub-package named after its " \
                      "technique):\n" + "\n".join(wrong)


def test_helpers_are_not_grouped_by_a_filename_prefix():
    """Two helper modules (neither registers an op) of one package under ``operators/`` whose names
    share a first word (``bff_ngrams``, ``bff_order``) are a sub-package in disguise: ``bff/ngrams``,
    ``bff/order``.  Op files keep their Data-Juicer names (``image_size_filter``, ``image_shape_filter``)."""
    grouped = []
    for package in sorted({p.parent for p in OPS.rglob("*.py")}):
        helpers = [p.stem for p in package.glob("*.py") if p.name != "__init__.py" and not _registers(p)
                   and not (package == OPS and p.name in ("base.py", "registry.py"))]
        by_prefix = collections.defaultdict(list)
        for stem in helpers:
            if "_" in stem.strip("_"):
                by_prefix[stem.lstrip("_").split("_", 1)[0]].append(stem)
        for prefix, stems in sorted(by_prefix.items()):
            if len(stems) > 1:
                grouped.append(f"{package.relative_to(ROOT)}: {', '.join(sorted(stems))} -> {prefix}/")
    assert not grouped, "helpers grouped by a filename prefix:\n" + "\n".join(grouped)


def test_serving_ops_reach_the_registry_only_through_add_op_package():
    """The registry scans ``raypress.operators`` alone; serving's ops (``serve_llm``) join when the top
    layer calls ``add_op_package("raypress.serving")`` (``cli.main``, ``cluster``, tests/conftest.py).
    No module below serving names it in code, not even as a string for importlib."""
    import raypress.operators.registry as registry

    assert "raypress.serving" not in ast.literal_eval(
        next(node.value for node in ast.parse(Path(registry.__file__).read_text(encoding="utf-8")).body
             if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "_OP_PACKAGES"))
    assert "raypress.serving" in op_packages(), "tests/conftest.py adds serving, as cli.main does"
    assert _index()["serve_llm"] == "raypress.serving.serve_llm"
    named = []
    for path, tree in _sources().items():
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("serving",) or rel.name in ("cli.py", "cluster.py"):
            continue
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and n.body and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                    and node.value.startswith("raypress.serving"):
                named.append(f"{rel}:{node.lineno} {node.value!r}")
    assert not named, "below serving, code names raypress.serving:\n" + "\n".join(named)


def test_a_module_registers_one_op():
    by_module = collections.defaultdict(list)
    for name, module in _index().items():
        by_module[module].append(name)
    several = {m: names for m, names in by_module.items() if len(names) > 1}
    assert not several, several


def test_every_registered_op_is_indexed_where_it_is_defined():
    ops = all_ops()
    assert set(ops) == set(_index())
    for name, cls in ops.items():
        assert cls.__module__ == _index()[name], (name, cls.__module__)


def test_no_two_top_level_classes_share_a_name():
    seen = collections.defaultdict(list)
    for path, tree in _sources().items():
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                seen[node.name].append(str(path.relative_to(ROOT)))
    twice = {name: files for name, files in seen.items() if len(files) > 1}
    assert not twice, twice


def test_params_are_declared_one_way_as_the_type_argument():
    """No nested `class Params`, no `Params = X` in an op class body (the Writer kind's default aside),
    and no `self.params` needing a `type: ignore`."""
    found = []
    for path, tree in _sources().items():
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if isinstance(stmt, ast.ClassDef) and stmt.name == "Params":
                    found.append(f"{path.relative_to(ROOT)}:{stmt.lineno} nested class Params in {cls.name}")
                targets = [stmt.target] if isinstance(stmt, ast.AnnAssign) else getattr(stmt, "targets", [])
                if any(isinstance(t, ast.Name) and t.id == "Params" for t in targets) and \
                        not (path.name == "base.py" and cls.name in ("Operator", "Writer")):
                    found.append(f"{path.relative_to(ROOT)}:{stmt.lineno} Params = … in {cls.name}")
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if "self.params" in line and "type: ignore" in line:
                found.append(f"{path.relative_to(ROOT)}:{i} self.params with a type: ignore")
    assert not found, "\n".join(found)


def test_every_op_has_its_own_params_model():
    from raypress.operators.base import Params, WriterParams

    generic = {name: cls for name, cls in all_ops().items() if cls.Params in (Params, WriterParams)}
    assert not generic, f"ops without a params model of their own: {sorted(generic)}"


def test_test_modules_have_unique_basenames():
    """pytest imports test files by basename (the test folders are not packages): two files of one
    name in unit/ and integration/ stop the whole collection with 'import file mismatch'."""
    from collections import Counter

    names = Counter(p.name for p in (Path(__file__).resolve().parents[1]).rglob("test_*.py"))
    assert not [n for n, c in names.items() if c > 1]
