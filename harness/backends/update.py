"""The local backend's policy update: the clipped surrogate of Eq. 3 over ``mini_batches`` optimiser
updates per step, each accumulating micro-batches of ``micro_batch_size`` sequences, with the
optional k3 KL against the reference policy, the entropy bonus, and an algorithm's own loss term
(OPSD's distillation). Mixed into :class:`harness.backends.local.LocalBackend`, whose policy,
reference, config and tokenizer padding it uses.

With one mini-batch the old log-probabilities are the detached current ones (rho = 1 exactly);
with several they come from one no-grad pass of the policy before the first update. Every
log-probability is taken at the rollout temperature.
"""

from __future__ import annotations

from typing import Any

import torch

from harness.backends.loss import entropy, gather_logprobs, make_micro_batch, response_logits, surrogate_loss
from harness.backends.rollout import Rollout
from harness.backends.step_metrics import UpdateStats
from harness.replay import decoder_and_head, head_logits
from harness.replay_builders import ReplayResult


class PolicyUpdate:
    """The update phase of a step (see the module docstring)."""

    cfg: Any
    policy: Any
    pad_id: int
    device: torch.device

    def _reference(self) -> Any:  # provided by the backend
        raise NotImplementedError

    # -- the update ----------------------------------------------------------------------------------
    def _update(self, rollouts: list[Rollout], adv: torch.Tensor, T: int, algo: Any, rep: ReplayResult,
                opt: Any, params: list[Any]) -> UpdateStats:
        o = self.cfg.optim
        B = len(rollouts)
        order = list(range(B))
        # contiguous slices: responses are grouped by prompt, so each mini-batch holds whole prompts
        # when prompts_per_step is a multiple of mini_batches (the recipes' PPO mini-batches of prompts)
        size = -(-B // max(1, o.mini_batches))
        minis = [order[i:i + size] for i in range(0, B, size)]
        old: dict[int, torch.Tensor] = {}
        if len(minis) > 1:
            with torch.no_grad():
                for idx in self._micro(order):
                    mb = self._mb(rollouts, idx, T)
                    lp = gather_logprobs(response_logits(self.policy, mb, self._temperature), mb.response_ids)
                    for i, j in enumerate(idx):
                        old[j] = lp[i]
        want_ref = o.kl_coef > 0
        tot = UpdateStats()
        self.policy.train()
        for mini in minis:
            n_tok = sum(len(rollouts[j].response_ids) for j in mini)
            opt.zero_grad(set_to_none=True)
            for idx in self._micro(mini):
                mb = self._mb(rollouts, idx, T)
                logits = response_logits(self.policy, mb, self._temperature)
                logp = gather_logprobs(logits, mb.response_ids)
                old_lp = torch.stack([old[j] for j in idx]) if old else logp.detach()
                ref_lp = self._ref_logprobs(mb) if want_ref else None
                ent = entropy(logits) if o.entropy_coef else None
                terms = surrogate_loss(logp, old_lp, adv[idx].to(logp.device), mb.response_mask, n_tok,
                                       o.clip_low, o.clip_high, ref_lp, o.kl_coef, ent, o.entropy_coef)
                loss = terms.loss
                if algo.has_loss and rep.teacher_hidden is not None:  # the coefficient is the algorithm's own
                    d = self._opsd_loss(algo, logits, mb, idx, rep) * (int(mb.response_mask.sum()) / max(n_tok, 1))
                    loss = loss + d
                    tot.extra_loss += float(d.detach())
                loss.backward()
                tot.loss += float(loss.detach())
                tot.clipped += terms.clipped
                tot.kl += terms.kl_sum
                tot.entropy += terms.entropy_sum
                tot.ratio_max = max(tot.ratio_max, terms.ratio_max)
            tot.tokens += n_tok
            if o.grad_clip and o.grad_clip > 0:
                norm = torch.nn.utils.clip_grad_norm_(params, o.grad_clip)
            else:
                norm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in params if p.grad is not None))
            tot.grad_norm = max(tot.grad_norm, float(norm))
            opt.step()
        opt.zero_grad(set_to_none=True)
        return tot

    @property
    def _temperature(self) -> float:
        """The rollout temperature: log-probabilities, KL, entropy and relevance are taken under it."""
        return self.cfg.sampling.temperature

    def _micro(self, idx: list[int]) -> list[list[int]]:
        size = max(1, self.cfg.optim.micro_batch_size)
        return [idx[i:i + size] for i in range(0, len(idx), size)]

    def _mb(self, rollouts: list[Rollout], idx: list[int], T: int) -> Any:
        return make_micro_batch([rollouts[j].prompt_ids for j in idx], [rollouts[j].response_ids for j in idx],
                                T, self.pad_id, self.device)

    @torch.no_grad()
    def _ref_logprobs(self, mb: Any) -> torch.Tensor:
        ref = self._reference()
        if ref == "adapter-disabled":
            with self.policy.disable_adapter():
                return gather_logprobs(response_logits(self.policy, mb, self._temperature), mb.response_ids)
        return gather_logprobs(response_logits(ref, mb, self._temperature), mb.response_ids)

    def _opsd_loss(self, algo: Any, logits: torch.Tensor, mb: Any, idx: list[int], rep: ReplayResult) -> torch.Tensor:
        ref = self._reference()
        _, head, cap = decoder_and_head(self.policy if ref == "adapter-disabled" else ref)
        teacher = torch.zeros_like(logits)
        with torch.no_grad():
            for i, j in enumerate(idx):
                h = rep.teacher_hidden[j]  # type: ignore[index]
                if h.numel():
                    teacher[i, :h.shape[0]] = head_logits(head, h.to(self.device), cap, self._temperature)
        return algo.distillation_loss(logits, teacher, mb.response_mask)
