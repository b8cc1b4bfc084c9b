"""Executors: how a sweep's cells run.

- ``inline``: one after another in this process (``harness.runner.run``), for tiny grids and tests;
- ``local``:  ``--jobs N`` subprocesses on this machine; each gets ``cores // N`` CPU threads
  (``backend.local.threads``, unless the grid sets it) and, where cells use CUDA, a GPU of its
  own (``CUDA_VISIBLE_DEVICES``, round-robin when there are more jobs than GPUs);
- ``ray``:    Ray tasks (:mod:`harness.sweep.ray_executor`).

Every executor takes the cells still to run and reports each start and end to ``events`` (the
sweep's log and progress bar). A cell that fails is retried up to ``retries`` times (each retry
resumes from its checkpoint). On Ctrl-C (KeyboardInterrupt) running cells get SIGTERM, write a
checkpoint and stop; the interrupt then propagates, and rerunning the sweep continues.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from harness.records import atomic_write_text
from harness.sweep.cellproc import start_cell_process, stop_cell_process
from harness.sweep.grid import Cell
from harness.sweep.status import FAILED

CODE_ROOT = Path(__file__).resolve().parents[2]  # the directory holding the harness package
POLL_S = 0.2


class Events(Protocol):
    def started(self, cell: Cell) -> None: ...

    def ended(self, cell: Cell, exit_code: int | None) -> str: ...


def machine_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def visible_gpus() -> list[str]:
    """GPU ids this process may hand out: ``CUDA_VISIBLE_DEVICES`` when set, else every CUDA device."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [g.strip() for g in env.split(",") if g.strip() and g.strip() != "-1"]
    try:
        import torch

        return [str(i) for i in range(torch.cuda.device_count())] if torch.cuda.is_available() else []
    except ImportError:
        return []


def uses_cuda(cell: Cell, gpus_present: bool) -> bool:
    device = cell.cfg.model.device
    return device.startswith("cuda") or (device == "auto" and gpus_present)


def with_threads(cell: Cell, threads: int) -> Any:
    """The cell's config with ``backend.local.threads`` set, unless the grid chose a number itself."""
    cfg = cell.cfg
    if cfg.backend.name != "local" or cfg.backend.local.threads > 0 or threads <= 0:
        return cfg
    return replace(cfg, backend=replace(cfg.backend, local=replace(cfg.backend.local, threads=threads)))


def write_cell_files(cell: Cell, cfg: Any) -> tuple[str, str]:
    """``<record>/cell.yaml`` (the resolved config: a recipe ``mrbench run --config`` reads back to the
    same config) and the path of ``<record>/cell.log``."""
    rec = Path(cell.record_dir)
    rec.mkdir(parents=True, exist_ok=True)
    atomic_write_text(rec / "cell.yaml", cfg.to_yaml())
    return str(rec / "cell.yaml"), str(rec / "cell.log")


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """What a cell subprocess adds to its environment: this checkout's code on ``PYTHONPATH``."""
    path = os.pathsep.join(p for p in (str(CODE_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, **(extra or {})}


@dataclass
class InlineExecutor:
    retries: int = 0
    name: str = "inline"

    def run(self, cells: list[Cell], events: Events) -> None:
        from harness.base_model import evaluate_base
        from harness.runner import run

        queue = deque((cell, 0) for cell in cells)
        while queue:
            cell, tries = queue.popleft()
            events.started(cell)
            try:
                code = evaluate_base(cell.cfg) if cell.kind == "base" else run(cell.cfg)
            except KeyboardInterrupt:
                events.ended(cell, None)
                raise
            except Exception as exc:  # noqa: BLE001  (the runner marked the record failed; go on with the others)
                print(f"mrbench sweep: {cell.id}: {type(exc).__name__}: {exc}", file=sys.stderr)
                code = 1
            if events.ended(cell, code) == FAILED and tries < self.retries:
                queue.append((cell, tries + 1))


@dataclass
class LocalExecutor:
    jobs: int = 1
    retries: int = 0
    cores: int | None = None
    name: str = "local"

    def slots(self, cells: list[Cell]) -> list[tuple[int, str | None]]:
        """(threads, GPU id or None) of each of the ``jobs`` slots."""
        threads = max(1, (self.cores or machine_cores()) // self.jobs)
        gpus = visible_gpus() if any(c.cfg.model.device != "cpu" for c in cells) else []
        return [(threads, gpus[i % len(gpus)] if gpus else None) for i in range(self.jobs)]

    def run(self, cells: list[Cell], events: Events) -> None:
        slots = self.slots(cells)
        queue = deque((cell, 0) for cell in cells)
        running: dict[int, tuple[Cell, int, Any]] = {}
        cwd = os.getcwd()
        try:
            while queue or running:
                for slot, (threads, gpu) in enumerate(slots):
                    if slot in running or not queue:
                        continue
                    cell, tries = queue.popleft()
                    extra = {"OMP_NUM_THREADS": str(threads)}
                    if gpu is not None and uses_cuda(cell, True):
                        extra["CUDA_VISIBLE_DEVICES"] = gpu
                    cell_yaml, log = write_cell_files(cell, with_threads(cell, threads))
                    events.started(cell)
                    running[slot] = (cell, tries, start_cell_process(cell_yaml, log, cwd,
                                                                     {**os.environ, **child_env(extra)},
                                                                     cell.run_args))
                time.sleep(POLL_S)
                for slot in list(running):
                    cell, tries, proc = running[slot]
                    if proc.poll() is None:
                        continue
                    del running[slot]
                    if events.ended(cell, proc.returncode) == FAILED and tries < self.retries:
                        queue.append((cell, tries + 1))
        except BaseException:
            for cell, _, proc in running.values():  # SIGTERM to all first, then wait for each
                if proc.poll() is None:
                    proc.terminate()
            for cell, _, proc in running.values():
                events.ended(cell, stop_cell_process(proc))
            raise
