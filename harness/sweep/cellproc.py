"""One cell as a subprocess: ``python -m harness.cli run --config <record>/cell.yaml``.

Standard library only, so that a Ray worker can run :func:`run_cell_process` without importing
mrbench (Ray ships this module by value, and with it the one string it takes from
:mod:`mrbench_core.sweep_cell`). The child's output goes to ``<record>/cell.log``. The
child dies with its parent (``PR_SET_PDEATHSIG``: a killed sweep or Ray worker sends it SIGTERM,
on which the local backend checkpoints), and on KeyboardInterrupt (Ctrl-C, ``ray.cancel``) it is
sent SIGTERM and given time to checkpoint. Its environment carries ``CELL_ENV``, on which the
backend handles the first stop signal once and ignores repeats (a dying parent's threads each send
the parent-death signal; :mod:`harness.training.stop_signal`), so a killed sweep's cells finish the
step in progress, checkpoint and exit on their own.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

from mrbench_core.sweep_cell import CELL_ENV  # a str: shipped by value with this module

PR_SET_PDEATHSIG = 1
STOP_GRACE_S = 120.0


def _die_with(parent: int):
    """For the child before exec: receive SIGTERM when ``parent`` dies (Linux; a no-op elsewhere),
    and exit at once if it died already (between the fork and the prctl call)."""

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the hook runs between fork and exec
    except (OSError, AttributeError):
        return None

    def hook() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return hook


def cell_command(cell_yaml: str, python: str | None = None, run_args: tuple[str, ...] = ()) -> list[str]:
    return [python or sys.executable, "-m", "harness.cli", "run", "--config", cell_yaml, *run_args]


def start_cell_process(cell_yaml: str, log_path: str, cwd: str, env: dict[str, str],
                       run_args: tuple[str, ...] = ()) -> subprocess.Popen:
    """Start the cell in its own session (a terminal's Ctrl-C reaches only the sweep, which stops
    the cells itself), appending its output to ``log_path``."""
    hook = _die_with(os.getpid()) if sys.platform.startswith("linux") else None
    env = {**env, CELL_ENV: "1"}
    with open(log_path, "ab") as log:  # the child keeps its own descriptor
        # the hook only calls prctl and getppid, which is safe between fork and exec in a threaded parent
        return subprocess.Popen(cell_command(cell_yaml, run_args=run_args), cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=hook)  # noqa: PLW1509


def stop_cell_process(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> int | None:
    """SIGTERM (the local backend checkpoints and exits), then SIGKILL after ``grace_s``."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


def run_cell_process(cell_yaml: str, log_path: str, cwd: str, env_extra: dict[str, str],
                     run_args: tuple[str, ...] = ()) -> int:
    """Run one cell to its end and return its exit code (the body of a Ray task)."""
    env = dict(os.environ)
    env.update(env_extra)
    proc = start_cell_process(cell_yaml, log_path, cwd, env, run_args)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        stop_cell_process(proc)
        raise
