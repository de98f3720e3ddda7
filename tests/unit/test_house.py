"""The house rules a newcomer relies on (DESIGN.md §1 and the README's Layout), checked on the
sources: an op's file is its name, one op per module, params declared one way, no two classes with
one name.  The import layers themselves are import-linter's job (`lint-imports` in `make test`)."""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import raypress
from raypress.operators.registry import _index, all_ops

ROOT = Path(raypress.__file__).parent


def _sources() -> dict[Path, ast.Module]:
    return {p: ast.parse(p.read_text(encoding="utf-8")) for p in sorted(ROOT.rglob("*.py"))}


def test_an_ops_file_is_its_name():
    wrong = {name: module for name, module in _index().items()
             if module.rsplit(".", 1)[-1] != name
             or not (module.startswith("raypress.operators.") or module.startswith("raypress.serving."))}
    assert not wrong, f"op -> module whose file is not named after it: {wrong}"


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
