"""Interrupting the test suite leaves no process behind (tests/process_sessions.py): a process tree
a test started, one of whose processes left for a session of its own, is gone after ``stop``, and
after SIGTERM or SIGINT reaches a pytest (or pytest-xdist's controller) while the test holds it."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import process_sessions
import pytest

pytestmark = pytest.mark.torchfree  # standard library only: runs where torch is not installed (.ci/run)

TESTS = Path(__file__).resolve().parent
#: a parent that starts a child in a session of its own (as the openrlhf backend starts its driver),
#: writes both pids to the file it is given and waits to be killed
TREE = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(f"{os.getpid()} {child.pid}")
os.replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(600)
"""
#: a test that holds such a tree (started through process_sessions) until pytest is interrupted
HOLDING_TEST = f"""
import sys, time
import process_sessions

TREE = {TREE!r}


def test_holds_a_process_tree(tmp_path):
    process_sessions.start([sys.executable, "-c", TREE, PIDS_FILE])
    while True:  # until the signal arrives
        time.sleep(0.05)
"""


def _wait_for_file(path: Path, proc: subprocess.Popen) -> list[int]:
    """The pids the tree wrote, once it has (or the process that was to start it ended: a failure)."""
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    return [int(x) for x in path.read_text().split()]


def test_stop_kills_the_tree_and_the_descendant_in_a_session_of_its_own(tmp_path):
    pids_file = tmp_path / "pids"
    proc = process_sessions.start([sys.executable, "-c", TREE, str(pids_file)])
    parent, child = _wait_for_file(pids_file, proc)
    assert parent == proc.pid and os.getsid(child) == child != os.getsid(parent)
    assert process_sessions.descendants(proc.pid) == [child]
    process_sessions.stop(proc)
    assert proc.returncode == -signal.SIGKILL
    assert process_sessions.wait_gone(child), f"process {child} outlived stop()"
    assert proc.pid not in process_sessions._LIVE


XDIST = importlib.util.find_spec("xdist") is not None


@pytest.mark.parametrize("workers", [0, pytest.param(1, marks=pytest.mark.skipif(not XDIST, reason="no pytest-xdist"))],
                         ids=["one-process", "xdist"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_pytest_kills_the_process_trees_its_tests_started(tmp_path, signum, workers):
    pids_file = tmp_path / "pids"
    test_file = tmp_path / "test_holding.py"
    test_file.write_text(HOLDING_TEST.replace("PIDS_FILE", repr(str(pids_file))))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    pytest_args = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "process_sessions",
                   "--rootdir", str(tmp_path), "-c", str(tmp_path / "pytest.ini"), str(test_file)]
    if workers:
        pytest_args += ["-p", "xdist", "-n", str(workers)]
    # SIGINT at its default, as a terminal's pytest has it: a suite started in the background of a
    # non-interactive shell inherits SIGINT ignored, and an ignored signal stays ignored (the plugin
    # respects it), so the inner pytest execs itself with the default restored
    restore = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
               "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])")
    args = [sys.executable, "-c", restore, *pytest_args]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    inner = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, start_new_session=True)  # a terminal's Ctrl-C would not reach it
    try:
        tree = _wait_for_file(pids_file, inner)
        inner.send_signal(signum)
        out, _ = inner.communicate(timeout=120)
    finally:
        process_sessions.track(inner)
        process_sessions.stop(inner)
    assert inner.returncode not in (0, None, -signum), out  # it stopped on its own, reporting the interruption
    assert "KeyboardInterrupt" in out or "Interrupted" in out, out
    left = [pid for pid in tree if not process_sessions.wait_gone(pid)]
    assert not left, f"processes {left} outlived the interrupted pytest:\n{out}"
