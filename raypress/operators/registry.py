"""Operator registry: names -> classes.

Op modules are found by a static scan for `@register("name")` and imported only when an op is
asked for, so validating a text pipeline never pays for importing torch."""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.util
import re
from pathlib import Path
from typing import Any, TypeVar

from raypress.operators.base import Operator
from raypress import ast_safe

_REGISTRY: dict[str, type[Operator]] = {}
_LOADED = False
T = TypeVar("T", bound=type[Operator])


def register(name: str, requires: dict[str, str] | None = None,
             requires_when: dict[str, dict[str, str]] | None = None):
    """Class decorator: make an operator available to pipelines under ``name``.

    ``requires`` names the Python packages the op needs beyond the core install, by import name ->
    the raypress extra that installs it (``{"selectolax": "curation"}``); ``requires_when`` those it
    needs only when a parameter is set to other than its default, by parameter
    (``{"tokenization": {"sentencepiece": "text"}}``).  Written as literals in the decorator so that
    validation reads them from the source, without importing the op's module (which may import those
    very packages)."""

    def wrap(cls: T) -> T:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"operator {name!r} registered twice ({_REGISTRY[name]} and {cls})")
        cls.name = name
        cls.requires = dict(requires or {})
        cls.requires_when = {param: dict(pkgs) for param, pkgs in (requires_when or {}).items()}
        _REGISTRY[name] = cls
        return cls

    return wrap


class OpUnavailable(Exception):
    """An op's module cannot be imported here: a package it needs is not installed."""

    def __init__(self, op: str, package: str | None):
        self.op, self.package = op, package
        super().__init__(f"op {op!r} cannot load: it needs the Python package {package!r}, which is not "
                         "installed (and the op does not declare it: a bug in raypress, please report it)")


def load_all() -> None:
    """Import every module that registers an op so their ``@register`` calls run."""
    global _LOADED
    if _LOADED:
        return
    for module in sorted(set(_index().values())):
        importlib.import_module(module)
    _LOADED = True


# Where ops are defined: the operator domains.  A higher layer that defines ops of its own (serving
# defines ``serve_llm``, a stage that deploys a Serve app) adds its package with ``add_op_package``
# from the top: operators never import serving, not even by name (see DESIGN.md §1).
_OP_PACKAGES: list[str] = ["raypress.operators"]
_REGISTER_CALL = re.compile(r"""@register\(\s*["']([^"']+)["']""")
_INDEX: dict[str, str] | None = None


def add_op_package(package: str) -> None:
    """Also look for ops in ``package`` (a dotted name, imported when the index is first read).

    Called by the layer above the operators that defines ops of its own: ``raypress.cli``'s
    ``main`` and ``raypress.cluster`` add ``raypress.serving``.  Idempotent; a package added after
    the index was read makes the next read scan again."""
    global _INDEX, _LOADED
    if package not in _OP_PACKAGES:
        _OP_PACKAGES.append(package)
        _INDEX = None
        _LOADED = False


def op_packages() -> tuple[str, ...]:
    """The packages the index scans: ``raypress.operators`` and those added with ``add_op_package``."""
    return tuple(_OP_PACKAGES)


def _index() -> dict[str, str]:
    """op name -> module that registers it, read from the sources without importing them."""
    global _INDEX
    if _INDEX is None:
        index: dict[str, str] = {}
        for package in _OP_PACKAGES:
            root = Path(importlib.import_module(package).__path__[0])
            for path in sorted(root.rglob("*.py")):
                if path.name in ("base.py", "registry.py"):
                    continue
                module = ".".join((package, *path.relative_to(root).with_suffix("").parts))
                for name in _REGISTER_CALL.findall(path.read_text(encoding="utf-8")):
                    index.setdefault(name, module)
        _INDEX = index
    return _INDEX


def requirements(name: str) -> dict[str, str]:
    """The packages op ``name`` declares (import name -> extra), read from its ``@register`` call in
    the source: nothing is imported."""
    return dict(_register_keyword(name, "requires") or {})


def conditional_requirements(name: str) -> dict[str, dict[str, str]]:
    """The packages op ``name`` needs only when a parameter is not its default: parameter ->
    (import name -> extra), read from its ``@register`` call's ``requires_when``."""
    return {param: dict(pkgs) for param, pkgs in (_register_keyword(name, "requires_when") or {}).items()}


@functools.lru_cache(maxsize=None)
def _register_keyword(name: str, keyword: str) -> Any:
    """Cached: a 65,000-node chain of one op walks that op's module once, not 65,000 times."""
    module = _index().get(name)
    if module is None:
        return None
    for node in ast.walk(_module_ast(module)):
        if not isinstance(node, ast.ClassDef):
            continue
        for deco in node.decorator_list:
            if (isinstance(deco, ast.Call) and getattr(deco.func, "id", None) == "register" and deco.args
                    and isinstance(deco.args[0], ast.Constant) and deco.args[0].value == name):
                for kw in deco.keywords:
                    if kw.arg == keyword:
                        return ast.literal_eval(kw.value)
    return None


def missing_requirements(name: str) -> dict[str, str]:
    """The declared packages of op ``name`` that this Python cannot import (import name -> extra)."""
    return {mod: extra for mod, extra in requirements(name).items()
            if importlib.util.find_spec(mod.split(".")[0]) is None}


def missing_text(op: str, missing: dict[str, str], setting: str = "") -> str:
    """"op X needs selectolax, TexSoup (not installed here): pip install 'raypress[curation]'"
    (``setting``: "with tokenization=True" after the op's name, for a conditional requirement)."""
    extras = ",".join(sorted(set(missing.values())))
    return (f"op {op!r}{' ' + setting if setting else ''} needs {', '.join(sorted(missing))} (not installed "
            f"here): pip install 'raypress[{extras}]'")


def missing_for_params(name: str, params: Any) -> list[tuple[str, str]]:
    """(parameter, one-line problem) for each parameter of ``params`` set to other than its default
    whose conditional packages (``requires_when``) this Python cannot import."""
    out = []
    for param, packages in conditional_requirements(name).items():
        value = getattr(params, param, None)
        field = type(params).model_fields.get(param)
        if field is None or value == field.default:
            continue
        missing = {m: e for m, e in packages.items() if importlib.util.find_spec(m.split(".")[0]) is None}
        if missing:
            out.append((param, missing_text(name, missing, f"with {param}={value!r}")))
    return out


@functools.lru_cache(maxsize=None)
def _module_ast(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    return ast_safe.parse(Path(spec.origin).read_text(encoding="utf-8"))


def get_op(name: str) -> type[Operator] | None:
    """The op's class, importing its module on first use.  Raises OpUnavailable when the module
    needs a package that is not installed."""
    if name not in _REGISTRY and name in _index():
        try:
            importlib.import_module(_index()[name])
        except ModuleNotFoundError as exc:
            if exc.name and exc.name.split(".")[0] in ("raypress",):
                raise
            raise OpUnavailable(name, exc.name) from None
    if name not in _REGISTRY and not _LOADED and name not in _index():
        return None
    return _REGISTRY.get(name)


def known_names() -> set[str]:
    """Every op name, without importing op modules (for "did you mean")."""
    return set(_index()) | set(_REGISTRY)


def all_ops() -> dict[str, type[Operator]]:
    load_all()
    return dict(sorted(_REGISTRY.items()))

