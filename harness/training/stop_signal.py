"""What a training process does when SIGTERM or SIGINT arrives: one signal, handled once.

The first signal asks the backend to stop after the step in progress, write a checkpoint and raise
:class:`~harness.training.run_loop.TrainingInterrupted` (:func:`stop_reason`). What a repeat does
depends on who sends it:

- in an interactive run a second Ctrl-C is a person insisting: :class:`KeyboardInterrupt` at
  once, without a checkpoint (the last periodic one stays);
- in a sweep cell (:data:`mrbench_core.sweep_cell.CELL_ENV`, set by the sweep) repeats are
  ignored. The sweep escalates with SIGKILL itself after a grace period, and a killed sweep makes
  the kernel send the parent-death signal once per exiting thread of the parent
  (``PR_SET_PDEATHSIG`` follows the thread that forked, and a dying thread hands its children on
  to the next one), so a cell sees the "same" stop several times in a row; treating those as a
  hard stop lost the steps a cell had finished since its last checkpoint.
"""

from __future__ import annotations

import signal

from mrbench_core.sweep_cell import is_sweep_cell


def stop_reason(current: str | None, signum: int) -> str:
    """The stop reason once signal ``signum`` has arrived, ``current`` being the reason already
    recorded (None before the first signal). Call it from the signal handler and keep its result.

    Raises KeyboardInterrupt for a repeated signal in an interactive run (the hard stop)."""
    if current is None:
        return signal.Signals(signum).name
    if is_sweep_cell():
        return current  # the stop already asked for stands; its checkpoint will be written
    raise KeyboardInterrupt(f"{signal.Signals(signum).name} again: stopping without a checkpoint")
