"""A task's verifiers under the per-response time budget (:meth:`tasks.base.Task.score_within`).

Where processes exist (POSIX), a task that pickles is scored on a copy of it in a worker process
(:mod:`mrbench_core.budget_worker`), in every thread and every command alike: training on either
backend, ``mrbench score`` and the benchmarks that score through their task. The budget is the
worker's own CPU time, with a wall-clock cap :data:`~mrbench_core.time_budget.WALL_FACTOR` times
longer for a verifier that waits, so that a verdict does not depend on how busy the machine is.
Past it, the worker is killed with whatever the verifier started (its process group), also where
the verifier sits inside one C call that no signal handler could interrupt. The worker warms the
task up (:meth:`~tasks.base.Task.warm_up`) when it starts, outside any budget.

A task that does not pickle is scored in this process, warmed up first, on the main thread under
:func:`mrbench_core.time_budget.time_limit` (this process's CPU time, the same cap), after one
warning that there the budget cannot stop a verifier inside one C call or end the processes it
starts; in another thread it has no limit.

Outcomes other than a verdict: past the budget every reward gets its failure value with the reason
``timeout`` (``retries`` more tries first, for offline scoring where a second try costs only time);
a worker that dies during the call (an exit, an out-of-memory kill) gives the failure values with the
reason ``verifier process ended``.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from typing import Any

from mrbench_core.budget_worker import WorkerDied, WorkerError, pool_for
from mrbench_core.time_budget import TimeBudgetExceeded, can_limit, time_limit

#: the reason of the verdicts of a response whose verifier process ended during the call
DIED_REASON = "verifier process ended"

_HERE: dict[int, bool] = {}  # id(task) -> warmed up yet, for the tasks scored in this process
_LOCK = threading.Lock()


def score_within(task: Any, example: Any, response: str, seconds: float | None, retries: int = 0) -> list[Any]:
    """``task.score(example, response)`` within ``seconds`` of CPU time (None or <= 0: no limit);
    see the module docstring."""
    if not seconds or seconds <= 0:
        return task.score(example, response)
    for _ in range(retries + 1):
        try:
            if os.name == "posix" and id(task) not in _HERE:
                try:
                    return pool_for(task).call("score", (example, response), seconds)
                except WorkerDied:
                    raise
                except (TypeError, WorkerError) as exc:  # it does not pickle, or its copy cannot load
                    _score_here(task, f"{exc}")
            _warm_up_here(task)
            if not can_limit():
                return task.score(example, response)
            with time_limit(seconds):
                return task.score(example, response)
        except TimeBudgetExceeded:
            continue
        except WorkerDied as exc:
            return task.failure_verdicts(example, DIED_REASON, {"exit_code": exc.exit_code})
    return task.timeout_verdicts(example, seconds)


def _score_here(task: Any, why: str | None) -> bool:
    """Mark ``task`` as scored in this process (saying why once, where ``why`` is given); True the
    first time."""
    with _LOCK:
        if id(task) in _HERE:
            return False
        _HERE[id(task)] = False
        weakref.finalize(task, _HERE.pop, id(task), None)
    if why:
        print(f"mrbench: warning: task {getattr(task, 'name', type(task).__name__)!r} is scored in this process "
              f"({why}): its time budget cannot stop a verifier inside one C call, nor end the processes a "
              f"verifier starts", file=sys.stderr)
    return True


def _warm_up_here(task: Any) -> None:
    """The task's :meth:`~tasks.base.Task.warm_up`, once per task object scored in this process."""
    _score_here(task, None)
    with _LOCK:
        if _HERE.get(id(task)):
            return
        _HERE[id(task)] = True
    task.warm_up()
