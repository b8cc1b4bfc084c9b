"""The state of a cell, read from its record directory, and the sweep's own state file.

- ``finished``: ``provenance.json`` says so (the runner never reruns it);
- ``running``:  a live process holds the record's lock;
- ``failed``:   the run stopped before finishing: marked failed (with the reason) or interrupted
                (Ctrl-C / SIGTERM), or killed while running (lock no longer held); a rerun
                resumes it from its checkpoint;
- ``pending``:  nothing started yet.

A directory holding a record of another configuration is ``failed`` with that reason (the
runner would refuse it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.records import (
    STATUS_FAILED,
    STATUS_FINISHED,
    STATUS_INTERRUPTED,
    RecordError,
    atomic_write_json,
    lock_held,
    now_iso,
    read_json,
    read_jsonl,
    same_configuration,
)

PENDING, RUNNING, FAILED, FINISHED = "pending", "running", "failed", "finished"
STATES = (PENDING, RUNNING, FAILED, FINISHED)


@dataclass
class CellState:
    state: str
    steps: int = 0          # metrics rows written so far
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
    if status == STATUS_FAILED:
        return CellState(FAILED, _steps(path), str(prov.get("failure", "failed")))
    if status == STATUS_INTERRUPTED:
        return CellState(FAILED, _steps(path), f"interrupted: {prov.get('interruption', '')}")
    if status:  # "running" in the file, but nobody holds the lock: the writer was killed
        return CellState(FAILED, _steps(path), "stopped without finishing (killed?)")
    return CellState(PENDING)


def _record_config(cell: Any) -> dict[str, Any]:
    return cell.record_config() if hasattr(cell, "record_config") else cell.cfg.to_dict()


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
        lines.append(f"{st.state:<8}  {steps:>7}  {cell.id.ljust(width)}  {st.note}".rstrip())
    return "\n".join(lines), counts


class SweepLog:
    """``ROOT/sweep.json``: the expanded cells with their record directories, states, attempts and
    times, rewritten (atomically) after every event; for people and tools watching a sweep."""

    def __init__(self, root: Path, name: str, grid: Path, executor: str, cells: list[Any]):
        self.path = Path(root) / "sweep.json"
        old = self._read()
        self.data: dict[str, Any] = {"name": name, "grid": str(grid), "executor": executor, "updated": now_iso(),
                                     "cells": dict(old)}  # cells left out by --only keep their entries
        for cell in cells:
            prev = old.get(cell.id, {})
            self.data["cells"][cell.id] = {"record_dir": str(cell.record_dir), "values": cell.values,
                                           "state": cell_state(cell).state, "attempts": prev.get("attempts", 0),
                                           "started": prev.get("started"), "ended": prev.get("ended"),
                                           "exit_code": prev.get("exit_code")}
        self.save()

    def _read(self) -> dict[str, Any]:
        try:
            return json.loads(self.path.read_text(encoding="utf-8")).get("cells", {})
        except (OSError, ValueError, AttributeError):
            return {}

    def started(self, cell: Any) -> None:
        entry = self.data["cells"][cell.id]
        entry.update(state=RUNNING, started=now_iso(), ended=None, exit_code=None, attempts=entry["attempts"] + 1)
        self.save()

    def ended(self, cell: Any, exit_code: int | None) -> str:
        state = cell_state(cell).state
        if state == RUNNING:  # the process is gone; its lock may linger a moment
            state = FINISHED if exit_code == 0 else FAILED
        self.data["cells"][cell.id].update(state=state, ended=now_iso(), exit_code=exit_code)
        self.save()
        return state

    def save(self) -> None:
        self.data["updated"] = now_iso()
        atomic_write_json(self.path, self.data)
