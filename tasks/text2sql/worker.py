"""A hard wall-clock stop for sandboxed queries: they run in a worker process that is killed on overrun.

Why: the progress handler of :mod:`tasks.text2sql.sandbox` stops a query *between* SQLite
virtual-machine instructions. One instruction can still run for a long time: a built-in function
called once on large arguments does not return to the VM until it is done. ``instr`` and
``replace`` of long strings compare O(n * m) bytes (a 4 MB haystack and a 100 kB needle take about
28 s), and ``printf('%.*c', 2000000000, 'x')`` loops two billion times (about 8 s). Neither the
progress handler nor ``sqlite3_interrupt`` reaches inside such a call, and Python cannot stop a
thread, so the only hard stop is a process boundary.

:class:`WorkerSandbox` has the interface of :class:`~tasks.text2sql.sandbox.Sandbox`. Its queries
run in an ordinary ``Sandbox`` with the same limits, so every other guard (read-only, authorizer,
progress handler, row and byte caps) still applies, in one long-lived worker process of mrbench's
kill-on-overrun protocol (:class:`mrbench_core.budget_worker.WorkerPool`). The parent waits
``timeout_s + grace_s`` of wall-clock time (the query's limit is wall-clock time); past that the
worker is killed, the query reports ``error_kind="timeout"``, and the next query starts a fresh
worker. Cost: one pickle round trip per query (tens of microseconds) and one process start per
kill. POSIX only.

A task is scored in a worker of the same protocol (:mod:`tasks.verifier_budget`), so the sandbox's
worker is then a worker inside a worker, on purpose: the response's budget counts the scoring
worker's own CPU time, and a query only its own limit. Run in the scoring worker itself, a query
that reaches its 5 s limit would spend the response's whole 5 s budget, and the response would get
every reward's failure value (``timeout``, its format reward too) instead of the verdict of a query
stopped at its limit.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any

from mrbench_core.budget_worker import WorkerError, WorkerOverran, WorkerPool
from tasks.text2sql.sandbox import QueryResult, Sandbox, SandboxLimits


class WorkerSandbox(Sandbox):
    """A :class:`Sandbox` whose queries run in a worker process, killed ``grace_s`` after the time limit."""

    def __init__(self, limits: SandboxLimits | None = None, grace_s: float = 0.5) -> None:
        super().__init__(limits)
        self.grace_s = grace_s
        self._lock = threading.Lock()
        self._pool: WorkerPool | None = None
        self._owner = os.getpid()
        self._finalizer: Any = None
        self.kills = 0  # how many times a worker was killed for overrunning

    def __getstate__(self) -> dict[str, Any]:
        """A copy for another process: the limits, without this process's worker or lock."""
        state = super().__getstate__()
        for key in ("_lock", "_pool", "_owner", "_finalizer"):
            del state[key]
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._lock, self._pool, self._owner, self._finalizer = threading.Lock(), None, os.getpid(), None

    def _workers(self) -> WorkerPool:
        """This process's worker pool (one worker; a forked child never uses its parent's)."""
        with self._lock:
            if self._pool is None or self._owner != os.getpid():
                self._pool, self._owner = WorkerPool(Sandbox(self.limits), size=1), os.getpid()
                self._finalizer = weakref.finalize(self, self._pool.close)  # its worker ends with this sandbox
            return self._pool

    def run(self, db_path: str, sql: str, limits: SandboxLimits | None = None) -> QueryResult:
        """As :meth:`Sandbox.run`, in the worker process; never raises on ``sql``."""
        lim = limits or self.limits
        start = time.perf_counter()
        try:
            return self._workers().call("run", (db_path, sql, lim), lim.timeout_s + self.grace_s, wall_clock=True)
        except WorkerOverran:
            self.kills += 1
            return QueryResult(False, error=f"query stopped after the {lim.timeout_s:g} s time limit "
                               "(inside one SQLite function call; its process was killed)",
                               error_kind="timeout", elapsed_s=time.perf_counter() - start)
        except WorkerError as exc:  # it could not start, or died while running the query (out of memory)
            return QueryResult(False, error=f"the sandbox worker failed: {exc}", error_kind="sqlite",
                               elapsed_s=time.perf_counter() - start)

    def close(self) -> None:
        """Stop the worker process (a later query starts a new one)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None and self._owner == os.getpid():
            self._finalizer.detach()
            pool.close()
