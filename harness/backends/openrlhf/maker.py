"""mrbench's experience maker: OpenRLHF's own, running the shared step's (:class:`harness.training.step.Step`)
plan, replay, advantages and credit rows from OpenRLHF's hooks.

OpenRLHF's ``RemoteExperienceMaker.make_experience_batch`` splits the step's rollout samples into
micro-batches, runs the old policy's log-probabilities (and the reference's) on the actors, then
calls ``compute_advantages_and_returns``. :class:`MRExperienceMaker` overrides both:

- ``make_experience_batch`` first runs the Step's ``plan``, takes the step's rollouts rebuilt from
  the samples (:mod:`.step`; the vLLM workers sampled them and scored them with the Step's own
  :func:`harness.training.step.score_response`), and runs the Step's ``replay`` with this maker as its
  engine: one shard of whole groups to each policy actor (``mr_replay``, :mod:`.shards`) while
  they still hold the policy that sampled (a kind without forward passes, mrtpo-oracle's read-span
  masks, the Step builds itself); then it runs OpenRLHF's own path unchanged;
- ``compute_advantages_and_returns`` replaces OpenRLHF's reward shaping and estimators with the
  Step's ``advantages`` (written into each experience's frame; no KL penalty enters the reward:
  mrbench's KL is a loss term, ``--algo.kl.use_loss``) and its ``credit`` rows.

The step's state stays on ``self.last`` for the trainer, which finishes the step (:mod:`.trainer`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ray
import torch
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

from harness.backends.openrlhf.cell import CellSpec
from harness.backends.openrlhf.shards import ShardResult, make_shards, merge_shards
from harness.backends.openrlhf.step import rollouts_from_samples, write_advantages
from harness.replay_builders import ReplayResult
from harness.training.engine import StepPlan
from harness.training.step import Step, StepState


class MRExperienceMaker(RemoteExperienceMaker):
    def __init__(self, *args: Any, cell: CellSpec, **kwargs: Any):
        super().__init__(*args, **kwargs)
        from algorithms import get_algorithm
        from harness.backends.openrlhf.shards import cached_task

        self.cell = cell
        cfg = cell.cfg
        self.mr_cfg = cfg
        self.algorithm = get_algorithm(cfg.algo.name, **cfg.algo.params)
        self.task = cached_task(cfg.task.name, dict(cfg.task.options))
        self.step_index = 0  # 0-based training step, set by the trainer before each batch
        #: the run's shared step; the trainer attaches it to the record (Step.attach)
        self.step: Step = Step(cfg, self.task, self.algorithm, None, self.tokenizer)
        self.last: StepState | None = None
        self._pending: StepState | None = None

    # -- the engine's replay: forward passes on the policy actors ---------------------------------
    def _effective_actors(self) -> int:
        a = self.args
        return max(1, a.actor.num_nodes * a.actor.num_gpus_per_node // a.ds.ring_attn_size // a.ds.tensor_parallel_size)

    def replay(self, plan: StepPlan, rollouts: Sequence[Any], rewards: torch.Tensor, group_ids: torch.Tensor,
               T: int) -> ReplayResult:
        """The replay's forward passes, one shard of whole groups per policy actor."""
        cfg = self.mr_cfg
        shards = make_shards(plan.request.value, cfg.task.name, dict(cfg.task.options), cfg.replay,
                             cfg.sampling.temperature, list(rollouts), rewards, group_ids, T, self._effective_actors())
        refs = self.actor_model_group.async_run_method_batch(method_name="mr_replay", shard=shards)
        duplicate = self.args.ds.ring_attn_size * self.args.ds.tensor_parallel_size
        results: list[ShardResult] = [r for chunk in ray.get(refs)[::duplicate] for r in chunk]
        return merge_shards(results, rewards, T)

    # -- OpenRLHF's hooks ---------------------------------------------------------------------------
    def make_experience_batch(self, rollout_samples):
        step = self.step
        state = step.plan(self.step_index)
        rollouts, score_seconds = rollouts_from_samples(rollout_samples, self.args.rollout.n_samples_per_prompt)
        step.take(state, rollouts)
        step.score(state, scored=True)  # scored in the vLLM workers, with the Step's score_response
        state.phases.seconds["score"] = score_seconds
        with state.phases("replay"):
            step.replay(self, state)
        self._pending = state
        try:
            return super().make_experience_batch(rollout_samples)
        finally:
            self._pending = None

    def compute_advantages_and_returns(self, experiences):
        state = self._pending
        if state is None:
            raise RuntimeError("MRExperienceMaker.compute_advantages_and_returns runs inside make_experience_batch")
        write_advantages(experiences, self.step.advantages(state))
        with state.phases("credit"):
            self.step.credit_rows(state)
        self.last = state
        return experiences
