"""What a backend supplies to the shared step: its :class:`Engine` (sampling, the replay's forward
passes, the update, the weight sync, save and load), and the :class:`StepPlan` each operation is
given (what the algorithm asks of the step: its replay kind, and whether the replay runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import torch

from harness.replay_builders import ReplayResult
from harness.training.batch import Rollout
from harness.training.step_metrics import UpdateStats
from mrbench_core.replay_kinds import ReplayRequest

if TYPE_CHECKING:
    from algorithms.base import Algorithm
    from harness.records import RunRecord
    from tasks.base import Example


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
        task's P_all is the prompt, CoRT's x+, SDPO's student), which the sampler can record instead."""
        return self.replay and self.request in (ReplayRequest.LEAVE_ONE_OUT, ReplayRequest.RUBRIC,
                                                ReplayRequest.FEEDBACK)

    @property
    def sampling_entropy(self) -> bool:
        """The replay needs the old policy's entropy at each sampled token (forking tokens, GTPO), which
        the sampler can compute from the logits it already makes."""
        return self.replay and self.request is ReplayRequest.ENTROPY


class Engine(Protocol):
    """The operations a backend supplies to the :class:`~harness.training.step.Step` (engine
    operations only; the order, the scoring, the batch, the advantages and every log are the step's)."""

    def sample(self, examples: Sequence[Example], plan: StepPlan, seed: int) -> list[Rollout]:
        """G (``sampling.group_size``) unscored :class:`~harness.training.batch.Rollout` s per
        example with the old policy, group ``g`` for ``examples[g]``; ``seed``: the step's seed."""

    def replay(self, plan: StepPlan, rollouts: Sequence[Rollout], rewards: torch.Tensor, group_ids: torch.Tensor,
               T: int) -> ReplayResult:
        """The replay's forward passes, where the old policy (or OPSD's teacher) lives: the builder
        of ``plan.request`` (:func:`harness.replay_builders.replay_for`) on the engine's models.
        Only asked when the plan replays and the kind needs a model."""

    def update(self, rollouts: Sequence[Rollout], adv: torch.Tensor, T: int, algorithm: Algorithm,
               teacher_hidden: torch.Tensor | None = None) -> UpdateStats:
        """One step's policy update from the token advantages ``adv [B, T]``."""

    def sync(self) -> None:
        """Make the sampler's weights the updated policy's."""

    def save(self, record: RunRecord, step: int, position: int) -> None:
        """Checkpoint after ``step`` steps, with the data position."""

    def load(self, record: RunRecord) -> tuple[int, int] | None:
        """Resume from the record's checkpoint: (steps done, data position), or None (fresh)."""
