"""A wall-clock budget for a piece of work that must not stall its caller (a verifier on model output).

:func:`time_limit` arms a real-time interval timer (``setitimer(ITIMER_REAL)``); when it fires, the
work is interrupted with :class:`TimeBudgetExceeded`, raised from the SIGALRM handler at the next
bytecode or the next signal check of a running regular expression (CPython's ``re`` checks for
signals while matching). Python delivers signals to the main thread only, so outside it (and where
``setitimer`` does not exist) this block runs without a limit: there, run the work in a worker
process with a deadline instead (:mod:`mrbench_core.budget_worker`, as
:meth:`tasks.base.Task.score_within` does). A timer or SIGALRM handler that was
already installed is put back afterwards, with what remained of its time.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator


class TimeBudgetExceeded(BaseException):
    """The work ran past its budget. A BaseException, like KeyboardInterrupt: verifiers catch
    ``Exception`` around their checkers (a checker error is a failed check), which must not turn a
    timeout into an ordinary verdict."""


def can_limit() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Run the block within ``seconds`` of wall-clock time (None or <= 0: no limit)."""
    if not seconds or seconds <= 0 or not can_limit():
        yield
        return

    def on_alarm(signum: int, frame: object) -> None:
        raise TimeBudgetExceeded(f"past its time budget of {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    outer_left, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left > 0:  # an enclosing timer: give it back what it had left
            left = max(outer_left - (time.monotonic() - started), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, outer_interval)
