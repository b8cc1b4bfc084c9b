"""``mrbench sweep GRID.yaml``: expand, check, then list (``--dry-run``), report (``--status``) or run.

Running skips finished cells and cells another process is running (their lock is held), and
resumes failed or interrupted ones from their checkpoints. Ctrl-C (or SIGTERM) stops the running
cells cleanly (each checkpoints); rerunning the same command continues where the sweep stopped.
"""

from __future__ import annotations

import fnmatch
import signal
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.report.sequential import STATE_FILE
from harness.sweep.grid import Cell, GridError, GridSpec, check_cells, expand, load_grid
from harness.sweep.status import FINISHED, RUNNING, SweepLog, cell_state, status_table

EXECUTORS = ("inline", "local", "ray")


@dataclass
class SweepOptions:
    grid: str
    executor: str = "local"
    jobs: int | None = None
    address: str | None = None
    retries: int = 0
    only: list[str] | None = None
    dry_run: bool = False
    status: bool = False
    loggers: str | None = None
    root: str | None = None  # instead of the grid's own root (a fresh place to rerun a finished grid)
    until_resolved: bool = False  # seeds in rounds until each arm is resolved (harness.sweep.adaptive)
    baseline: str = "gdpo"
    metrics: list[str] | None = None
    effect: float = 0.01
    max_seeds: int = 12
    round_size: int = 2
    executor_object: Any = None  # an executor to use instead of --executor's (tests)
    reuse_from: str | None = None  # take finished records of the same configurations from this root


def make_executor(opts: SweepOptions) -> Any:
    from harness.sweep.executors import InlineExecutor, LocalExecutor

    if opts.executor_object is not None:
        return opts.executor_object
    if opts.executor == "inline":
        return InlineExecutor(retries=opts.retries)
    if opts.executor == "local":
        return LocalExecutor(jobs=opts.jobs or 1, retries=opts.retries)
    if opts.executor == "ray":
        from harness.sweep.ray_executor import RayExecutor

        return RayExecutor(address=opts.address, jobs=opts.jobs, retries=opts.retries)
    raise ValueError(f"--executor {opts.executor!r}: unknown; known: {', '.join(EXECUTORS)}")


def select(cells: list[Cell], only: list[str] | None) -> list[Cell]:
    """Cells whose id (record path below the root) matches any ``--only`` glob."""
    if not only:
        return cells
    return [c for c in cells if any(fnmatch.fnmatch(c.id, pat) for pat in only)]


class Progress:
    """The sweep's events: written to ``sweep.json`` and shown as a progress bar over the cells."""

    def __init__(self, log: SweepLog, total: int, done: int):
        from tqdm.auto import tqdm

        self.log = log
        self.bar = tqdm(total=total, initial=done, desc="sweep", unit="cell", dynamic_ncols=True)
        self.running: list[str] = []

    def _show(self) -> None:
        if not self.running:
            self.bar.set_postfix_str("")
            return
        more = f" (+{len(self.running) - 1})" if len(self.running) > 1 else ""
        self.bar.set_postfix_str(f"running {self.running[0]}{more}")

    def started(self, cell: Cell) -> None:
        self.log.started(cell)
        self.running.append(cell.id)
        self._show()

    def ended(self, cell: Cell, exit_code: int | None) -> str:
        state = self.log.ended(cell, exit_code)
        if cell.id in self.running:
            self.running.remove(cell.id)
        self._show()
        if state == FINISHED:
            self.bar.update(1)
        elif state == RUNNING:
            self.bar.write(f"mrbench sweep: {cell.id}: another process runs it (its record is locked); left to it")
        else:
            log = cell.record_dir / "cell.log"
            where = f"; log: {log}" if log.exists() else ""
            self.bar.write(f"mrbench sweep: {cell.id}: {state} (exit code {exit_code}{where})")
        return state

    def close(self) -> None:
        self.bar.close()


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_cells(spec: GridSpec, cells: list[Cell], opts: SweepOptions) -> int:
    executor = make_executor(opts)
    states = {c.id: cell_state(c).state for c in cells}
    todo = [c for c in cells if states[c.id] not in (FINISHED, RUNNING)]
    done = sum(s == FINISHED for s in states.values())
    busy = sum(s == RUNNING for s in states.values())
    print(f"sweep {spec.name}: {len(cells)} cells: {done} finished, {busy} running elsewhere, "
          f"{len(todo)} to run ({executor.name} executor)")
    if not todo and done == len(cells):
        print(f"nothing to run: every cell already has a finished record under {spec.root} (finished records "
              f"are never rerun); to run the grid again, give a fresh root: mrbench sweep {spec.path} "
              f"--root results/sweeps/{spec.name}-rerun")
        return 0
    log = SweepLog(spec.root, spec.name, spec.path, executor.name, cells)
    progress = Progress(log, len(cells), done)
    # Ctrl-C and SIGTERM stop the sweep cleanly (also where a shell started it with SIGINT ignored)
    old = {s: signal.signal(s, _raise_interrupt) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        executor.run(todo, progress)
    except OSError as exc:  # the root refuses writes (a cell's files): one line, as a cell says it
        from harness.disk_full import find

        refused = find(exc, spec.root)
        if refused is None:
            raise
        progress.close()
        print(f"mrbench sweep: {refused}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        progress.close()
        log.refresh(cells)
        _, counts = status_table(cells)
        print(f"\nsweep stopped: {counts[FINISHED]} of {len(cells)} cells finished; rerun the same command "
              f"to continue", file=sys.stderr)
        return 130
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
    progress.close()
    log.refresh(cells)
    table, counts = status_table(cells)
    print(table)
    print(_count_line(counts, len(cells)))
    return 0 if counts[FINISHED] == len(cells) else 1


def with_loggers(cells: list[Cell], loggers: str | None, group: str) -> list[Cell]:
    """Every cell logging to ``loggers`` (``--loggers``), one logger run per cell grouped by the sweep's name."""
    if not loggers:
        return cells
    out = []
    for cell in cells:
        output = replace(cell.cfg.output, loggers=loggers, logger_group=group)
        out.append(replace(cell, cfg=replace(cell.cfg, output=output)))
    return out


def _count_line(counts: dict[str, int], total: int) -> str:
    return f"{total} cells: " + ", ".join(f"{n} {state}" for state, n in counts.items())


def cmd_sweep(opts: SweepOptions) -> int:
    """The ``mrbench sweep`` command; grid errors propagate as GridError (the CLI prints them)."""
    spec = load_grid(opts.grid)
    if opts.root:
        spec = replace(spec, root=opts.root)
    if opts.until_resolved:
        return cmd_adaptive(spec, opts)
    cells = with_loggers(select(expand(spec), opts.only), opts.loggers, spec.name)
    if not cells:
        print(f"mrbench sweep: no cell of {spec.path} matches --only {' '.join(opts.only or [])}", file=sys.stderr)
        return 2
    if opts.status:
        table, counts = status_table(cells)
        print(table)
        print(_count_line(counts, len(cells)))
        if (Path(spec.root) / STATE_FILE).exists():
            print(f"{spec.root} is an adaptive sweep's root: add --until-resolved and its settings to --status for "
                  f"each arm's seeds, interval and resolution")
        return 0
    check_cells(spec, cells)
    if opts.loggers:
        from harness.loggers import LoggerError, check_loggers

        try:
            check_loggers(cells[0].cfg)
        except LoggerError as exc:
            print(f"mrbench sweep: {exc}", file=sys.stderr)
            return 2
    _reuse(opts, cells)
    if opts.dry_run:
        from harness.sweep.estimate import sweep_estimate

        for cell in cells:
            print(f"{cell_state(cell).state:<11}  {cell.record_dir}")
        print(f"{len(cells)} cells under {spec.root}", file=sys.stderr)
        print(sweep_estimate(cells, opts.jobs), file=sys.stderr)
        return 0
    return run_cells(spec, cells, opts)


def _reuse(opts: SweepOptions, cells: list[Cell]) -> None:
    """``--reuse-from``: copy the finished records of the same configurations (a dry run only says which)."""
    if not opts.reuse_from:
        return
    from harness.sweep.reuse import reuse_note, reuse_records

    copied, refused = reuse_records(opts.reuse_from, cells, dry_run=opts.dry_run)
    print(reuse_note(opts.reuse_from, copied, refused, opts.dry_run))


def cmd_adaptive(spec: GridSpec, opts: SweepOptions) -> int:
    """``--until-resolved``: the grid's seeds as the first round, then rounds until every arm is resolved."""
    from harness.sweep.adaptive import (
        AdaptiveSettings,
        arms_of,
        check_metric_benchmarks,
        load_state,
        run_adaptive,
        with_seeds,
    )
    from harness.sweep.adaptive_status import adaptive_status

    if opts.only:
        raise GridError("--until-resolved decides which cells run; it takes no --only")
    settings = AdaptiveSettings(baseline=opts.baseline, metrics=tuple(opts.metrics or ()), effect=opts.effect,
                                max_seeds=opts.max_seeds, round_size=opts.round_size)
    settings.check()
    spec, first = with_seeds(spec, settings.max_seeds)
    cells = with_loggers(expand(spec), opts.loggers, spec.name)
    if opts.status:
        print(adaptive_status(spec, cells, settings, first))
        return 0
    check_cells(spec, cells)
    arms, _ = arms_of(cells, settings.baseline)  # an unknown --baseline, before anything runs
    load_state(spec.root, settings, first, arms)  # a damaged state, other settings, a grid that changed
    _reuse(opts, cells)
    if opts.dry_run:
        check_metric_benchmarks(settings.metrics, arms)  # a run checks the records' numbers after round 1
        from harness.sweep.estimate import sweep_estimate

        for cell in cells:
            print(f"{cell_state(cell).state:<11}  {cell.record_dir}")
        print(f"{len(cells)} cells under {spec.root} at most ({len(first)} seeds per arm in the first round, "
              f"up to {settings.max_seeds})", file=sys.stderr)
        first_round = [c for c in cells if c.kind == "base" or c.cfg.seed in first]
        print(f"first round: {sweep_estimate(first_round, opts.jobs)}", file=sys.stderr)
        return 0
    return run_adaptive(spec, cells, settings, first, lambda todo: run_cells(spec, todo, opts))
