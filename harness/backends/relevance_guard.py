"""Never silently become GDPO: an MRTPO-family run whose rewards vary but can never be replayed
(no verifier block, no per-constraint text) would train exactly as GDPO while its record says
MRTPO. The guard says so at the start and in the summary, records it in ``provenance.json``, and
``--algo.require_relevance true`` turns it into an error."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from algorithms.base import rewards_varying_in_group
from mrbench_core.replay_kinds import ReplayRequest

RELEVANCE_KINDS = (ReplayRequest.LEAVE_ONE_OUT, ReplayRequest.JOINT, ReplayRequest.READ_SPANS)
PROBE_EXAMPLES = 8


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

    def _report(self, message: str) -> None:
        if self.required:
            raise RelevanceUnavailable(f"{message} (algo.require_relevance is true)")
        if not self.warned:
            print(f"mrbench: warning: {message}", file=sys.stderr)
            self.warned = True
        self.record.update_provenance(relevance_warning=message)

    def at_start(self, examples: Sequence[Any]) -> None:
        """Probe the first examples: a task whose verdicts carry no block can never be replayed."""
        if not self.active:
            return
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
        return {"steps_without_relevance": self.steps_without} if self.active else {}
