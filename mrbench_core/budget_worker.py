"""A time budget that holds in any thread: the work runs in a worker process, which is killed when
its time is up.

:func:`mrbench_core.time_budget.time_limit` interrupts the work with a signal, which Python
delivers to the main thread only, between bytecodes: a thread cannot be stopped from outside, and
neither can one C call that runs for minutes, nor the processes the work started. So
:class:`WorkerPool` runs the calls on a copy of a target object in child processes instead, from
any thread (:mod:`tasks.verifier_budget` scores every task that pickles this way, in the openrlhf
backend's vLLM worker threads and on the local backend's main thread alike): each call may use
``seconds`` of the child's CPU time (its own clock, read from ``/proc``: a verdict does not depend
on how busy the machine is) and :func:`~mrbench_core.time_budget.wall_cap` of wall-clock time (a
call that waits without computing); past either the child is killed (SIGKILL, with every process it started: it
leads its own process group), reaped, and replaced at the next call, and the call raises
:class:`WorkerOverran` (a :class:`~mrbench_core.time_budget.TimeBudgetExceeded`). Where the child's
CPU clock cannot be read (no ``/proc``), or the caller asks for it (``wall_clock``), the budget is
``seconds`` of wall-clock time. A child that dies during a call (an exit, an out-of-memory kill)
raises :class:`WorkerDied`; a call interrupted while it waits (an alarm or Ctrl-C in the parent)
kills its child, so that no answer is read as another call's. Nothing is left running: a pool's
children exit when its pipes close (the parent ending, :meth:`WorkerPool.close`, or interpreter
exit), and closing a worker also kills what its calls started and left running.

It is mrbench's one kill-on-overrun protocol: the verifier budget of a response
(:mod:`tasks.verifier_budget`) and text2sql's hard stop of a query stuck inside one SQLite call
(:mod:`tasks.text2sql.worker`, on wall-clock time) both run on it.

A child is a fresh interpreter (``python -m mrbench_core.budget_worker``, the parent's
``sys.path`` and environment): no fork of a process holding threads, GPU contexts or locks. It gets
the target pickled once, at its start (its start-up is not counted in any call's budget), then
one pickled ``(method, args)`` per call over its own pipes (the child's stdout and stderr stay the
parent's, for whatever the work prints).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
import time
import weakref
from typing import Any

from mrbench_core.time_budget import TimeBudgetExceeded, wall_cap

#: a child's start-up (interpreter, imports, unpickling the target) may take this long
START_TIMEOUT_S = 120.0
_HEADER = struct.Struct("<Q")


class WorkerError(RuntimeError):
    """A worker process could not start, or ended without answering."""


class WorkerOverran(TimeBudgetExceeded):
    """A call ran past its budget in a worker process; the worker was killed."""


class WorkerDied(WorkerError):
    """The worker process ended during a call (``exit_code``: its exit status, negative for a signal)."""

    def __init__(self, message: str, exit_code: int | None):
        super().__init__(message)
        self.exit_code = exit_code


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU seconds process ``pid`` has used (``/proc/<pid>/stat``), None where unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read()
        fields = text[text.rindex(b")") + 2:].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, ValueError, IndexError):
        return None


def _write(fd: int, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(_HEADER.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, n: int, deadline: float | None) -> bytes | None:
    """``n`` bytes from ``fd``, or None when the deadline passes first; EOFError when it closes."""
    chunks, left = [], n
    while left:
        if deadline is not None:
            wait = deadline - time.monotonic()
            poller = select.poll()  # poll, not select: no FD_SETSIZE limit on the descriptor number
            poller.register(fd, select.POLLIN)
            if wait <= 0 or not poller.poll(wait * 1000):
                return None
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read(fd: int, deadline: float | None = None) -> tuple[bool, Any]:
    """``(True, object)``, or ``(False, None)`` when the deadline passed first."""
    header = _read_exactly(fd, _HEADER.size, deadline)
    if header is None:
        return False, None
    body = _read_exactly(fd, _HEADER.unpack(header)[0], None)  # the rest follows the header
    return True, pickle.loads(body)


class _Worker:
    """One child process holding a copy of the target."""

    def __init__(self, target_bytes: bytes):
        down_r, self._down = os.pipe()  # parent -> child
        self._up, up_w = os.pipe()  # child -> parent
        try:  # its own process group: a kill also ends whatever the work started
            self.proc = subprocess.Popen([sys.executable, "-m", __name__, str(down_r), str(up_w)],
                                         pass_fds=(down_r, up_w), stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        except BaseException:
            os.close(self._down)
            os.close(self._up)
            raise
        finally:
            os.close(down_r)
            os.close(up_w)
        try:
            _write(self._down, {"path": list(sys.path), "target": target_bytes})
            answered, reply = _read(self._up, time.monotonic() + START_TIMEOUT_S)
        except (EOFError, OSError):
            answered, reply = True, None
        if not answered or reply != ("ready", None):
            self.kill()
            why = reply[1] if isinstance(reply, tuple) and reply[0] == "error" else None
            raise WorkerError(f"the scoring worker process did not start (exit code {self.proc.returncode})"
                              + (f": {why}" if why else ""))

    def call(self, method: str, args: tuple, seconds: float, wall_clock: bool = False) -> Any:
        try:
            _write(self._down, (method, args))
            answered, reply = _read(self._up, time.monotonic() + seconds) if wall_clock else self._answer(seconds)
        except (EOFError, OSError) as exc:
            self.kill()
            raise WorkerDied(f"the worker process ended during {method}() (exit code {self.proc.returncode})",
                             self.proc.returncode) from exc
        except BaseException:  # interrupted while it waits: its answer must not be read as the next call's
            self.kill()
            raise
        if not answered:
            self.kill()
            raise WorkerOverran(f"past its time budget of {seconds:g} s")
        kind, value = reply
        if kind == "error":
            raise value
        return value

    def _answer(self, seconds: float) -> tuple[bool, Any]:
        """The reply within ``seconds`` of the child's CPU time and the wall-clock cap (see the module
        docstring); ``(False, None)`` past either."""
        start = time.monotonic()
        spent_before = cpu_seconds(self.proc.pid)
        if spent_before is None:  # the child's clock cannot be read here: wall-clock seconds
            return _read(self._up, start + seconds)
        cap = start + wall_cap(seconds)
        while True:
            spent = cpu_seconds(self.proc.pid)
            left = seconds - (spent - spent_before) if spent is not None else 0.0
            wait = min(left, cap - time.monotonic())
            if wait <= 0:
                return False, None
            answered, reply = _read(self._up, time.monotonic() + max(wait, 0.01))
            if answered:
                return answered, reply

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def _close_pipes(self) -> None:
        for fd in (self._down, self._up):
            try:
                os.close(fd)
            except OSError:
                pass
        self._down = self._up = -1

    def _kill_group(self) -> None:
        """SIGKILL to the worker and any process it started (its own process group), then reap it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except OSError:
                self.proc.kill()
        self.proc.wait()

    def kill(self) -> None:
        self._close_pipes()
        self._kill_group()

    def close(self) -> None:
        """Close its pipes: the child reads EOF and exits (killed if it has not within 5 s); then what
        its calls started and left running, the rest of its process group, is killed too."""
        self._close_pipes()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:  # the group is empty: nothing was left
            pass
        self.proc.wait()


def _pickled(target: Any) -> bytes:
    try:
        return pickle.dumps(target, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # whatever the object's pickling raises
        raise TypeError(f"{type(target).__name__} cannot be copied into a worker process (pickle: {exc})") from exc


class WorkerPool:
    """Up to ``size`` worker processes, each with a copy of ``target`` (pickled now), that run
    ``target.method(*args)`` within a time budget (see the module docstring). Thread-safe: a call
    takes an idle worker, or starts one while fewer than ``size`` exist, or waits for one (the
    wait is not counted in its budget)."""

    def __init__(self, target: Any, size: int = 2, pickled: bytes | None = None):
        self._target = pickled if pickled is not None else _pickled(target)
        self.size = max(1, size)
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()
        self._closed = False
        _POOLS.add(self)

    def _take(self) -> _Worker:
        with self._cond:
            while True:
                if self._closed:
                    raise WorkerError("the worker pool is closed")
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive:
                        return worker
                    worker.kill()
                    self._count -= 1
                if self._count < self.size:
                    self._count += 1
                    break
                self._cond.wait()
        try:
            return _Worker(self._target)
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _give_back(self, worker: _Worker, healthy: bool) -> None:
        with self._cond:
            if healthy and not self._closed:
                self._idle.append(worker)
            else:
                worker.kill()
                self._count -= 1
            self._cond.notify()

    def call(self, method: str, args: tuple, seconds: float, wall_clock: bool = False) -> Any:
        """``target.method(*args)`` in a worker within ``seconds`` of its CPU time (of wall-clock time
        with ``wall_clock``); raises :class:`WorkerOverran` past it (the worker is killed)."""
        worker = self._take()
        healthy = False
        try:
            result = worker.call(method, args, seconds, wall_clock)
            healthy = True
            return result
        except (TimeBudgetExceeded, WorkerError):
            raise
        except BaseException:  # the work's own exception, raised in the child: the worker is fine
            healthy = worker.alive
            raise
        finally:
            self._give_back(worker, healthy and worker.alive)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.close()


_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()
#: worker processes per pool of :func:`pool_for`: one can sit out a stalled call while another answers
POOL_SIZE = 2
_KEY_OF: dict[int, str] = {}  # id(target) -> the digest of its pickled bytes
_BY_KEY: dict[str, WorkerPool] = {}  # digest -> the pool of the live targets that pickle to those bytes
_USERS: dict[str, int] = {}  # digest -> how many live targets use its pool
_BY_OBJECT_LOCK = threading.RLock()  # a finalizer may run while this thread holds it


def pool_for(target: Any) -> WorkerPool:
    """The pool of copies of ``target``, made (and ``target`` pickled) at the first call for it; live
    objects that pickle to the same bytes share one (a run's task and its end-of-run evaluation's
    copy of it start one worker). Closed when the last of them is garbage-collected."""
    with _BY_OBJECT_LOCK:
        key = _KEY_OF.get(id(target))
        pool = _BY_KEY.get(key) if key is not None else None
        if pool is not None and not pool.closed:
            return pool
    data = _pickled(target)
    digest = hashlib.sha256(data).hexdigest()
    with _BY_OBJECT_LOCK:
        if id(target) not in _KEY_OF:
            _KEY_OF[id(target)] = digest
            _USERS[digest] = _USERS.get(digest, 0) + 1
            weakref.finalize(target, _forget, id(target), digest)
        pool = _BY_KEY.get(digest)
        if pool is None or pool.closed:
            pool = _BY_KEY[digest] = WorkerPool(target, POOL_SIZE, pickled=data)
    return pool


def _forget(key: int, digest: str) -> None:
    with _BY_OBJECT_LOCK:
        _KEY_OF.pop(key, None)
        _USERS[digest] = _USERS.get(digest, 1) - 1
        if _USERS[digest] > 0:
            return
        del _USERS[digest]
        pool = _BY_KEY.pop(digest, None)
    if pool is not None:
        pool.close()


@atexit.register
def _close_all() -> None:
    for pool in list(_POOLS):
        pool.close()


def _serve(down: int, up: int) -> None:
    """The child's loop: the target (warmed up: its ``warm_up()``, when it has one, loads what a
    first call would load lazily, so that no call's budget pays for it), then one call at a time
    until the parent closes the pipe. Ctrl-C reaches the whole terminal's process group: the
    parent decides, the worker ignores it."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        _, init = _read(down)
        sys.path[:] = init["path"]
        target = pickle.loads(init["target"])
        warm_up = getattr(target, "warm_up", None)
        if callable(warm_up):
            warm_up()
    except EOFError:
        return
    except Exception as exc:  # noqa: BLE001  (reported to the parent, which raises it)
        _write(up, ("error", f"{type(exc).__name__}: {exc}"))
        return
    _write(up, ("ready", None))
    while True:
        try:
            _, (method, args) = _read(down)
        except EOFError:
            return
        try:
            reply = ("ok", getattr(target, method)(*args))
        except BaseException as exc:  # noqa: BLE001  (the parent re-raises it)
            reply = ("error", exc)
        try:
            _write(up, reply)
        except (pickle.PicklingError, TypeError, AttributeError) as exc:
            _write(up, ("error", RuntimeError(f"{method}() answered with something that cannot be pickled: {exc}")))


if __name__ == "__main__":
    _serve(int(sys.argv[1]), int(sys.argv[2]))
