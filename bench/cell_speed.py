"""One training cell at two commits, alternated: the ratio of their training times.

    .venv/bin/python bench/cell_speed.py --old REV --new REV [--cell main|gdpo|mrtpo|mrtpo-oracle]
        [--seed 0] [--grid grids/ifollow-smollm2-3.yaml] [--runs 2] [--eval-limit N] [--threads N]
        [--keep DIR] [run overrides ...]

Method. The two commits are checked out into temporary git worktrees of this repository (both run
with this interpreter and its packages). The cell is ``mrbench run`` with the main job's embedded
defaults (``--cell main``) or with the overrides of one cell of ``--grid`` (``--cell gdpo`` and
``--seed 0``: that grid's GDPO cell of seed 0, as ``mrbench sweep`` would run it). It runs
``--runs`` times at each commit, alternating old, new, old, new, ..., each time from scratch in a
fresh record, as a child process whose imports come from that commit's worktree; ``--threads``
passes ``--backend.local.threads`` (default: the run's own choice, 2 on an idle two-core host), and
any other argument is passed on to ``mrbench run`` after the cell's own.

For every run the script prints the training seconds (the record's summary ``train_seconds``: model
load, data, every step and its checkpoints, without the end-of-run evaluation), the whole run's wall
seconds, and the generation, replay and update seconds summed from its metrics rows; then each
commit's mean, the ratio of the new commit's mean training time to the old one's, and each
alternated pair's ratio. The last line is ``ratio <new/old>``. The end-of-run evaluation runs as the
cell asks (``--eval-limit N``: N cases per benchmark, to spend less time outside the training).

Run it on an otherwise idle host; a load that changes during the runs shows as pairs that disagree.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def cell_overrides(cell: str, grid: str, seed: int) -> list[str]:
    """The command-line overrides of ``cell`` (``main``: none; else the grid's cell of that algorithm and seed)."""
    if cell == "main":
        return []
    sys.path.insert(0, str(ROOT))
    from harness.sweep.grid import expand, load_grid

    cells = [c for c in expand(load_grid(ROOT / grid)) if c.kind == "train"
             and c.overrides.get("algo.name") == cell and c.overrides.get("seed") == seed]
    if not cells:
        sys.exit(f"cell_speed: {grid} has no {cell} cell of seed {seed}")
    args: list[str] = []
    for key, value in cells[0].overrides.items():
        args += [f"--{key}", json.dumps(value) if isinstance(value, (bool, list, dict)) or value is None else str(value)]
    return args


def checkout(rev: str, where: Path) -> str:
    """A detached worktree of ``rev`` at ``where``; its commit."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), rev], check=True,
                   capture_output=True, text=True)
    return subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()


def run_once(tree: Path, overrides: list[str], out: Path) -> dict[str, Any]:
    """One ``mrbench run`` of the cell with ``tree``'s code into the record ``out``; its figures."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.time()
    with (out.parent / f"{out.name}.log").open("w") as log:
        proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", *overrides, "--output.dir", str(out)],
                              cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, check=False)
    if proc.returncode != 0:
        sys.exit(f"cell_speed: the run in {tree} failed (rc {proc.returncode}); see {out.parent / (out.name + '.log')}")
    summary = json.loads((out / "provenance.json").read_text())["summary"]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    phases = {p: sum(r.get(f"time_{p}", 0.0) for r in rows) for p in ("generate", "replay", "update")}
    return {"train": float(summary["train_seconds"]), "wall": time.time() - t0, **phases, "steps": len(rows)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--old", required=True, help="the commit before (any git revision)")
    ap.add_argument("--new", required=True, help="the commit measured against it")
    ap.add_argument("--cell", default="main", help="main (the embedded defaults) or an algorithm of --grid")
    ap.add_argument("--grid", default="grids/ifollow-smollm2-3.yaml")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--runs", type=int, default=2, help="runs per commit, alternated")
    ap.add_argument("--eval-limit", type=int, default=0, help="cases per benchmark at the end (0: the cell's own)")
    ap.add_argument("--threads", type=int, default=0, help="backend.local.threads (0: the run's own choice)")
    ap.add_argument("--keep", help="keep the records and logs here (default: a temporary directory)")
    args, extra = ap.parse_known_args()

    overrides = cell_overrides(args.cell, args.grid, args.seed) + extra
    if args.eval_limit:
        overrides += ["--schedule.eval_limit", str(args.eval_limit)]
    if args.threads:
        overrides += ["--backend.local.threads", str(args.threads)]
    work = Path(args.keep or tempfile.mkdtemp(prefix="mrbench-cell-speed-"))
    work.mkdir(parents=True, exist_ok=True)
    trees = {"old": work / "tree-old", "new": work / "tree-new"}
    commits = {name: checkout(rev, trees[name]) for name, rev in (("old", args.old), ("new", args.new))}
    print(f"cell {args.cell}" + (f" of {args.grid}, seed {args.seed}" if args.cell != "main" else " (the main job)")
          + f": {' '.join(overrides) or 'no overrides'}; old {commits['old']}, new {commits['new']}; "
          f"load average at the start {os.getloadavg()[0]:.2f}", flush=True)
    results: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    try:
        for i in range(args.runs):
            for name in ("old", "new"):
                r = run_once(trees[name], overrides, work / f"{name}-{i + 1}")
                results[name].append(r)
                print(f"run {i + 1} {name} ({commits[name]}): training {r['train']:.1f} s (generate {r['generate']:.1f}, "
                      f"replay {r['replay']:.1f}, update {r['update']:.1f} over {r['steps']} steps), whole run "
                      f"{r['wall']:.1f} s; load average {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        for tree in trees.values():
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], capture_output=True,
                           check=False)
    mean = {k: {f: sum(r[f] for r in v) / len(v) for f in ("train", "generate", "replay", "update", "wall")}
            for k, v in results.items()}
    for name in ("old", "new"):
        m = mean[name]
        print(f"{name} ({commits[name]}) mean of {args.runs}: training {m['train']:.1f} s (generate {m['generate']:.1f}, "
              f"replay {m['replay']:.1f}, update {m['update']:.1f}), whole run {m['wall']:.1f} s")
    pairs = ", ".join(f"{n['train'] / o['train']:.3f}" for o, n in zip(results["old"], results["new"]))
    phases = ", ".join(f"{p} {mean['new'][p] / mean['old'][p]:.3f}" for p in ("generate", "replay", "update")
                       if mean["old"][p] > 0.5)
    print(f"training time new/old: {mean['new']['train'] / mean['old']['train']:.3f} (alternated pairs: {pairs}; "
          f"{phases})")
    print(f"ratio {mean['new']['train'] / mean['old']['train']:.3f}")


if __name__ == "__main__":
    main()
