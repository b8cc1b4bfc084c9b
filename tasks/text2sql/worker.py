"""A hard wall-clock stop for sandboxed queries: they run in a child process that is killed on overrun.

Why: the progress handler of :mod:`tasks.text2sql.sandbox` stops a query *between* SQLite
virtual-machine instructions. One instruction can still run for a long time: a built-in function
called once on large arguments does not return to the VM until it is done. ``instr`` and
``replace`` of long strings compare O(n * m) bytes (a 4 MB haystack and a 100 kB needle take about
28 s), and ``printf('%.*c', 2000000000, 'x')`` loops two billion times (about 8 s). Neither the
progress handler nor ``sqlite3_interrupt`` reaches inside such a call, and Python cannot stop a
thread, so the only hard stop is a process boundary.

:class:`WorkerSandbox` has the interface of :class:`~tasks.text2sql.sandbox.Sandbox`. Each query
goes to one long-lived child process (``python -m tasks.text2sql.worker``; pickled frames over its
stdin and stdout) that runs it in an ordinary ``Sandbox`` with the same limits, so every other
guard (read-only, authorizer, progress handler, row and byte caps) still applies there. The parent
waits ``timeout_s + grace_s``; past that it kills the child, reports ``error_kind="timeout"``, and
starts a fresh child for the next query. Cost: one pickle round trip per query (tens of
microseconds) and one process start (about 0.1 s) per kill. POSIX only (``poll`` on a pipe).

The frames carry only what the parent sends: a database path, the SQL text and the limits one
way; a :class:`~tasks.text2sql.sandbox.QueryResult` back.
"""

from __future__ import annotations

import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
import weakref
from typing import IO, Any

from tasks.text2sql.sandbox import QueryResult, Sandbox, SandboxLimits

_HEADER = struct.Struct("<Q")
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _write_frame(stream: IO[bytes], obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_exact(fd: int, n: int) -> bytes | None:
    parts, left = [], n
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            return None
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _read_frame(fd: int) -> Any:
    head = _read_exact(fd, _HEADER.size)
    if head is None:
        return None
    body = _read_exact(fd, _HEADER.unpack(head)[0])
    return None if body is None else pickle.loads(body)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdin, proc.stdout):
        if stream is not None:
            stream.close()


class WorkerSandbox(Sandbox):
    """A :class:`Sandbox` whose queries run in a child process, killed ``grace_s`` after the time limit."""

    def __init__(self, limits: SandboxLimits | None = None, grace_s: float = 0.5) -> None:
        super().__init__(limits)
        self.grace_s = grace_s
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._owner = os.getpid()
        self._finalizer: Any = None
        self.kills = 0  # how many times a child was killed for overrunning

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another process: the limits, without this process's child, lock or finalizer."""
        state = super().__getstate__()
        for key in ("_lock", "_proc", "_finalizer", "_owner"):
            del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._lock, self._proc, self._owner, self._finalizer = threading.Lock(), None, os.getpid(), None

    def _child(self) -> subprocess.Popen[bytes]:
        if self._proc is not None and self._owner == os.getpid() and self._proc.poll() is None:
            return self._proc
        if self._proc is not None and self._owner == os.getpid():
            _kill(self._proc)
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH", "")) if p)
        proc = subprocess.Popen([sys.executable, "-m", "tasks.text2sql.worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, env=env, close_fds=True)
        assert proc.stdin is not None
        _write_frame(proc.stdin, self.limits)
        self._proc, self._owner = proc, os.getpid()
        self._finalizer = weakref.finalize(self, _kill, proc)
        return proc

    def _drop_child(self) -> None:
        if self._proc is not None and self._owner == os.getpid():
            if self._finalizer is not None:
                self._finalizer.detach()
            _kill(self._proc)
        self._proc = None

    def run(self, db_path: str, sql: str, limits: SandboxLimits | None = None) -> QueryResult:
        """As :meth:`Sandbox.run`, in the child process; never raises on ``sql``."""
        lim = limits or self.limits
        start = time.perf_counter()
        with self._lock:
            try:
                proc = self._child()
                assert proc.stdin is not None and proc.stdout is not None
                _write_frame(proc.stdin, (db_path, sql, lim))
                fd = proc.stdout.fileno()
                poller = select.poll()  # poll, not select: no FD_SETSIZE limit on the descriptor number
                poller.register(fd, select.POLLIN)
                ready = poller.poll(1000 * (lim.timeout_s + self.grace_s))
                result = _read_frame(fd) if ready else None
            except (OSError, EOFError, pickle.PickleError) as exc:
                self._drop_child()
                return QueryResult(False, error=f"sandbox worker failed: {type(exc).__name__}: {exc}",
                                   error_kind="sqlite", elapsed_s=time.perf_counter() - start)
            except BaseException:  # interrupted mid-exchange (a verifier time budget, Ctrl-C): the child's
                self._drop_child()  # answer must not be read as the next query's
                raise
            if isinstance(result, QueryResult):
                return result
            self._drop_child()
            if ready:  # the child died while running the query (e.g. out of memory)
                return QueryResult(False, error="the sandbox worker died while running the query",
                                   error_kind="sqlite", elapsed_s=time.perf_counter() - start)
            self.kills += 1
            return QueryResult(False, error=f"query stopped after the {lim.timeout_s:g} s time limit "
                               "(inside one SQLite function call; its process was killed)",
                               error_kind="timeout", elapsed_s=time.perf_counter() - start)

    def close(self) -> None:
        """Stop the child process (a later query starts a new one)."""
        with self._lock:
            self._drop_child()


def _serve() -> int:
    """The child's loop: read the limits, then (db_path, sql, limits) frames; answer each with a result."""
    fd_in = sys.stdin.buffer.fileno()
    out = sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write into the result stream
    limits = _read_frame(fd_in)
    if not isinstance(limits, SandboxLimits):
        return 2
    sandbox = Sandbox(limits)
    while True:
        request = _read_frame(fd_in)
        if request is None:
            return 0
        db_path, sql, lim = request
        _write_frame(out, sandbox.run(db_path, sql, lim))


if __name__ == "__main__":
    sys.exit(_serve())
