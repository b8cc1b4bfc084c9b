"""The package layers: mrbench_core at the bottom; algorithms and tasks are leaves; evals may use
tasks; harness orchestrates them all. Each is imported alone in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

LAYERS = {
    # package: the packages it must not load
    "mrbench_core": ["harness", "algorithms", "tasks", "evals", "torch"],
    "algorithms": ["harness", "evals", "tasks"],
    "tasks": ["harness", "evals", "algorithms"],
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


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_layer_loads_nothing_above_it(layer: str) -> None:
    loaded = loaded_after(DEEP[layer])
    forbidden = sorted(set(LAYERS[layer]) & loaded)
    assert not forbidden, f"importing {layer} loaded {forbidden}"
