"""A plugin whose module raises while it is imported (reliability probe 5, P1) is one line naming
the entry point and its error, in ``mrbench list`` (its row says it is unavailable, the others are
listed) and in ``mrbench run`` of that task (exit code 2), never a traceback. The plugin is a
dist-info and a module on PYTHONPATH, as a ``pip install`` leaves them.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WHY = "task 'boomtask': importing 'boom_mod:Task' raised RuntimeError: the plugin's own import failed"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    site = tmp_path / "site"
    dist = site / "boom-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: boom\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[mrbench.tasks]\nboomtask = boom_mod:Task\n")
    (site / "boom_mod.py").write_text("raise RuntimeError('the plugin\\'s own import failed\\nsecond line')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_list_shows_the_plugin_unavailable_in_one_row(tmp_path):
    done = _run(tmp_path, "list")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    rows = [line for line in done.stdout.splitlines() if "boomtask" in line]
    assert len(rows) == 1 and f"(unavailable: {WHY})" in rows[0], done.stdout
    assert any(line.strip().startswith("ifollow") for line in done.stdout.splitlines())


def test_a_run_of_that_task_is_one_line(tmp_path):
    done = _run(tmp_path, "run", "--task", "boomtask", "--model", "tiny-random", "--dry-run")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and WHY in lines[0], done.stderr
