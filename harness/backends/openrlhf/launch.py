"""Running the OpenRLHF process for a cell, and stopping it cleanly.

The process (the entry point, or ``ray job submit``) runs in its own session, so a Ctrl-C in the
terminal reaches mrbench only. Its output goes to the terminal and to ``openrlhf/launch.log``.

Stopping: the first SIGTERM/SIGINT writes the stop file (``openrlhf/stop``); the trainer checks
it after each step's metrics, checkpoints there, writes ``openrlhf/stopped`` with that step and
ends, and :func:`run_process` returns once the process has gone. A second signal terminates the
process at once (it resumes from its last periodic checkpoint).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from harness.backends.openrlhf.cell import REPO_ROOT, CellPaths

STOPPED_FILE = "stopped"


@dataclass
class Outcome:
    returncode: int
    signal: str | None  # the signal that asked the run to stop, if one did
    stopped_after: int | None  # the step the trainer checkpointed and stopped after, if it did


def request_stop(paths: CellPaths, reason: str) -> None:
    paths.stop.parent.mkdir(parents=True, exist_ok=True)
    paths.stop.write_text(reason + "\n")


def stop_requested(paths: CellPaths) -> bool:
    return paths.stop.exists()


def acknowledge_stop(paths: CellPaths, step: int) -> None:
    (paths.work / STOPPED_FILE).write_text(f"{step}\n")


def clear_stop(paths: CellPaths) -> None:
    for path in (paths.stop, paths.work / STOPPED_FILE):
        path.unlink(missing_ok=True)


def stopped_after(paths: CellPaths) -> int | None:
    path = paths.work / STOPPED_FILE
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def run_process(command: list[str], env: dict[str, str], paths: CellPaths, echo: Any = None) -> Outcome:
    """Run ``command`` to its end (see the module docstring for signals); returns its outcome."""
    echo = sys.stdout if echo is None else echo
    paths.work.mkdir(parents=True, exist_ok=True)
    asked: list[str] = []
    proc = subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, bufsize=1, start_new_session=True)

    def on_signal(signum: int, frame: Any) -> None:
        name = signal.Signals(signum).name
        if asked:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            return
        asked.append(name)
        request_stop(paths, name)
        print(f"mrbench: {name}: OpenRLHF stops after the step it is in (checkpointing it); "
              f"a second signal ends it now", file=sys.stderr)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        with paths.log.open("a", encoding="utf-8") as log:
            assert proc.stdout is not None
            for line in proc.stdout:
                log.write(line)
                log.flush()
                echo.write(line)
        rc = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return Outcome(rc, asked[0] if asked else None, stopped_after(paths))
