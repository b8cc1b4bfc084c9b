"""Say so when a run cannot learn: no reward varies within any group, step after step.

A group whose rewards are all constant gets advantage 0 on every token, so a step where every
group is like that (``frac_groups_no_signal == 1`` in its metrics row) changes nothing but the
optimiser's state. After ``schedule.no_signal_steps`` such steps in a row (default 2) the run warns
once on the terminal; with ``schedule.stop_without_signal: true`` it also stops there (after its
checkpoint, then evaluates and finishes as usual). The run summary records what happened.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, TextIO


class SignalWatch:
    """Counts consecutive steps without a learning signal from the metrics rows."""

    def __init__(self, steps: int = 2, stop: bool = False, out: TextIO | None = None):
        if steps < 1:
            raise ValueError(f"schedule.no_signal_steps must be >= 1, got {steps}")
        self.steps, self.stop, self.out = int(steps), bool(stop), out
        self.run = 0  # consecutive steps without signal, up to the last one seen
        self.without: list[int] = []  # every step without signal
        self.shares: list[float] = []
        self.warned_at: int | None = None
        self.stopped_at: int | None = None

    def resume(self, rows: Iterable[dict[str, Any]]) -> None:
        """Replay the rows of the steps a resumed run already has (no warning printed again)."""
        for row in rows:
            self._see(row)
            if self.run >= self.steps and self.warned_at is None:
                self.warned_at = int(row["step"])

    def _see(self, row: dict[str, Any]) -> bool:
        share = row.get("frac_groups_no_signal")
        if share is None:
            return False
        self.shares.append(float(share))
        if float(share) >= 1.0:
            self.run += 1
            self.without.append(int(row["step"]))
        else:
            self.run = 0
        return self.run >= self.steps

    def after_step(self, row: dict[str, Any]) -> bool:
        """See one step's row; warn when the run has gone ``steps`` steps without signal; True to stop."""
        if not self._see(row):
            return False
        step = int(row["step"])
        if self.warned_at is None:
            self.warned_at = step
            advice = ("stopping (schedule.stop_without_signal)" if self.stop else
                      "check the rewards in samples.jsonl, or stop such runs with --schedule.stop_without_signal true")
            print(f"mrbench: warning: no learning signal: no reward varied within any group for {self.run} "
                  f"consecutive steps (steps {step - self.run + 1}-{step}); every advantage is 0; {advice}",
                  file=self.out or sys.stderr, flush=True)
        if self.stop:
            self.stopped_at = step
        return self.stop

    def summary(self) -> dict[str, Any]:
        """What the run summary records."""
        return {"steps_without_signal": len(self.without),
                "frac_groups_no_signal_mean": sum(self.shares) / len(self.shares) if self.shares else None,
                "no_signal_warning_step": self.warned_at,
                "stopped_without_signal": self.stopped_at}
