"""Every decorated built-in has its lazy row, naming the decorated object, and no class says a
different name than its registration (a static scan of the source: no import, no torch)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.torchfree

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("algorithms", "tasks", "evals", "harness", "mrbench_core")
#: decorator object -> (module of its registry, the rows' table there)
REGISTRIES = {"ALGORITHMS": ("algorithms.registry", "BUILTINS"), "TASKS": ("tasks.registry", "BUILTINS"),
              "EVALUATORS": ("evals.registry", "BUILTINS"), "BACKENDS": ("harness.backends", "BUILTINS")}


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def decorated(root: Path, packages=PACKAGES) -> list[tuple[str, str, str, str | None]]:
    """(registry, registered name, "module:object", the class's own literal ``name`` or None)."""
    out = []
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in tree.body:
                if not isinstance(node, (ast.ClassDef, ast.FunctionDef)):
                    continue
                for deco in node.decorator_list:
                    if (isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute)
                            and deco.func.attr == "register" and isinstance(deco.func.value, ast.Name)
                            and deco.func.value.id in REGISTRIES and deco.args
                            and isinstance(deco.args[0], ast.Constant)):
                        own = None
                        for stmt in getattr(node, "body", []):
                            if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                                    and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == "name"
                                    and isinstance(stmt.value, ast.Constant)):
                                own = stmt.value.value
                        out.append((deco.func.value.id, deco.args[0].value,
                                    f"{_module_name(root, path)}:{node.name}", own))
    return out


def rows(root: Path, registry: str) -> dict[str, str]:
    """The rows' table of ``registry``, read from its source (a literal dict)."""
    module, table = REGISTRIES[registry]
    path = root / Path(*module.split("."))
    path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == table for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path}: no {table} table")


def problems(root: Path, packages=PACKAGES) -> list[str]:
    found = decorated(root, packages)
    out = []
    for registry, name, spec, own in found:
        row = rows(root, registry).get(name)
        if row is None:
            out.append(f"{spec}: decorated @{registry}.register({name!r}) but {registry} has no row {name!r}")
        elif row != spec:
            out.append(f"{registry} row {name!r} names {row!r}, but the decorator is on {spec}")
        if own is not None and own != name:
            out.append(f"{spec}: registered as {name!r} but its name attribute says {own!r}")
    for registry in {r for r, *_ in found}:
        specs = {(n, s) for r, n, s, _ in found if r == registry}
        for name, spec in rows(root, registry).items():
            if (name, spec) not in specs:
                out.append(f"{registry} row {name!r} -> {spec!r}: no such decorated object")
    return out


def test_every_decorated_builtin_has_its_row_and_one_name():
    assert decorated(ROOT), "the scan found no decorated built-in"
    assert problems(ROOT) == []


def _tree(tmp_path: Path, defs: str, table: str) -> Path:
    (tmp_path / "algorithms").mkdir()
    (tmp_path / "algorithms" / "registry.py").write_text(f"BUILTINS = {table}\n")
    (tmp_path / "algorithms" / "widgets.py").write_text(defs)
    return tmp_path


def test_the_scan_finds_a_decorated_builtin_without_a_row(tmp_path):
    root = _tree(tmp_path, "@ALGORITHMS.register('gear')\nclass Gear:\n    pass\n\n"
                           "@ALGORITHMS.register('forgot-row')\nclass ForgotRow:\n    pass\n",
                 "{'gear': 'algorithms.widgets:Gear'}")
    assert problems(root, ("algorithms",)) == [
        ("algorithms.widgets:ForgotRow: decorated @ALGORITHMS.register('forgot-row') but ALGORITHMS has no row "
         "'forgot-row'")]


def test_the_scan_finds_disagreeing_names(tmp_path):
    root = _tree(tmp_path, "@ALGORITHMS.register('gear')\nclass Cog:\n    name = 'cog'\n",
                 "{'gear': 'algorithms.widgets:Gear'}")
    assert problems(root, ("algorithms",)) == [
        "ALGORITHMS row 'gear' names 'algorithms.widgets:Gear', but the decorator is on algorithms.widgets:Cog",
        "algorithms.widgets:Cog: registered as 'gear' but its name attribute says 'cog'",
        "ALGORITHMS row 'gear' -> 'algorithms.widgets:Gear': no such decorated object"]
