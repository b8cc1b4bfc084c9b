"""mrbench's experience maker: OpenRLHF's own, with mrbench's replay and token advantages.

OpenRLHF's ``RemoteExperienceMaker.make_experience_batch`` splits the step's rollout samples into
micro-batches, runs the old policy's log-probabilities (and the reference's) on the actors, then
calls ``compute_advantages_and_returns``. :class:`MRExperienceMaker` overrides both:

- ``make_experience_batch`` first rebuilds the step's batch from the samples (:mod:`.step`) and,
  when the algorithm replays at this step, sends one shard of whole groups to each policy actor
  (``mr_replay``, :mod:`.shards`) while they still hold the policy that sampled (a kind that needs
  no forward pass, mrtpo-oracle's read-span masks, is built here from the verdicts); then it runs
  OpenRLHF's own path unchanged;
- ``compute_advantages_and_returns`` replaces OpenRLHF's reward shaping and estimators with the
  algorithm's token advantages, written into each experience's frame; no KL penalty enters the
  reward (mrbench's KL is a loss term, ``--algo.kl.use_loss``).

The batch and its advantages stay on ``self.last`` for the trainer's metrics row.
"""

from __future__ import annotations

import time
from typing import Any

import ray
from openrlhf.trainer.ppo_utils.experience_maker import RemoteExperienceMaker

from harness.backends.openrlhf.cell import CellSpec
from harness.backends.openrlhf.shards import ReplaySettings, ShardResult, make_shards, merge_shards
from harness.backends.openrlhf.step import StepBatch, compute_advantages, step_batch, write_advantages
from harness.replay_builders import replay_for
from harness.step import plan_step
from mrbench_core.replay_kinds import WITHOUT_FORWARD


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
        self.step = 0  # 0-based training step, set by the trainer before each batch
        self.last: StepBatch | None = None
        self._pending: StepBatch | None = None

    # -- the replay on the policy actors --------------------------------------------------------
    def _effective_actors(self) -> int:
        a = self.args
        return max(1, a.actor.num_nodes * a.actor.num_gpus_per_node // a.ds.ring_attn_size // a.ds.tensor_parallel_size)

    def _replay(self, batch: StepBatch) -> None:
        batch.plan = plan = plan_step(self.algorithm, self.step)
        if not plan.replay:
            return
        t0 = time.time()
        if plan.request in WITHOUT_FORWARD:  # read-span masks need the tokenizer and the verdicts, no model
            batch.rep = replay_for(plan.request, None, self.task, self.tokenizer, batch.rollouts, batch.rewards,
                                   batch.group_ids, batch.T)
            batch.time_replay = time.time() - t0
            return
        opts = self.mr_cfg.backend.openrlhf
        settings = ReplaySettings(opts.replay_batch_size, opts.replay_chunk_size, opts.share_prefix,
                                  self.mr_cfg.sampling.temperature)
        shards = make_shards(plan.request.value, self.mr_cfg.task.name, dict(self.mr_cfg.task.options), settings,
                             batch.rollouts, batch.rewards, batch.group_ids, batch.T, self._effective_actors())
        refs = self.actor_model_group.async_run_method_batch(method_name="mr_replay", shard=shards)
        duplicate = self.args.ds.ring_attn_size * self.args.ds.tensor_parallel_size
        results: list[ShardResult] = [r for chunk in ray.get(refs)[::duplicate] for r in chunk]
        batch.rep = merge_shards(results, batch.rewards, batch.T)
        batch.time_replay = time.time() - t0

    # -- OpenRLHF's hooks ---------------------------------------------------------------------------
    def make_experience_batch(self, rollout_samples):
        batch = step_batch(rollout_samples, self.args.rollout.n_samples_per_prompt, self.task)
        self._replay(batch)
        self._pending = batch
        try:
            return super().make_experience_batch(rollout_samples)
        finally:
            self._pending = None

    def compute_advantages_and_returns(self, experiences):
        batch = self._pending
        if batch is None:
            raise RuntimeError("MRExperienceMaker.compute_advantages_and_returns runs inside make_experience_batch")
        adv = compute_advantages(self.algorithm, batch, self.step, self.mr_cfg.schedule.steps)
        write_advantages(experiences, adv)
        self.last = batch
        return experiences
