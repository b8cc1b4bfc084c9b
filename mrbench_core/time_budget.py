"""A time budget for a piece of work that must not stall its caller (a verifier on model output).

The budget is charged in CPU seconds, not wall-clock seconds: a verifier that needs 0.1 s of CPU
gets it whether the machine is idle or its cores are shared with other work, so a verdict does not
depend on the machine's load. A verifier that waits without computing (a sleep, a lock, a pipe)
uses no CPU time; it is stopped by a wall-clock cap :data:`WALL_FACTOR` times the budget.

:func:`time_limit` arms two interval timers: ``ITIMER_PROF`` (this process's CPU time, user and
system, all its threads) for the budget and ``ITIMER_REAL`` for the cap; when either fires, the
work is interrupted with :class:`TimeBudgetExceeded`, raised from the signal handler at the next
bytecode or the next signal check of a running regular expression (CPython's ``re`` checks for
signals while matching). Python delivers signals to the main thread only, so outside it (and where
``setitimer`` does not exist) this block runs without a limit: there, run the work in a worker
process with a deadline instead (:mod:`mrbench_core.budget_worker`, as
:meth:`tasks.base.Task.score_within` does, which charges the worker's own CPU clock the same way).
Timers or handlers that were already installed are put back afterwards, with what remained of
their time.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator

#: the wall-clock cap of a budget of CPU seconds, as a multiple of it (a verifier that waits uses
#: no CPU time; one that computes gets its budget even where other work takes 3 of every 4 cycles)
WALL_FACTOR = 4.0


class TimeBudgetExceeded(BaseException):
    """The work ran past its budget. A BaseException, like KeyboardInterrupt: verifiers catch
    ``Exception`` around their checkers (a checker error is a failed check), which must not turn a
    timeout into an ordinary verdict."""


def can_limit() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def wall_cap(seconds: float) -> float:
    """The wall-clock seconds a budget of ``seconds`` CPU seconds may take at most."""
    return WALL_FACTOR * seconds


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Run the block within ``seconds`` of this process's CPU time and :func:`wall_cap` of it in
    wall-clock time (None or <= 0: no limit)."""
    if not seconds or seconds <= 0 or not can_limit():
        yield
        return

    def on_timer(signum: int, frame: object) -> None:
        what = "CPU time" if signum == signal.SIGPROF else f"wall-clock cap of {wall_cap(seconds):g} s"
        raise TimeBudgetExceeded(f"past its time budget of {seconds:g} s ({what})")

    timers = ((signal.ITIMER_PROF, signal.SIGPROF, seconds), (signal.ITIMER_REAL, signal.SIGALRM, wall_cap(seconds)))
    outer = []
    started = time.monotonic()
    for which, signum, limit in timers:
        previous = signal.signal(signum, on_timer)
        outer.append((which, signum, previous, *signal.setitimer(which, limit)))
    try:
        yield
    finally:
        for which, _, _, _, _ in outer:
            signal.setitimer(which, 0)
        for which, signum, previous, left, interval in outer:
            signal.signal(signum, previous)
            if left > 0:  # an enclosing timer: give it back what it had left (by the wall clock, at most)
                signal.setitimer(which, max(left - (time.monotonic() - started), 1e-3), interval)
