"""The package layers: mrbench_core at the bottom; algorithms and tasks are leaves; evals may use
tasks; harness orchestrates them all; mrbench_integrations (the TRL and verl adapters) uses tasks
and imports neither framework. Each is imported alone in a fresh interpreter. Inside a package no
two modules import each other, directly or through others (a static scan that counts imports
inside functions and under ``if TYPE_CHECKING:`` too). Inside ``harness/`` the rooms (its files
and folders) stand in floors, each above what it imports: no arrow runs back up, no rooms import
each other round a loop."""

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
    # the TRL and verl adapters: tasks' verifiers only; the frameworks call them, they import neither
    "mrbench_integrations": ["harness", "evals", "algorithms", "torch", "trl", "verl", "datasets"],
}
#: modules whose import loads the layer's real code, not just its __init__
DEEP = {
    "mrbench_core": ["mrbench_core.registry", "mrbench_core.jsonio", "mrbench_core.errors",
                     "mrbench_core.replay_kinds", "mrbench_core.sweep_cell"],
    "algorithms": ["algorithms.registry", "algorithms.base", "algorithms.mrtpo", "algorithms.reweight",
                   "algorithms.cort", "algorithms.opsd", "algorithms.relevance"],
    "tasks": ["tasks.registry", "tasks.base", "tasks.toolcall.task", "tasks.text2sql.task", "tasks.ifollow.task"],
    "evals": ["evals.registry", "evals.runner", "evals.bfcl", "evals.text2sql", "evals.ifollow",
              "evals.ifollow_heldout", "evals.ifollow_judge"],
    "mrbench_integrations": ["mrbench_integrations.task_rewards", "mrbench_integrations.trl",
                             "mrbench_integrations.verl", "mrbench_integrations.verl_parquet"],
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
PACKAGES = ("mrbench_core", "algorithms", "tasks", "evals", "harness", "mrbench_integrations")


def module_names(root: Path, package: str) -> dict[str, Path]:
    out = {}
    for path in (root / package).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports_of(path: Path, module: str, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``module`` (at ``path``) imports anywhere in its body, under
    ``if TYPE_CHECKING:`` too (a loop a type checker needs is a loop of the design); a package's
    ``__init__`` only where it is imported by name."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()
    tree = ast.parse(path.read_text(), str(path))
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


@pytest.mark.torchfree
def test_the_cycle_scan_counts_imports_for_type_checkers(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "cells.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                               "    from pkg.grid import Cell\n")
    (tmp_path / "pkg" / "grid.py").write_text("def expand():\n    from pkg.cells import base_cells\n")
    assert import_cycles(tmp_path, "pkg") == [["pkg.cells", "pkg.grid"]]


# ---------------------------------------------------------------------------------------------
# harness/: its rooms (the files and folders right under it) stand in floors, each above the rooms
# it imports. No import runs back up a floor: no room imports one that (through others) imports it
# back. The training step and its toolbox (training/) stand below the engines (backends/), which
# stand below the credit explorer (credit/), a reader of records.

def room_of(module: str, package: str) -> str:
    """``harness.backends.openrlhf.step`` -> ``harness.backends``; ``harness.cli`` -> itself."""
    return ".".join(module.split(".")[:len(package.split(".")) + 1])


def room_arrows(root: Path, package: str) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """(room, room) -> the (module, module) imports that draw that arrow, for the rooms of
    ``package`` (its package face, ``__init__``, is no room)."""
    modules = module_names(root, package)
    arrows: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for module, path in modules.items():
        for target in imports_of(path, module, set(modules)):
            if package in (module, target):
                continue
            pair = (room_of(module, package), room_of(target, package))
            if pair[0] != pair[1]:
                arrows.setdefault(pair, []).append((module, target))
    return arrows


def room_loops(arrows: set[tuple[str, str]]) -> list[list[str]]:
    """Every set of two or more rooms that import each other round a loop, sorted."""
    reach = {a: {b for x, b in arrows if x == a} for a, _ in arrows}
    changed = True
    while changed:  # transitive closure: a few dozen rooms
        changed = False
        for seen in reach.values():
            more = set().union(*(reach.get(b, set()) for b in seen)) - seen
            if more:
                seen |= more
                changed = True
    loops = {frozenset({a} | {b for b in reach[a] if a in reach.get(b, set())}) for a in reach if a in reach[a]}
    return sorted(sorted(loop) for loop in loops)


def floors(arrows: set[tuple[str, str]]) -> dict[str, int]:
    """Each room's floor: 1 for a room that imports no other, else one above the highest room it
    imports (rooms in or above a loop have none: they are left out)."""
    rooms = {a for pair in arrows for a in pair}
    below = {a: {b for x, b in arrows if x == a} for a in rooms}
    out: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for a in sorted(rooms - set(out)):
            if below[a] <= set(out):
                out[a] = 1 + max((out[b] for b in below[a]), default=0)
                changed = True
    return out


def looped_arrows(arrows: set[tuple[str, str]]) -> list[tuple[str, str]]:
    """The arrows between rooms of one loop (at least one of each loop's runs back up a floor), sorted."""
    loops = [set(loop) for loop in room_loops(arrows)]
    return sorted((a, b) for a, b in arrows if any(a in loop and b in loop for loop in loops))


@pytest.mark.torchfree
def test_harness_rooms_stand_in_floors_with_no_arrow_back_up_and_no_circle() -> None:
    arrows = room_arrows(ROOT, "harness")
    loops = room_loops(set(arrows))
    assert loops == [], "rooms of harness/ that import each other round a loop: " + "; ".join(
        " <-> ".join(loop) + " (" + ", ".join(f"{a} -> {b}" for pair, found in sorted(arrows.items())
                                           if pair[0] in loop and pair[1] in loop for a, b in found) + ")"
        for loop in loops)
    assert looped_arrows(set(arrows)) == []
    assert import_cycles(ROOT, "harness") == []  # no circle of files either
    floor = floors(set(arrows))
    # the step's room stands below the engines, and the engines below the credit explorer
    assert floor["harness.training"] < floor["harness.backends"] < floor["harness.credit"]


@pytest.mark.torchfree
def test_the_floor_scan_puts_each_room_above_what_it_imports() -> None:
    arrows = {("pkg.cli", "pkg.backends"), ("pkg.backends", "pkg.step"), ("pkg.step", "pkg.align"),
              ("pkg.cli", "pkg.align")}
    assert floors(arrows) == {"pkg.align": 1, "pkg.step": 2, "pkg.backends": 3, "pkg.cli": 4}
    assert looped_arrows(arrows) == []
    looped = arrows | {("pkg.step", "pkg.backends")}
    assert looped_arrows(looped) == [("pkg.backends", "pkg.step"), ("pkg.step", "pkg.backends")]
    assert floors(looped) == {"pkg.align": 1}


@pytest.mark.torchfree
def test_the_room_scan_finds_a_loop_of_folders(tmp_path: Path) -> None:
    for folder in ("pkg", "pkg/credit", "pkg/backends"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pkg" / "credit" / "replayed.py").write_text("from pkg.backends.local import x\n")
    (tmp_path / "pkg" / "backends" / "local.py").write_text("def train():\n    from pkg.align import align\n")
    (tmp_path / "pkg" / "align.py").write_text("from pkg.credit import replayed\n")
    arrows = room_arrows(tmp_path, "pkg")
    assert set(arrows) == {("pkg.credit", "pkg.backends"), ("pkg.backends", "pkg.align"), ("pkg.align", "pkg.credit")}
    assert room_loops(set(arrows)) == [["pkg.align", "pkg.backends", "pkg.credit"]]
    assert room_loops(set(arrows) - {("pkg.align", "pkg.credit")}) == []
