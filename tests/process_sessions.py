"""Processes the tests start, and every process those start, gone when the test ends or pytest is
stopped (not a test module itself; standard library only, so the torch-free floor can import it).

A test that starts a process it does not wait for (a Ray head, an OpenRLHF cell, a sweep it will
kill) starts it with :func:`start` (or wraps one it started with :func:`track`) and ends it with
:func:`stop`, or uses :func:`session` as a ``with`` block. :func:`stop` kills the process, its
process group and every descendant, including those that left for sessions of their own (the
openrlhf backend runs its driver in one); the process tree is read while it is still whole, so
nothing is left reparented to init.

This module is also the pytest plugin that kills what a test left running (tests/conftest.py
loads its hooks; ``-p process_sessions`` elsewhere): at the end of the session, and on SIGTERM and
SIGINT (Ctrl-C), which stop the session the way Ctrl-C does, so that fixtures tear down. Under
pytest-xdist the controller passes the signal on to its workers, which run the tests.

On Linux a process started with :func:`start` also gets SIGTERM when the thread that started it
dies (``PR_SET_PDEATHSIG``), so even a pytest killed with SIGKILL does not leave it waiting.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
#: the processes started or tracked here and not yet stopped, by pid
_LIVE: dict[int, subprocess.Popen] = {}


def _die_with_parent():
    """A ``preexec_fn`` that asks the kernel for SIGTERM when the starting thread dies (Linux only)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died between fork and prctl
            os._exit(1)

    return hook


def start(args: list[str], **popen: Any) -> subprocess.Popen:
    """``subprocess.Popen(args, **popen)`` in a new session, tracked until :func:`stop`."""
    popen.setdefault("start_new_session", True)
    hook = _die_with_parent()
    if hook is not None and "preexec_fn" not in popen:
        popen["preexec_fn"] = hook  # only prctl and getppid between fork and exec
    return track(subprocess.Popen(args, **popen))


def track(proc: subprocess.Popen) -> subprocess.Popen:
    """Track a process started elsewhere, so that :func:`stop_all` kills it if the test does not."""
    _LIVE[proc.pid] = proc
    return proc


def untrack(proc: subprocess.Popen) -> None:
    """Stop tracking ``proc`` (a test that ended it itself and leaves what it started to end alone)."""
    _LIVE.pop(proc.pid, None)


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (parent pid, session id) of every process, from /proc (empty where there is none)."""
    table = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state ppid pgrp session ...
        table[int(entry.name)] = (int(fields[1]), int(fields[3]))
    return table


def children(pid: int) -> list[int]:
    """The live processes whose parent is ``pid``."""
    return sorted(p for p, (ppid, _) in _proc_table().items() if ppid == pid)


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` in the process tree, or in the session ``pid`` leads."""
    table = _proc_table()
    found, frontier = set(), [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, _) in table.items():
            if ppid == parent and child not in found:
                found.add(child)
                frontier.append(child)
    found |= {p for p, (_, sid) in table.items() if sid == pid and p != pid}
    return sorted(found)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> int | None:
    """SIGKILL ``proc``, its process group and its descendants; returns its exit code."""
    below = descendants(proc.pid)  # read before anything dies: orphans move to init
    if proc.poll() is None:
        _kill(proc.pid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, signal.SIGKILL)
    for pid in below:
        _kill(pid)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=timeout)
    _LIVE.pop(proc.pid, None)
    return proc.returncode


def stop_all() -> list[int]:
    """Stop every tracked process still known here (conftest's end of session and signal handler);
    returns their pids."""
    pids = list(_LIVE)
    for proc in list(_LIVE.values()):
        stop(proc, timeout=5.0)
    return pids


@contextlib.contextmanager
def session(args: list[str], **popen: Any) -> Iterator[subprocess.Popen]:
    """:func:`start` for the ``with`` block; the process tree is killed when it ends, however it ends."""
    proc = start(args, **popen)
    try:
        yield proc
    finally:
        stop(proc)


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """True once ``pid`` no longer runs (gone or a zombie)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


# -- the pytest plugin ---------------------------------------------------------------------------------------

_STOPPING: list[int] = []
_CONFIG: Any = None


def _xdist_controller(config: Any) -> bool:
    return bool(getattr(config.option, "numprocesses", None)) and not hasattr(config, "workerinput")


def _on_stop_signal(signum: int, frame: Any) -> None:
    """SIGTERM and SIGINT: kill the processes the tests started (whole trees) and stop the session as
    Ctrl-C does. xdist's controller passes it on to its workers as SIGTERM (xdist would otherwise
    kill them before their teardown). A second signal only kills what is left, so that the teardown
    finishes; a third acts as it would without this handler."""
    stop_all()
    if _CONFIG is not None and _xdist_controller(_CONFIG):
        for pid in children(os.getpid()):  # SIGTERM: the workers may ignore SIGINT
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
    _STOPPING.append(signum)
    if len(_STOPPING) == 1:
        raise KeyboardInterrupt(signal.Signals(signum).name)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: Any) -> None:
    global _CONFIG
    _CONFIG = config
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in (signal.SIGTERM, signal.SIGINT):
        if signal.getsignal(signum) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(signum, _on_stop_signal)


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    stop_all()


def pytest_unconfigure(config: Any) -> None:
    stop_all()
