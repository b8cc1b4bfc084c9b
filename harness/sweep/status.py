"""The state of a cell, read from its record directory, and the sweep's own state file.

- ``finished``: ``provenance.json`` says so (the runner never reruns it);
- ``running``:  a live process holds the record's lock;
- ``interrupted``: the run was stopped (a stop signal: marked interrupted, or failed with
                ``TrainingInterrupted``/``KeyboardInterrupt``) or killed while running (the record
                says running but nobody holds its lock); shown with the step its checkpoint goes
                to, where a rerun resumes it;
- ``failed``:   the run stopped on an error (the reason shown); a rerun resumes it from its
                checkpoint;
- ``pending``:  nothing started yet.

A directory holding a record of another configuration is ``failed`` with that reason (the
runner would refuse it).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.records import (
    STATUS_FAILED,
    STATUS_FINISHED,
    STATUS_INTERRUPTED,
    RecordError,
    atomic_write_json,
    checkpoint_step,
    lock_held,
    now_iso,
    read_json,
    read_jsonl,
    same_configuration,
)

PENDING, RUNNING, INTERRUPTED, FAILED, FINISHED = "pending", "running", "interrupted", "failed", "finished"
STATES = (PENDING, RUNNING, INTERRUPTED, FAILED, FINISHED)
#: the exit code of ``mrbench run`` refused because another process holds the record's lock
LOCK_REFUSED = 2
#: failure reasons of a run stopped by a signal rather than an error
STOPPED_BY_SIGNAL = ("TrainingInterrupted", "KeyboardInterrupt")


@dataclass
class CellState:
    state: str
    steps: int = 0          # steps done: metrics rows, or for an interrupted cell the checkpoint's step
    note: str = ""          # why it failed, or who runs it


def cell_state(cell: Any) -> CellState:
    path = Path(cell.record_dir)
    if lock_held(path):
        return CellState(RUNNING, _steps(path), "lock held")
    config_path = path / "config.json"
    try:
        if config_path.exists() and not same_configuration(read_json(config_path), _record_config(cell)):
            return CellState(FAILED, 0, "the directory holds a record of another configuration")
        prov = read_json(path / "provenance.json") if (path / "provenance.json").exists() else {}
    except RecordError as exc:
        return CellState(FAILED, 0, str(exc))
    status = prov.get("status")
    if status == STATUS_FINISHED:
        return CellState(FINISHED, _steps(path))
    failure = str(prov.get("failure", "failed"))
    if status == STATUS_FAILED and not failure.startswith(STOPPED_BY_SIGNAL):
        return CellState(FAILED, _steps(path), failure)
    if status in (STATUS_FAILED, STATUS_INTERRUPTED):
        return _interrupted(path, _stopped_by(str(prov.get("failure") or prov.get("interruption") or prov.get("reason") or "")))
    if status:  # "running" in the file, but nobody holds the lock: the writer was killed
        return _interrupted(path, "stopped without finishing (killed?)")
    return CellState(PENDING)


def _record_config(cell: Any) -> dict[str, Any]:
    return cell.record_config() if hasattr(cell, "record_config") else cell.cfg.to_dict()


def _stopped_by(reason: str) -> str:
    """"stopped by SIGTERM" from "TrainingInterrupted: SIGTERM: checkpoint written after step 3; ..."."""
    for part in reason.split(":"):
        if part.strip().startswith("SIG"):
            return f"stopped by {part.strip().split()[0]}"
    return "stopped"


def _interrupted(path: Path, why: str) -> CellState:
    """An interrupted cell: its steps are those its checkpoint keeps (what a rerun resumes from)."""
    logged = _steps(path)
    step = checkpoint_step(path)
    if step is None:
        where = "no checkpoint: a rerun starts at step 0" if logged else "a rerun starts at step 0"
        return CellState(INTERRUPTED, 0, f"{why}; {where}" + (f" ({logged} steps logged)" if logged else ""))
    lost = f" ({logged} steps logged; those after it are rerun)" if logged > step else ""
    return CellState(INTERRUPTED, step, f"{why}; checkpoint after step {step}: a rerun resumes there{lost}")


def _steps(path: Path) -> int:
    try:
        return len(read_jsonl(path / "metrics.jsonl"))
    except RecordError:
        return 0


def status_table(cells: list[Any]) -> tuple[str, dict[str, int]]:
    """One line per cell (state, steps done of total, cell id, note) and the count per state."""
    counts = dict.fromkeys(STATES, 0)
    lines = []
    width = max((len(c.id) for c in cells), default=4)
    for cell in cells:
        st = cell_state(cell)
        counts[st.state] += 1
        steps = "eval" if getattr(cell, "kind", "train") == "base" else f"{st.steps}/{cell.cfg.schedule.steps}"
        lines.append(f"{st.state:<11}  {steps:>7}  {cell.id.ljust(width)}  {st.note}".rstrip())
    return "\n".join(lines), counts


class SweepLog:
    """``ROOT/sweep.json``: the expanded cells with their record directories, states, attempts and
    times, rewritten (atomically) after every event; for people and tools watching a sweep."""

    def __init__(self, root: Path, name: str, grid: Path, executor: str, cells: list[Any]):
        self.path = Path(root) / "sweep.json"
        self._started: set[str] = set()
        old = self._read()
        self.data: dict[str, Any] = {"name": name, "grid": str(grid), "executor": executor, "updated": now_iso(),
                                     "cells": dict(old)}  # cells left out by --only keep their entries
        for cell in cells:
            prev = old.get(cell.id, {})
            self.data["cells"][cell.id] = {"record_dir": str(cell.record_dir), "values": cell.values,
                                           "state": cell_state(cell).state, "attempts": prev.get("attempts", 0),
                                           "started": prev.get("started"), "ended": prev.get("ended"),
                                           "exit_code": prev.get("exit_code")}
        self.save(merge=False)

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8")).get("cells", {})
        except (OSError, ValueError, AttributeError):
            return {}

    def started(self, cell: Any) -> None:
        self._started.add(cell.id)
        entry = self.data["cells"][cell.id]
        entry.update(state=RUNNING, started=now_iso(), ended=None, exit_code=None, attempts=entry["attempts"] + 1)
        self.save()

    def ended(self, cell: Any, exit_code: int | None) -> str:
        """Record that this sweep's process for ``cell`` ended; returns the cell's state. A cell whose
        lock another process holds (another sweep on this root started it first, and this one's run
        was refused, exit code 2) stays ``running`` and is left to that process."""
        state = cell_state(cell).state
        if state == RUNNING and exit_code == LOCK_REFUSED:
            self.data["cells"][cell.id].update(state=RUNNING, note="run by another process")
            self.save()
            return RUNNING
        if state == RUNNING:  # the process is gone; its lock may linger a moment
            state = FINISHED if exit_code == 0 else FAILED
        self.data["cells"][cell.id].update(state=state, ended=now_iso(), exit_code=exit_code)
        self.save()
        return state

    def refresh(self, cells: list[Any]) -> None:
        """Every cell's state read again from its record (at the end of a sweep: the records are the truth)."""
        self._merge()
        for cell in cells:
            self.data["cells"].setdefault(cell.id, {})["state"] = cell_state(cell).state
        self.save(merge=False)

    def _merge(self) -> None:
        """Take the file's entries for the cells this process has not started where another sweep on
        the same root has started or ended them since (later times)."""
        def when(entry: dict[str, Any]) -> tuple[str, str]:
            return str(entry.get("ended") or ""), str(entry.get("started") or "")

        for cid, entry in self._read().items():
            ours = self.data["cells"].get(cid)
            if cid not in self._started and isinstance(entry, dict) and (ours is None or when(entry) > when(ours)):
                self.data["cells"][cid] = entry

    def save(self, merge: bool = True) -> None:
        """Rewrite the file; where the root refuses the write (read-only, full), say so once and go on:
        the records, not this log, are what a rerun reads."""
        if merge:
            self._merge()
        self.data["updated"] = now_iso()
        try:
            atomic_write_json(self.path, self.data)
        except OSError as exc:
            if not getattr(self, "_unwritten", False):
                self._unwritten = True
                print(f"mrbench sweep: warning: {self.path}: not written ({exc.strerror or exc}); the cells' "
                      f"records still say how each ended", file=sys.stderr)
