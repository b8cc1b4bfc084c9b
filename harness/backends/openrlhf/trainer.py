"""mrbench's policy actor and trainer for OpenRLHF, and :func:`install`, which makes OpenRLHF's
``train_ppo_ray`` use them.

Ray refuses to subclass a class it has made remote, so both subclass the undecorated class
(``__ray_actor_class__``) and are made remote again with the base's options.

- :class:`MRPolicyActorImpl` adds ``mr_replay``: the replay of one shard (:mod:`.shards`) with
  the DeepSpeed actor's model (the old policy while the experience is made), in eval mode; waits
  for the vLLM engines before OpenRLHF's weight-sync rendezvous (:mod:`.failures`); and
  once OpenRLHF has built its actor trainer, makes it run mrbench's policy objective, the one the
  local backend's update runs (:mod:`.update`).
- :class:`MRPPOTrainerImpl` puts :class:`~.maker.MRExperienceMaker` in place of OpenRLHF's and
  attaches the maker's shared step (:class:`harness.training.step.Step`) to the record
  (:meth:`~harness.training.step.Step.attach`: its credit log, ``credit.jsonl``, and its
  relevance guard; the prologue ran in the mrbench process); reads
  the prompts in file order (mrbench's data order) instead of shuffled, adds top-k to the sampling
  parameters, tells the maker the step, and after each step finishes it: OpenRLHF's update
  statistics, then the Step's metrics row and sample rows (rows after the checkpoint it resumes
  from are dropped, credit rows too). When the mrbench process asks it to stop, it checkpoints
  after the step and ends.
"""

from __future__ import annotations

from typing import Any

import ray
from openrlhf.trainer.ppo_trainer import PPOTrainer
from openrlhf.trainer.ray.ppo_actor import PolicyModelActor

from harness.backends.openrlhf.cell import current_cell
from harness.backends.openrlhf.launch import acknowledge_stop, stop_requested
from harness.backends.openrlhf.maker import MRExperienceMaker
from harness.backends.openrlhf.shards import ReplayShard, ShardResult, run_shard
from harness.models import prepare_tokenizer

_ActorBase: Any = getattr(PolicyModelActor, "__ray_actor_class__", PolicyModelActor)
_TrainerBase: Any = getattr(PPOTrainer, "__ray_actor_class__", PPOTrainer)


class TrainingStopped(RuntimeError):
    """The mrbench process asked the run to stop; the step's checkpoint is written."""


def unwrapped_model(actor: Any) -> Any:
    """The Hugging Face (or peft) model under OpenRLHF's ``Actor`` and DeepSpeed's engine."""
    model = actor.model
    return getattr(model, "module", model)


class MRPolicyActorImpl(_ActorBase):
    def init_model_from_pretrained(self, strategy, pretrain, max_steps=None, vllm_engines=None):
        from harness.backends.loss import PolicyObjective
        from harness.backends.openrlhf.failures import wait_for_engines
        from harness.backends.openrlhf.update import adopt

        wait_for_engines(vllm_engines)  # before OpenRLHF's weight-sync rendezvous with them
        out = super().init_model_from_pretrained(strategy, pretrain, max_steps, vllm_engines)
        adopt(self.trainer, PolicyObjective.from_optim(current_cell().cfg.optim))
        return out

    def mr_replay(self, shard: ReplayShard) -> ShardResult:
        tokenizer = prepare_tokenizer(self.tokenizer)
        self.actor.eval()
        try:
            return run_shard(shard, unwrapped_model(self.actor), tokenizer, int(tokenizer.pad_token_id))
        finally:
            self.actor.train()


MRPolicyActor = ray.remote(num_gpus=1)(MRPolicyActorImpl)


class MRPPOTrainerImpl(_TrainerBase):
    def __init__(self, pretrain, strategy, actor_model_group, critic_model_group, reward_model_group,
                 reference_model_group, vllm_engines, **generate_kwargs):
        super().__init__(pretrain, strategy, actor_model_group, critic_model_group, reward_model_group,
                         reference_model_group, vllm_engines, **generate_kwargs)
        from harness.records import RunRecord

        self.cell = current_cell()
        self.mr_cfg = self.cell.cfg
        self.experience_maker = MRExperienceMaker(actor_model_group, critic_model_group, reward_model_group,
                                                  reference_model_group, self.kl_ctl, self.strategy, self.tokenizer,
                                                  cell=self.cell)
        dataset = self.prompts_dataloader.dataset
        self.prompts_dataloader = strategy.setup_dataloader(dataset, 1, True, False, dataset.collate_fn)
        self.samples_generator.prompts_dataloader = self.prompts_dataloader
        if self.mr_cfg.sampling.top_k:
            self.generate_kwargs["top_k"] = int(self.mr_cfg.sampling.top_k)
        self.record = RunRecord(self.cell.paths.record)
        self.experience_maker.step.attach(self.record)  # the maker's Step writes into this record

    def init_checkpoint_states(self):
        states = super().init_checkpoint_states()
        self.experience_maker.step.resume_at(int(states.get("global_step", 0)))
        return states

    def train_step(self, rollout_samples, global_step: int):
        self.experience_maker.step_index = global_step
        return super().train_step(rollout_samples, global_step)

    def _append_step(self, global_step: int, status: dict[str, Any]) -> None:
        """Finish the step the maker made: OpenRLHF's update statistics, then the Step's rows."""
        from harness.backends.openrlhf.step import step_times, update_stats

        maker = self.experience_maker
        state = maker.last
        if state is None:
            return
        maker.step.updated(state, update_stats(status))
        maker.step.finish(state, times=step_times(status, state.phases.seconds))
        maker.last = None

    def save_logs_and_checkpoints(self, global_step: int, logs_dict=None, client_states=None) -> None:
        self._append_step(global_step, logs_dict or {})
        stop = stop_requested(self.cell.paths)
        every = self.args.ckpt.save_steps
        if stop:
            self.args.ckpt.save_steps = 1  # checkpoint this step whatever the period
        try:
            super().save_logs_and_checkpoints(global_step, logs_dict, client_states)
        finally:
            self.args.ckpt.save_steps = every
        if stop:
            acknowledge_stop(self.cell.paths, global_step)
            raise TrainingStopped(f"stopped after step {global_step} as asked; its checkpoint is written")


MRPPOTrainer = ray.remote(MRPPOTrainerImpl)


def install() -> None:
    """Make OpenRLHF's ``train_ppo_ray`` build mrbench's policy actors and trainer: it imports both
    names from these modules when it runs (the actor at import, the trainer inside ``train``)."""
    from openrlhf.trainer import ppo_trainer
    from openrlhf.trainer.ray import ppo_actor

    ppo_actor.PolicyModelActor = MRPolicyActor
    ppo_trainer.PPOTrainer = MRPPOTrainer
