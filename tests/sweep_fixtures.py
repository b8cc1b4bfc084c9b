"""Tiny sweep grids for the sweep and report tests (not a test module itself).

Cells train the ``tiny-random`` model on the real ifollow task (generated prompts) for two steps,
so that subprocess and Ray cells need no test-only plugin.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

TINY_SET = {
    "model.name": "tiny-random", "model.dtype": "float32", "schedule.steps": 2, "schedule.checkpoint_every": 1,
    "sampling.prompts_per_step": 1, "sampling.group_size": 4, "sampling.max_new_tokens": 8,
    "schedule.eval_limit": 2, "schedule.eval_max_new_tokens": 4, "schedule.log_samples": 1, "optim.lr": 0.01,
}
REPO = Path(__file__).resolve().parents[1]


def write_grid(tmp_path: Path, name: str = "tiny", axes: dict[str, list[Any]] | None = None,
               extra: dict[str, Any] | None = None) -> Path:
    """A 2 algorithms x 2 seeds x 2 steps grid (mrtpo without warm-up) writing under tmp_path/NAME."""
    grid = {"name": name, "root": str(tmp_path / name), "set": dict(TINY_SET),
            "grid": axes or {"algo.name": ["gdpo", "mrtpo"], "seed": [0, 1]},
            "when": [{"match": {"algo.name": "mrtpo"}, "set": {"algo.warmup_steps": 0}}]}
    grid.update(extra or {})
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(grid, sort_keys=False))
    return path


def cell_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.rglob("config.json"))


def status_of(path: Path) -> str | None:
    prov = path / "provenance.json"
    return json.loads(prov.read_text()).get("status") if prov.exists() else None


def snapshot(path: Path) -> dict[str, tuple[bytes, int]]:
    """Content and modification time of a record's files (to prove a cell was not rerun)."""
    return {name: ((path / name).read_bytes(), (path / name).stat().st_mtime_ns)
            for name in ("config.json", "provenance.json", "metrics.jsonl", "eval.json")}


def child_env() -> dict[str, str]:
    """A subprocess imports this checkout's code and the test helpers."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), str(REPO / "tests"), env.get("PYTHONPATH", "")) if p)
    return env


def wait_for(predicate, timeout: float = 120.0, every: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(every)
    return predicate()
