"""A sweep killed with SIGKILL loses no finished step; two sweeps on one root agree with the records;
grid values equal after resolution are refused (reliability probe 3: 4b, 4c, 4g).

The SIGKILL test runs a 2-cell local sweep (``--jobs 2``) of the tiny model with no periodic
checkpoint (``checkpoint_every: 0``, the probe's worst case) and kills the sweep process twice:
right after the first metrics row of any cell appears (one cell mid-step, the other mid-step or
still starting), and, after a rerun, once a cell has logged a step past its checkpoint. After each
kill every cell must be ``interrupted`` with a checkpoint at exactly its logged steps, and the last
rerun must finish every cell with each step logged once.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import process_sessions
import pytest
from sweep_fixtures import REPO, TINY_SET, cell_dirs, child_env, wait_for, write_grid
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import cli
from harness.records import checkpoint_step, lock_held
from harness.sweep.grid import GridError, expand, load_grid
from harness.sweep.status import FINISHED, INTERRUPTED, RUNNING, SweepLog, cell_state
from harness.training import stop_signal
from mrbench_core.sweep_cell import CELL_ENV

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# -- one signal, handled once -------------------------------------------------------------------
def test_a_sweep_cell_handles_one_stop_signal_once(monkeypatch):
    monkeypatch.setenv(CELL_ENV, "1")
    first = stop_signal.stop_reason(None, signal.SIGTERM)
    assert first == "SIGTERM"
    # the parent-death signal again (one per dying thread of the sweep), or a later SIGINT: no hard stop
    assert stop_signal.stop_reason(first, signal.SIGTERM) == "SIGTERM"
    assert stop_signal.stop_reason(first, signal.SIGINT) == "SIGTERM"


def test_an_interactive_run_still_hard_stops_on_a_second_signal(monkeypatch):
    monkeypatch.delenv(CELL_ENV, raising=False)
    first = stop_signal.stop_reason(None, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt, match="SIGINT again"):
        stop_signal.stop_reason(first, signal.SIGINT)


def test_cells_are_started_with_the_cell_marker(tmp_path, monkeypatch):
    from harness.sweep import cellproc

    monkeypatch.setattr(cellproc, "cell_command", lambda cell_yaml, python=None, run_args=(): [
        sys.executable, "-c", f"import os; print(os.environ.get({CELL_ENV!r}))"])
    log = tmp_path / "cell.log"
    env = {k: v for k, v in os.environ.items() if k != CELL_ENV}
    assert cellproc.start_cell_process(str(tmp_path / "cell.yaml"), str(log), str(tmp_path), env).wait(60) == 0
    assert log.read_text().strip() == "1"


# -- SIGKILL of a running sweep ---------------------------------------------------------------------
def _rows(path: Path) -> list[int]:
    metrics = path / "metrics.jsonl"
    return [json.loads(line)["step"] for line in metrics.read_text().splitlines()] if metrics.exists() else []


def _started_or_finished(cell) -> bool:
    """The cell's process holds its record and has started training (status running), or it finished."""
    path = cell.record_dir / "provenance.json"
    try:
        status = json.loads(path.read_text()).get("status") if path.exists() else None
    except ValueError:  # read while being replaced: not yet
        return False
    return status == FINISHED or (status == RUNNING and lock_held(cell.record_dir))


def _start_sweep(grid: Path, log: Path) -> subprocess.Popen:
    with open(log, "ab") as out:  # tracked: an interrupted test run kills the sweep and its cells
        return process_sessions.track(subprocess.Popen(
            [sys.executable, "-m", "harness.cli", "sweep", str(grid), "--executor", "local", "--jobs", "2"],
            cwd=REPO, env=child_env(), stdout=out, stderr=subprocess.STDOUT))


def _kill_when(proc: subprocess.Popen, ready, log: Path) -> None:
    try:
        assert wait_for(lambda: ready() or proc.poll() is not None, timeout=240, every=0.05)
        assert proc.poll() is None, f"the sweep ended before it could be killed:\n{log.read_text()[-3000:]}"
        proc.send_signal(signal.SIGKILL)  # no clean-up in the sweep; the cells get the parent-death signal
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        process_sessions.untrack(proc)  # its cells stop on their own (the parent-death signal)


def _check_nothing_lost(cells, grid: Path, capsys) -> dict[str, int]:
    """Every cell stopped on its own with a checkpoint at exactly the steps it logged."""
    assert wait_for(lambda: not any(lock_held(c.record_dir) for c in cells), timeout=120)
    done = {}
    for cell in cells:
        rows = _rows(cell.record_dir)
        state = cell_state(cell)
        if state.state == FINISHED:
            done[cell.id] = len(rows)
            continue
        log = (cell.record_dir / "cell.log").read_text() if (cell.record_dir / "cell.log").exists() else ""
        assert "KeyboardInterrupt" not in log.replace("TrainingInterrupted", ""), log[-2000:]
        assert state.state == INTERRUPTED, (cell.id, state)
        assert rows == list(range(1, len(rows) + 1))
        assert checkpoint_step(cell.record_dir) == (len(rows) or None), (cell.id, rows)
        assert state.steps == len(rows)
        done[cell.id] = len(rows)
    capsys.readouterr()
    assert cli.main(["sweep", str(grid), "--status"]) == 0
    out = capsys.readouterr().out
    for cell in cells:
        if done[cell.id] and cell_state(cell).state == INTERRUPTED:
            assert re.search(rf"^interrupted +{done[cell.id]}/6  {re.escape(cell.id)}  ", out, re.MULTILINE), out
    return done


@pytest.mark.timeout(1200)  # two kills, each after waits capped at 240 s and 120 s, and a rerun
def test_a_sigkilled_sweep_loses_no_finished_step(tmp_path, capsys):
    grid = write_grid(tmp_path, name="sigkill", axes={"seed": [0, 1]},
                      extra={"set": {**TINY_SET, "algo.name": "grpo", "schedule.steps": 6,
                                     "schedule.checkpoint_every": 0, "sampling.max_new_tokens": 24}})
    cells = expand(load_grid(grid))
    log = tmp_path / "sweep.log"

    # kill 1: as soon as any cell has finished its first step (it is in its second step now) and
    # every cell has started (its record locked and marked running) or finished: a state, not a time,
    # so that on a slow host the kill does not land before a cell has started
    _kill_when(_start_sweep(grid, log),
               lambda: any(_rows(c.record_dir) for c in cells) and all(map(_started_or_finished, cells)), log)
    first = _check_nothing_lost(cells, grid, capsys)
    assert any(first.values())

    # kill 2: after the rerun, once a cell has logged a step past where it was
    _kill_when(_start_sweep(grid, log),
               lambda: any(len(_rows(c.record_dir)) > first[c.id] for c in cells), log)
    second = _check_nothing_lost(cells, grid, capsys)
    assert all(second[c.id] >= first[c.id] for c in cells)  # resumed, not restarted

    assert cli.main(["sweep", str(grid), "--executor", "local", "--jobs", "2"]) == 0
    for cell in cells:
        assert _rows(cell.record_dir) == [1, 2, 3, 4, 5, 6]  # each step once: resumed where it stopped
        assert len(json.loads((cell.record_dir / "provenance.json").read_text())["resumed"]) >= 1


# -- two sweeps on one root ----------------------------------------------------------------------
def _fake_cell(tmp_path: Path, name: str) -> SimpleNamespace:
    grid = write_grid(tmp_path, name=name, axes={"algo.name": ["gdpo"], "seed": [0]})
    return expand(load_grid(grid))[0]


def test_a_cell_another_sweep_holds_is_not_marked_failed(tmp_path):
    from harness.records import RunRecord

    cell = _fake_cell(tmp_path, "two")
    held = RunRecord.open(cell.cfg)  # the first sweep's cell process, running it
    try:
        log = SweepLog(tmp_path / "two", "two", tmp_path / "two.yaml", "local", [cell])
        log.started(cell)
        assert log.ended(cell, 2) == RUNNING  # the second sweep's copy was refused: lock held
        entry = json.loads((tmp_path / "two" / "sweep.json").read_text())["cells"][cell.id]
        assert entry["state"] == RUNNING and entry["exit_code"] is None
    finally:
        held.finish({})
        held.unlock()
    log.refresh([cell])
    entry = json.loads((tmp_path / "two" / "sweep.json").read_text())["cells"][cell.id]
    assert entry["state"] == FINISHED  # the records are the truth at the end


def test_a_sweep_log_keeps_what_another_sweep_wrote_later(tmp_path):
    cell = _fake_cell(tmp_path, "merge")
    root = tmp_path / "merge"
    mine = SweepLog(root, "merge", tmp_path / "merge.yaml", "local", [cell])
    other = SweepLog(root, "merge", tmp_path / "merge.yaml", "local", [cell])
    other.started(cell)
    time.sleep(1.1)  # timestamps have one-second resolution
    other.data["cells"][cell.id].update(state=FINISHED, ended="9999-01-01T00:00:00+00:00")
    other.save()
    mine.save()  # this sweep never started the cell: it must not put back its stale view
    assert json.loads((root / "sweep.json").read_text())["cells"][cell.id]["state"] == FINISHED


# -- duplicates after resolution -------------------------------------------------------------------
def test_grid_values_equal_after_resolution_are_refused(tmp_path):
    grid = write_grid(tmp_path, name="dup", axes={"algo.name": ["gdpo"], "sampling.temperature": [1, 1.0], "seed": [0]})
    with pytest.raises(GridError, match=r"grid values sampling\.temperature=1 and sampling\.temperature=1\.0 resolve to one"):
        expand(load_grid(grid))
    assert not cell_dirs(tmp_path / "dup")


# -- the status of a killed cell --------------------------------------------------------------------
@pytest.mark.parametrize("failure,ckpt,want_steps,note", [
    (None, 3, 3, "stopped without finishing (killed?); checkpoint after step 3: a rerun resumes there (5 steps logged"),
    (None, None, 0, "no checkpoint: a rerun starts at step 0 (5 steps logged)"),
    ("TrainingInterrupted: SIGTERM: checkpoint written after step 5; rerun", 5, 5, "stopped by SIGTERM; checkpoint after step 5"),
])
def test_status_reports_a_killed_cell_as_interrupted_with_its_checkpoint_step(tmp_path, failure, ckpt, want_steps, note):
    from harness.records import RunRecord

    cell = _fake_cell(tmp_path, "st")
    rec = RunRecord.open(cell.cfg)
    rec.start(seed=0, task_version="1", data_hash="x")
    for step in range(1, 6):
        rec.append_metrics({"step": step})
    if failure:
        rec.fail(failure)
    if ckpt is not None:
        (rec.checkpoint_dir).mkdir()
        (rec.checkpoint_dir / "step.json").write_text(json.dumps({"step": ckpt}))
    rec._lock_fh.close()  # killed: the lock file stays, nobody holds it
    state = cell_state(cell)
    assert (state.state, state.steps) == (INTERRUPTED, want_steps) and note in state.note, state
