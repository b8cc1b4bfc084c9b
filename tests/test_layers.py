"""The package layers: mrbench_core at the bottom; algorithms and tasks are leaves; evals may use
tasks; harness orchestrates them all. Each is imported alone in a fresh interpreter. Inside a
package no two modules import each other, directly or through others (a static scan that counts
imports inside functions too)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

LAYERS = {
    # package: the packages it must not load
    "mrbench_core": ["harness", "algorithms", "tasks", "evals", "torch"],
    "algorithms": ["harness", "evals", "tasks"],
    "tasks": ["harness", "evals", "algorithms", "torch"],
    "evals": ["harness", "algorithms"],
}
#: modules whose import loads the layer's real code, not just its __init__
DEEP = {
    "mrbench_core": ["mrbench_core.registry", "mrbench_core.jsonio", "mrbench_core.errors",
                     "mrbench_core.replay_kinds"],
    "algorithms": ["algorithms.registry", "algorithms.base", "algorithms.mrtpo", "algorithms.reweight",
                   "algorithms.cort", "algorithms.opsd", "algorithms.relevance"],
    "tasks": ["tasks.registry", "tasks.base", "tasks.toolcall.task", "tasks.text2sql.task", "tasks.ifollow.task"],
    "evals": ["evals.registry", "evals.runner", "evals.bfcl", "evals.text2sql", "evals.ifollow",
              "evals.ifollow_heldout", "evals.ifollow_judge"],
}


def loaded_after(modules: list[str]) -> set[str]:
    code = ("import importlib, json, sys\n"
            f"for m in {modules!r}: importlib.import_module(m)\n"
            "print(json.dumps(sorted({n.split('.')[0] for n in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


@pytest.mark.parametrize("layer", [pytest.param(name, marks=pytest.mark.torchfree) if "torch" in LAYERS[name]
                                   else name for name in sorted(LAYERS)])
def test_layer_loads_nothing_above_it(layer: str) -> None:
    loaded = loaded_after(DEEP[layer])
    forbidden = sorted(set(LAYERS[layer]) & loaded)
    assert not forbidden, f"importing {layer} loaded {forbidden}"


# ---------------------------------------------------------------------------------------------
# no import cycle inside a package (module-level and function-level imports alike)

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("mrbench_core", "algorithms", "tasks", "evals", "harness")


def module_names(root: Path, package: str) -> dict[str, Path]:
    out = {}
    for path in (root / package).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` (at ``path``) imports anywhere in its body (but
    under ``if TYPE_CHECKING:``); a package's ``__init__`` only where it is imported by name."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):  # imports for type checkers only do not run
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: resolve against this module's package
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in known:
                    out.add(sub)
                elif target in known:
                    out.add(target)
    out.discard(module)
    return out


def import_cycles(root: Path, package: str) -> list[list[str]]:
    """Every strongly connected set of two or more modules of ``package`` (Tarjan), sorted."""
    modules = module_names(root, package)
    graph = {m: imports_of(p, m, set(modules)) for m, p in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(cycles)


@pytest.mark.torchfree
@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_inside_a_package(package: str) -> None:
    assert import_cycles(ROOT, package) == []


@pytest.mark.torchfree
def test_the_cycle_scan_finds_a_function_level_cycle(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "registry.py").write_text("def derive():\n    from pkg.gdpo import GDPO\n")
    (tmp_path / "pkg" / "gdpo.py").write_text("from pkg.registry import derive\n")
    (tmp_path / "pkg" / "leaf.py").write_text("from . import registry\n")
    assert import_cycles(tmp_path, "pkg") == [["pkg.gdpo", "pkg.registry"]]
