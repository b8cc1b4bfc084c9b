"""`mrbench sweep` end to end on the tiny model: a 2 algorithms x 2 seeds x 2 steps grid with the
inline executor (then `mrbench report` on it), and with the local executor after the sweep was
killed mid-way (the rerun finishes the rest without touching finished cells)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import process_sessions
import pytest
from sweep_fixtures import REPO, cell_dirs, child_env, snapshot, status_of, wait_for, write_grid
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import cli
from harness.records import lock_held
from harness.sweep.grid import expand, load_grid

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_inline_sweep_runs_every_cell_and_a_rerun_skips_them(tmp_path, capsys):
    grid = write_grid(tmp_path)
    assert cli.main(["sweep", str(grid), "--executor", "inline"]) == 0
    root = tmp_path / "tiny"
    dirs = cell_dirs(root)
    assert [d.relative_to(root).as_posix() for d in dirs] == [
        f"ifollow/{a}/tiny-random/seed{s}" for a in ("gdpo", "mrtpo") for s in (0, 1)]
    for d in dirs:
        assert status_of(d) == "finished" and not (d / ".lock").exists()
        assert [json.loads(line)["step"] for line in (d / "metrics.jsonl").read_text().splitlines()] == [1, 2]
    log = json.loads((root / "sweep.json").read_text())
    assert {c["state"] for c in log["cells"].values()} == {"finished"}
    before = {d: snapshot(d) for d in dirs}
    capsys.readouterr()
    assert cli.main(["sweep", str(grid), "--executor", "inline"]) == 0
    assert "4 finished, 0 running elsewhere, 0 to run" in capsys.readouterr().out
    assert {d: snapshot(d) for d in dirs} == before

    out = tmp_path / "report"
    assert cli.main(["report", "--root", str(root), "--out", str(out), "--baseline", "gdpo"]) == 0
    for name in ("leaderboard.md", "leaderboard.csv", "leaderboard.json", "report.html", "curves-ifollow.png",
                 "curves-ifollow.svg"):
        assert (out / name).stat().st_size > 0, name
    md = (out / "leaderboard.md").read_text()
    assert "## ifollow" in md and "| mrtpo | tiny-random | 2 |" in md and "too few seeds to tell (n=2)" in md
    data = json.loads((out / "leaderboard.json").read_text())
    rows = data["tasks"]["ifollow"]["tables"][0]["rows"]
    assert [r["label"] for r in rows] == ["gdpo", "mrtpo"] and all(r["seeds"] == [0, 1] for r in rows)


@pytest.mark.timeout(1800)  # its waits' own caps: 900 s for the first cell, 600 s for the locks
def test_a_killed_local_sweep_reruns_only_the_unfinished_cells(tmp_path):
    grid = write_grid(tmp_path, name="killed")
    cells = expand(load_grid(grid))
    first = cells[0].record_dir
    log = tmp_path / "sweep.log"
    with open(log, "wb") as out:
        proc = process_sessions.track(subprocess.Popen(  # an interrupted test run kills the sweep and its cells
            [sys.executable, "-m", "harness.cli", "sweep", str(grid), "--executor", "local", "--jobs", "1"],
            cwd=REPO, env=child_env(), stdout=out, stderr=subprocess.STDOUT))
    try:
        # the caps only end a hung sweep: each wait returns as soon as its state is reached (a busy host
        # took over 180 s for the first tiny cell)
        assert wait_for(lambda: status_of(first) == "finished" or proc.poll() is not None, timeout=900)
        assert proc.poll() is None, f"the sweep ended before it could be killed:\n{log.read_text()[-3000:]}"
        proc.send_signal(signal.SIGKILL)  # no clean-up in the sweep; its running cell gets SIGTERM from the OS
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        process_sessions.untrack(proc)  # its running cell stops on its own (the parent-death signal)
    assert wait_for(lambda: not any(lock_held(c.record_dir) for c in cells), timeout=600)
    assert sum(status_of(c.record_dir) == "finished" for c in cells) < len(cells)
    done = {c.record_dir: snapshot(c.record_dir) for c in cells if status_of(c.record_dir) == "finished"}
    assert first in done

    assert cli.main(["sweep", str(grid), "--executor", "local", "--jobs", "2"]) == 0
    assert all(status_of(c.record_dir) == "finished" for c in cells)
    assert {d: snapshot(d) for d in done} == done  # finished cells were not rerun
    for cell in cells:
        assert (cell.record_dir / "cell.log").exists() and not (cell.record_dir / ".lock").exists()
