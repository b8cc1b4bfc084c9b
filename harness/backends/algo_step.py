"""The algorithm's part of one training step, shared by the backends that train with mrbench's
algorithms (``local`` and ``openrlhf``):

1. :func:`plan_step`: what the algorithm asks of step ``n``, decided once per step: its replay
   kind and whether the replay runs at this step (``needs_replay``: MRTPO's beta_n > 0, CoRT's
   lambda_n > 0);
2. the replay (:mod:`harness.replay_builders`), which each backend runs where its old policy lives,
   giving a :class:`~harness.replay_builders.ReplayResult` (``ReplayResult.nothing_replayed`` when
   the plan says no);
3. :func:`step_advantages`: the scored batch and the replay's statistics as one
   :class:`algorithms.RolloutBatch` (``ReplayResult.to_batch``, the one place it is built) and the
   algorithm's :class:`algorithms.Advantages` from one call, which the update, the metrics row and
   the credit log all read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mrbench_core.replay_kinds import ReplayRequest


@dataclass(frozen=True)
class StepPlan:
    """What the algorithm asks of one step (0-based ``step``)."""

    step: int
    request: ReplayRequest
    replay: bool  # the replay runs at this step

    @property
    def teacher(self) -> bool:
        """The replay runs the reference policy (OPSD's teacher), not the old policy."""
        return self.replay and self.request is ReplayRequest.TEACHER

    @property
    def sampling_prompt_replayed(self) -> bool:
        """The replay needs the old policy's pass over the sampling prompt (MRTPO's P_all where the
        task's P_all is the prompt, CoRT's x+), which the sampler can record instead."""
        return self.replay and self.request in (ReplayRequest.LEAVE_ONE_OUT, ReplayRequest.RUBRIC)


def plan_step(algorithm: Any, step: int) -> StepPlan:
    """The :class:`StepPlan` of ``step``: ``algorithm.needs_replay`` is asked here, once."""
    request = ReplayRequest(algorithm.replay_request)
    replay = request is not ReplayRequest.NONE and bool(algorithm.needs_replay(step))
    return StepPlan(step, request, replay)


def step_advantages(algorithm: Any, batch: Any) -> Any:
    """The algorithm's :class:`algorithms.Advantages` for ``batch`` (one call; token advantages in
    float32)."""
    from algorithms import Advantages

    result = Advantages.of(algorithm.advantages(batch))
    result.tokens = result.tokens.float()
    return result
