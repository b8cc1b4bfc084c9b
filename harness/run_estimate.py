"""The run's own time estimate, measured on the spot: after a step, what the rest of the training
should take on this machine at its present load, from the steps already timed.

``mrbench run --dry-run`` estimates before any step, from a short probe of this machine's speed
(:mod:`harness.dry_run_estimate`); the load can change after it, and long prompts it does not see. The run
itself times every phase of every step (``time_<phase>`` in ``metrics.jsonl``), so after its first
step, and again after the first step that replays (MRTPO replays nothing during the beta warm-up,
so its first steps are the cheap ones), it extrapolates:

    step n  ~  mean of (time_step - time_replay) over the steps timed
               + (mean time_replay of the steps that replayed, if step n will replay)

Whether a step replays comes from the algorithm's effective beta for that step (``beta_eff > 0``;
an algorithm without a warm-up replays every step it replays at all). While no replaying step has
been timed but later steps will replay, the estimate says that it is a lower bound.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from evals.generate_cases import duration


@dataclass
class RemainingTime:
    """What the rest of the training should take, from ``after`` timed steps."""

    after: int
    done_seconds: float
    remaining_seconds: float
    remaining_steps: int
    lower_bound: bool  # later steps replay and no replaying step was timed yet

    @property
    def total_seconds(self) -> float:
        return self.done_seconds + self.remaining_seconds

    def describe(self) -> str:
        about = "at least" if self.lower_bound else "about"
        why = " (no replaying step timed yet: the replay is not in it)" if self.lower_bound else ""
        return (f"measured on this machine after step {self.after} ({duration(self.done_seconds)} so far): "
                f"{about} {duration(self.remaining_seconds)} for the remaining {self.remaining_steps} step(s), "
                f"{duration(self.total_seconds)} of training in all{why}")

    def to_json(self) -> dict[str, Any]:
        return {"after_step": self.after, "expected_train_seconds": round(self.total_seconds, 1),
                "lower_bound": self.lower_bound}


def remaining_time(rows: Sequence[dict[str, Any]], total_steps: int, replays: Callable[[int], bool],
                   elapsed: float | None = None) -> RemainingTime:
    """From the metrics rows timed so far (``time_step``, ``time_replay``, ``replay_pairs``), the
    time of steps ``len(rows)`` .. ``total_steps - 1`` (0-based); ``replays(n)``: whether step n
    replays; ``elapsed``: the training's wall time so far (model loading included), else the steps' sum."""
    done = sum(float(r.get("time_step", 0.0)) for r in rows) if elapsed is None else float(elapsed)
    base = [float(r.get("time_step", 0.0)) - float(r.get("time_replay", 0.0)) for r in rows]
    replayed = [float(r["time_replay"]) for r in rows if r.get("replay_pairs") and r.get("time_replay") is not None]
    mean_base = sum(base) / len(base) if base else 0.0
    mean_replay = sum(replayed) / len(replayed) if replayed else 0.0
    future = range(len(rows), total_steps)
    will_replay = [n for n in future if replays(n)]
    remaining = len(future) * mean_base + len(will_replay) * mean_replay
    return RemainingTime(len(rows), done, remaining, len(future), bool(will_replay) and not replayed)


def replay_schedule(algorithm: Any) -> Callable[[int], bool]:
    """Whether the algorithm replays at step n (0-based): its effective beta is positive where it
    has a warm-up (MRTPO family), else whether it asks for forward passes at all (the token ids
    need none, and the entropy comes from the local sampler's own logits)."""
    from mrbench_core.replay_kinds import WITHOUT_FORWARD, ReplayRequest

    effective = getattr(algorithm, "effective_beta", None)
    if effective is not None:
        return lambda n: float(effective(n)) > 0
    kind = ReplayRequest(getattr(algorithm, "replay_request", ReplayRequest.NONE.value))
    replays = kind is not ReplayRequest.NONE and kind not in WITHOUT_FORWARD and kind is not ReplayRequest.ENTROPY
    return lambda n: replays


class RunClock:
    """Says :func:`remaining_time` after the first step and after the first step that replays, and
    keeps each estimate (``time_estimates`` in the run's summary, beside ``train_seconds``)."""

    def __init__(self, total_steps: int, algorithm: Any, start: int = 0, say: Callable[[str], None] | None = print,
                 started: float | None = None):
        """``start``: the steps a resumed run had done; the rows given are this session's.
        ``started``: ``time.time()`` when the training began (loading the model), so the estimate
        counts what came before the first step too."""
        schedule = replay_schedule(algorithm)
        self.started = started
        self.total_steps, self.say = total_steps - start, say
        self.replays = lambda n: schedule(n + start)
        self.estimates: list[RemainingTime] = []
        self._replay_seen = False

    def after_step(self, rows: Sequence[dict[str, Any]]) -> RemainingTime | None:
        if not rows or len(rows) >= self.total_steps:
            return None
        first_replay = bool(rows[-1].get("replay_pairs")) and not self._replay_seen
        self._replay_seen = self._replay_seen or bool(rows[-1].get("replay_pairs"))
        if len(rows) != 1 and not first_replay:
            return None
        elapsed = time.time() - self.started if self.started is not None else None
        found = remaining_time(rows, self.total_steps, self.replays, elapsed)
        self.estimates.append(found)
        if self.say is not None:
            self.say(f"mrbench: {found.describe()}")
        return found

    def summary(self) -> dict[str, Any]:
        return {"time_estimates": [e.to_json() for e in self.estimates]} if self.estimates else {}
