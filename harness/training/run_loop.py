"""The run loop, written once: a backend that drives the training step itself (``local``, a plugin's
engine) runs the shared step (:class:`harness.training.step.Step`) for each step on its engine, and
everything around the steps is here:

- resume: the engine's checkpoint (``load``: steps done, data position), then the metrics rows
  and credit rows of later steps dropped, and the no-signal watch replaying the rows kept;
- SIGTERM/SIGINT (:mod:`harness.training.stop_signal`: one signal, handled once): the step in
  progress finishes, a checkpoint is written and :class:`TrainingInterrupted` is raised;
- checkpoints: the engine's ``save`` every ``schedule.checkpoint_every`` steps, on a stop and
  after the last step;
- no learning signal (:class:`harness.no_signal.SignalWatch`): a warning after
  ``schedule.no_signal_steps`` steps without it, and with ``schedule.stop_without_signal`` a stop
  there (after its checkpoint; the run then evaluates and finishes as usual);
- the time left, measured after the first step and the first replaying one
  (:class:`harness.run_estimate.RunClock`), and the progress bar;
- the summary parts (:meth:`RunLoop.summary`).

A feature added here (a guard between steps, a log) reaches every backend that runs the loop. A
framework that runs its own loop (openrlhf) calls the Step's phases from its hooks instead.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from harness.no_signal import SignalWatch
from harness.run_estimate import RunClock
from harness.training import stop_signal
from harness.training.engine import Engine
from harness.training.step import Step
from harness.training.step_metrics import run_summary

if TYPE_CHECKING:
    from harness.records import RunRecord
    from tasks.base import Example


class TrainingInterrupted(KeyboardInterrupt):
    """Raised after a checkpoint was written in response to SIGTERM/SIGINT; rerun to resume."""


class RunLoop:
    """Steps ``start`` .. ``schedule.steps - 1`` of one run: ``step`` on ``engine``, writing ``record``.

    ``started``: ``time.time()`` when the training began (loading included), for the summary's
    ``train_seconds`` and the time estimates."""

    def __init__(self, step: Step, engine: Engine, record: RunRecord, started: float | None = None,
                 stop_after: int | None = None):
        self.step, self.engine, self.record = step, engine, record
        #: run only steps up to this one and write no checkpoint (``mrbench verify``); None: every step
        self.stop_after = stop_after
        self.started = time.time() if started is None else started
        schedule = step.cfg.schedule
        self.watch = SignalWatch(schedule.no_signal_steps, schedule.stop_without_signal)
        self.start: int | None = None  # steps done before this session (set by resume)
        self.stop: str | None = None  # the stop a signal asked for (its name), once one came
        self.clock: RunClock | None = None

    def resume(self) -> int:
        """The engine's checkpoint, if any (``load``), into the engine and the step's data position;
        the rows of later steps dropped; the steps done. :meth:`run` calls it unless a backend did
        (one that starts something from the resumed weights before the first step)."""
        if self.start is None:
            self.start, self.step.position = self.engine.load(self.record) or (0, 0)
            self.step.resume_at(self.start)
            self.watch.resume(self.record.metrics())
        return self.start

    def run(self, examples: Sequence[Example]) -> None:
        """Run the remaining steps (:meth:`run_step`), checkpointing as the module docstring says;
        raises :class:`TrainingInterrupted` on a signal."""
        start, cfg = self.resume(), self.step.cfg
        handlers = {s: signal.signal(s, self.on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            from tqdm.auto import tqdm

            steps = cfg.schedule.steps
            last = steps if self.stop_after is None else min(steps, self.stop_after)  # the bar and estimates too
            bar = tqdm(total=last, initial=start, desc=f"{cfg.algo.name} on {cfg.task.name}", unit="step",
                       dynamic_ncols=True)
            self.clock = RunClock(last, self.step.algorithm, start=start, say=bar.write, started=self.started)
            rows: list[dict[str, Any]] = []
            for n in range(start, last):
                row = self.run_step(n, examples)
                rows.append(row)
                self.clock.after_step(rows)
                bar.update(1)
                bar.set_postfix(reward=f"{row['reward_mean']:.3f}", replay=f"{row['replay_share']:.2f}",
                                s=f"{row['time_step']:.0f}")
                every = cfg.schedule.checkpoint_every
                stop_now = self.watch.after_step(row)
                keeps_state = self.stop_after is None  # a rerun of the first steps (verify) keeps none
                if keeps_state and ((every and (n + 1) % every == 0) or self.stop or n + 1 == steps or stop_now):
                    self.engine.save(self.record, n + 1, self.step.position)
                if stop_now:
                    break
                if self.stop:
                    raise TrainingInterrupted(f"{self.stop}: checkpoint written after step {n + 1}; "
                                              f"rerun the same command to resume")
            bar.close()
        finally:
            for s, handler in handlers.items():
                signal.signal(s, handler)

    def run_step(self, n: int, examples: Sequence[Example]) -> dict[str, Any]:
        """Training step ``n`` (0-based): the Step on the engine; returns its metrics row (tests
        patch this to act between steps)."""
        return self.step.run(self.engine, n, examples)

    def on_signal(self, signum: int, frame: Any) -> None:
        """The SIGTERM/SIGINT handler while the loop runs."""
        self.stop = stop_signal.stop_reason(self.stop, signum)  # one signal, handled once

    def summary(self) -> dict[str, Any]:
        """The run summary's parts from the loop: the metrics' summary (``run_summary``, with the
        training's wall time until now), the time estimates and what the no-signal watch saw."""
        clock = self.clock.summary() if self.clock is not None else {}
        return {**run_summary(self.record.metrics(), time.time() - self.started), **clock, **self.watch.summary()}
