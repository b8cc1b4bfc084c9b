"""Never silently become GDPO: an MRTPO-family run whose rewards vary but can never be replayed
(no verifier block, no per-constraint text) would train exactly as GDPO while its record says
MRTPO. The guard says so at the start and in the summary, records it in ``provenance.json``, and
``--algo.require_relevance true`` turns it into an error.

Likewise a run whose warm-up outlasts its steps (beta_n below beta at the last step, App. D) is
mostly its aggregator: the guard warns at the start and records ``warmup_warning`` in
``provenance.json`` (the run goes on: a short test run may mean it)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from algorithms.base import rewards_varying_in_group
from mrbench_core.replay_kinds import ReplayRequest

RELEVANCE_KINDS = (ReplayRequest.LEAVE_ONE_OUT, ReplayRequest.JOINT, ReplayRequest.READ_SPANS)
PROBE_EXAMPLES = 8


def warmup_shortfall(algorithm: Any, steps: int) -> str | None:
    """Why an algorithm with a beta warm-up (``effective_beta``) never reaches its full beta within
    ``steps`` steps (0-based: the last step is ``steps - 1``), or None when it does."""
    effective = getattr(algorithm, "effective_beta", None)
    beta = getattr(getattr(algorithm, "config", None), "beta", None)
    if effective is None or not beta or steps <= 0:
        return None
    last = effective(steps - 1)
    if last >= beta:
        return None
    warmup = getattr(algorithm.config, "warmup_steps", "?")
    aggregator = getattr(getattr(algorithm, "aggregator", None), "name", "gdpo").upper()
    return (f"{algorithm.name}: the {warmup}-step beta warm-up outlasts the {steps}-step run: the effective beta "
            f"reaches only {last:.3g} of {beta:g} by the last step, so the run trains mostly as its aggregator "
            f"({aggregator}) would; set --algo.warmup_steps {max(steps // 2, 1)} (or fewer) or more --schedule.steps")


class RelevanceUnavailable(RuntimeError):
    """An MRTPO-family run asked for relevance (``require_relevance``) that its data cannot give."""


class RelevanceGuard:
    def __init__(self, algorithm: Any, task: Any, record: Any):
        self.algorithm, self.task, self.record = algorithm, task, record
        self.kind = ReplayRequest(algorithm.replay_request)
        self.active = self.kind in RELEVANCE_KINDS
        self.required = bool(getattr(algorithm.config, "require_relevance", False))
        self.steps_without = 0
        self.warned = False
        self.warmup_warning: str | None = None

    def _report(self, message: str) -> None:
        if self.required:
            raise RelevanceUnavailable(f"{message} (algo.require_relevance is true)")
        if not self.warned:
            print(f"mrbench: warning: {message}", file=sys.stderr)
            self.warned = True
        self.record.update_provenance(relevance_warning=message)

    def at_start(self, examples: Sequence[Any], steps: int | None = None) -> None:
        """Probe the first examples: a task whose verdicts carry no block can never be replayed.
        With ``steps``, check that the warm-up reaches the full beta within them."""
        if not self.active:
            return
        short = warmup_shortfall(self.algorithm, steps) if steps is not None else None
        if short:
            print(f"mrbench: warning: {short}", file=sys.stderr)
            self.record.update_provenance(warmup_warning=short)
            self.warmup_warning = short
        probe = list(examples[:PROBE_EXAMPLES]) if self.kind is not ReplayRequest.READ_SPANS else []  # no blocks used
        if probe and not any(v.block for ex in probe for v in self.task.score(ex, "")):
            self._report(f"{self.algorithm.name} on task {self.task.name!r}: the first {len(probe)} examples give "
                         f"no verifier block (no per-reward text to leave out), so no reward can be replayed and "
                         f"the run trains as the aggregator (GDPO) would")

    def after_step(self, step: int, rewards: Any, group_ids: Any, replayed: bool, pairs_replayed: int) -> None:
        """A step where rewards varied, the replay ran, and no (response, reward) pair was replayed."""
        if not (self.active and replayed):
            return
        if bool(rewards_varying_in_group(rewards, group_ids).any()) and pairs_replayed == 0:
            self.steps_without += 1
            why = ("no verifier reported reading only part of a response" if self.kind is ReplayRequest.READ_SPANS
                   else "no verifier blocks")
            self._report(f"{self.algorithm.name}: at step {step + 1} rewards varied but none could be replayed "
                         f"({why}); such steps train as the aggregator (GDPO) would")

    def summary(self) -> dict[str, Any]:
        if not self.active:
            return {}
        return {"steps_without_relevance": self.steps_without,
                **({"warmup_warning": self.warmup_warning} if self.warmup_warning else {})}
