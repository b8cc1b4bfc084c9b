"""The policy update inside OpenRLHF's DeepSpeed policy actors, with mrbench's objective.

OpenRLHF's ``ActorPPOTrainer.training_step`` runs one micro-batch of the update: the actor's
forward, its own PPO loss, KL and entropy terms, DeepSpeed's backward and optimiser step.
:class:`MRActorPPOTrainer` keeps OpenRLHF's forward (the temperature-scaled log-probabilities of
the response tokens, with ring attention and tensor parallelism as configured), its backward and
its optimiser step, and puts :class:`~harness.backends.loss.PolicyObjective`, the objective the
local backend's update calls, in place of the loss: the clipped surrogate of Eq. 3 on mrbench's
token advantages, the k3 KL against the reference actor's log-probabilities and the entropy
bonus, normalised by the tokens of the optimiser update as OpenRLHF's ``token-mean`` is.

OpenRLHF features outside that objective (dual clip, GSPO, the train/rollout ratio correction,
dynamic batches, the MoE balancing loss, an EMA copy) are refused when the trainer is adopted,
and at pre-flight (:data:`harness.backends.openrlhf.argv.UPDATE_FLAGS`).
"""

from __future__ import annotations

from typing import Any

import torch
from openrlhf.trainer.ray.ppo_actor import ActorPPOTrainer
from openrlhf.utils.loss_utils import get_loss_batch_info

from harness.backends.loss import PolicyObjective


class MRActorPPOTrainer(ActorPPOTrainer):
    """OpenRLHF's actor trainer whose micro-batch step runs ``self.mr_objective`` (module docstring)."""

    mr_objective: PolicyObjective

    def training_step(self, experience: Any, kl_ctl: float, step: int,
                      loss_batch_info: dict[str, Any] | None = None) -> dict[str, Any]:
        obj = self.mr_objective
        self.actor.train()
        mask = experience.action_mask
        if loss_batch_info is None:
            loss_batch_info = get_loss_batch_info(self.strategy, mask)
        logp, output = self.actor(experience.sequences, mask, attention_mask=experience.attention_mask,
                                  return_output=True, ring_attn_group=self.strategy.ring_attn_group,
                                  return_entropy=obj.needs_entropy)
        ent = output.entropy[:, -mask.shape[1]:] if obj.needs_entropy else None
        ref = experience.base_action_log_probs if obj.needs_reference else None
        if obj.needs_reference and ref is None:
            raise RuntimeError("optim.kl_coef > 0, but OpenRLHF made no reference log-probabilities for the "
                               "experience (--algo.kl.use_loss with --algo.kl.init_coef > 0 makes them)")
        n_total = update_tokens(loss_batch_info, mask)
        terms = obj(logp, experience.action_log_probs, experience.advantages, mask.bool(), n_total, ref, ent)
        self.strategy.backward(terms.loss, self.actor, self.actor_optim)
        self.strategy.optimizer_step(self.actor_optim, self.actor, self.actor_scheduler, name="actor")
        return step_status(self, experience, terms, n_total, obj)


def update_tokens(loss_batch_info: dict[str, Any], mask: torch.Tensor) -> float:
    """The token count the loss is normalised by: the optimiser update's tokens over all data-parallel
    ranks divided by their number (DeepSpeed averages the ranks' gradients), or this micro-batch's."""
    total = loss_batch_info.get("batch_num_tokens")
    if total is None:
        return float(mask.sum())
    return float(total) / max(1, int(loss_batch_info.get("dp_size", 1)))


def step_status(trainer: Any, experience: Any, terms: Any, n_total: float, obj: PolicyObjective) -> dict[str, Any]:
    """The status OpenRLHF's ``ppo_train`` averages over micro-batches: per-token values weighted by
    the micro-batch's tokens, so that ``policy_loss`` averages to the update's loss, ``kl`` to the
    mean k3 and ``ppo_clip_ratio`` to the share of clipped tokens; the learning rate and gradient
    norm as they are; the experience's per-sample entries by samples."""
    n = max(float(experience.action_mask.sum()), 1.0)
    metrics: dict[str, Any] = {"policy_loss": terms.loss.detach() * (n_total / n),
                               "ppo_clip_ratio": torch.tensor(terms.clipped / n),
                               "kl": torch.tensor(terms.kl_sum / n)}
    if obj.needs_entropy:
        metrics["entropy_loss"] = torch.tensor(terms.entropy_sum / n)
    weights: dict[str, Any] = {k: "token" for k in metrics}
    metrics["actor_lr"] = trainer.actor_scheduler.get_last_lr()[0]
    metrics["actor_grad_norm"] = trainer.strategy.get_grad_norm(trainer.actor)
    weights.update(actor_lr=None, actor_grad_norm=None)
    for key, value in experience.info.items():
        if isinstance(value, torch.Tensor) and key not in metrics:
            metrics[key], weights[key] = value, "token" if value.dim() == 0 else "sample"
    return {"metrics": metrics, "weights": weights, "num_samples": float(experience.action_mask.shape[0]),
            "num_action_tokens": float(experience.action_mask.sum().item())}


def unsupported(trainer: Any) -> list[str]:
    """The OpenRLHF settings of ``trainer`` that mrbench's objective does not run."""
    args = trainer.args
    found = []
    if getattr(args.actor, "dual_clip", None) is not None:
        found.append(f"--actor.dual_clip {args.actor.dual_clip}")
    if getattr(args.actor, "policy_loss_type", "ppo") != "ppo":
        found.append(f"--actor.policy_loss_type {args.actor.policy_loss_type}")
    if getattr(args.algo.advantage, "is_correction_level", "off") != "off":
        found.append(f"--algo.advantage.is_correction_level {args.algo.advantage.is_correction_level}")
    if getattr(args.train, "dynamic_batch_enable", False):
        found.append("--train.dynamic_batch_enable")
    if getattr(trainer, "aux_loss", False):
        found.append(f"--actor.aux_loss_coef {args.actor.aux_loss_coef}")
    if getattr(trainer, "ema_model", None) is not None:
        found.append("--train.enable_ema")
    return found


def adopt(trainer: Any, objective: PolicyObjective) -> MRActorPPOTrainer:
    """Make the policy actor's ``ActorPPOTrainer`` (built by OpenRLHF, its vLLM sync group already
    joined) run ``objective``: its class becomes :class:`MRActorPPOTrainer`, which adds no state."""
    bad = unsupported(trainer)
    if bad:
        raise ValueError(f"OpenRLHF is set to {', '.join(bad)}, which mrbench's policy objective "
                         f"(harness.backends.loss.PolicyObjective) does not run; remove it from "
                         f"backend.openrlhf.extra_args")
    trainer.__class__ = MRActorPPOTrainer
    trainer.mr_objective = objective
    return trainer
