"""The local backend's policy update, an object built with everything it uses: the policy, the
reference policy (when a KL term or the algorithm's own loss needs one), the optimiser settings
(``optim.*``; it owns the AdamW optimiser, which the checkpoint saves), the rollout temperature,
the pad id and the device.

One call (:meth:`PolicyUpdate.__call__`) is one step's update: the clipped surrogate of Eq. 3 over
``mini_batches`` optimiser updates, each accumulating micro-batches of ``micro_batch_size``
sequences, with the optional k3 KL against the reference policy, the entropy bonus, and an
algorithm's own loss term (``Algorithm.own_loss``, declared on the base class and implemented by
OPSD: on the teacher's logits, made from the teacher replay's hidden states). A step
whose loss has no gradient (every advantage 0, no other term on) skips its backward passes and
its optimiser steps, so a step without signal costs what its sampling costs.

With one mini-batch the old log-probabilities are the detached current ones (rho = 1 exactly);
with several they come from one no-grad pass of the policy before the first update. Every
log-probability is taken at the rollout temperature.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from harness.backends.loss import (
    PolicyObjective,
    PromptPass,
    entropy,
    gather_logprobs,
    make_micro_batch,
    response_logits,
    response_logprobs,
)
from harness.replay import decoder_and_head, head_logits
from harness.training.batch import Rollout
from harness.training.step_metrics import UpdateStats


@dataclass
class Reference:
    """The initial policy: a frozen copy, or (LoRA) the policy itself with its adapter disabled."""

    model: Any
    adapter_disabled: bool = False

    def active(self) -> Any:
        """The context in which ``model`` computes as the initial policy."""
        return self.model.disable_adapter() if self.adapter_disabled else contextlib.nullcontext()


class PolicyUpdate:
    """The update phase of a step (see the module docstring)."""

    def __init__(self, policy: Any, optim: Any, temperature: float, pad_id: int, device: torch.device,
                 reference: Reference | None = None, compute_dtype: torch.dtype = torch.float32):
        self.policy, self.optim, self.temperature = policy, optim, float(temperature)
        self.pad_id, self.device, self.reference = int(pad_id), device, reference
        self.compute_dtype = compute_dtype
        self.objective = PolicyObjective.from_optim(optim)  # the loss the openrlhf backend's actors run too
        self.params = [p for p in policy.parameters() if p.requires_grad]
        # the fused kernel: the same update as the per-parameter loop, about 7x faster on CPU for
        # SmolLM2-135M's float32 master weights (rounding aside; bench/README.md)
        self.fused = device.type in ("cpu", "cuda") and all(p.dtype.is_floating_point for p in self.params)
        self.optimizer = torch.optim.AdamW(self.params, lr=optim.lr, betas=tuple(optim.betas),
                                           weight_decay=optim.weight_decay, fused=self.fused)

    # -- the update ----------------------------------------------------------------------------------
    def __call__(self, rollouts: Sequence[Rollout], adv: torch.Tensor, T: int, algo: Any,
                 teacher_hidden: list[torch.Tensor] | None = None) -> UpdateStats:
        """One step's update on ``rollouts`` with token advantages ``adv[B, T]`` (``T`` the batch's
        longest response; each micro-batch is only as wide as its own); ``teacher_hidden``: the
        teacher replay's hidden states per response, for an algorithm with its own loss."""
        o, opt = self.optim, self.optimizer
        B = len(rollouts)
        own = self.adds_own_loss(algo, teacher_hidden)
        if self.without_gradient(adv, algo, teacher_hidden):
            # no group has signal and no other term has a gradient: the loss is 0 with a 0 gradient,
            # and AdamW would still move the weights (momentum, weight decay), so nothing is stepped
            return UpdateStats(tokens=sum(len(r.response_ids) for r in rollouts), skipped=True)
        order = list(range(B))
        # contiguous slices: responses are grouped by prompt, so each mini-batch holds whole prompts
        # when prompts_per_step is a multiple of mini_batches (the recipes' PPO mini-batches of prompts)
        size = -(-B // max(1, o.mini_batches))
        minis = [order[i:i + size] for i in range(0, B, size)]
        old = self._old_logprobs(rollouts, order) if len(minis) > 1 else {}
        tot = UpdateStats()
        self.policy.train()
        for mini in minis:
            n_tok = sum(len(rollouts[j].response_ids) for j in mini)
            opt.zero_grad(set_to_none=True)
            with self.autocast():  # one region per optimiser update: the weights' bf16 casts are made once
                self._accumulate(rollouts, mini, adv, algo if own else None, teacher_hidden, old, n_tok, tot)
            tot.tokens += n_tok
            if o.grad_clip and o.grad_clip > 0:
                norm = torch.nn.utils.clip_grad_norm_(self.params, o.grad_clip)
            else:
                norm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in self.params if p.grad is not None))
            tot.grad_norm = max(tot.grad_norm, float(norm))
            opt.step()
        opt.zero_grad(set_to_none=True)
        return tot

    # -- its pieces ------------------------------------------------------------------------------------
    @staticmethod
    def adds_own_loss(algo: Any, teacher_hidden: list[torch.Tensor] | None) -> bool:
        """Whether this step adds the algorithm's own loss term: it declares one (``has_loss``, from
        ``Algorithm.own_loss``) and the step's teacher replay supplied the hidden states it reads."""
        return bool(getattr(algo, "has_loss", False)) and teacher_hidden is not None

    def without_gradient(self, adv: torch.Tensor, algo: Any, teacher_hidden: list[torch.Tensor] | None) -> bool:
        """Whether the step's loss has no gradient at all: every token advantage is 0 (no reward
        varies within any group), and no KL, entropy or algorithm loss term is on. Then the backward
        passes are skipped and the optimiser does not step (``update_skipped`` in the metrics row)."""
        obj = self.objective
        own_loss = self.adds_own_loss(algo, teacher_hidden)
        return not (obj.needs_reference or obj.needs_entropy or own_loss) and not bool(torch.any(adv != 0))

    def autocast(self) -> Any:
        """bf16 mixed precision when the compute dtype is bf16 (autocast: matrix products in bf16,
        the weights, their gradients and the optimiser state stay float32); else nothing."""
        if self.compute_dtype == torch.float32:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.compute_dtype)

    def _accumulate(self, rollouts: Sequence[Rollout], mini: list[int], adv: torch.Tensor, loss_owner: Any,
                    teacher_hidden: list[torch.Tensor] | None, old: dict[int, torch.Tensor], n_tok: int,
                    tot: UpdateStats) -> None:
        """Forward and backward over the micro-batches of one mini-batch, the gradients accumulating;
        ``loss_owner``: the algorithm whose own loss term is added (None: no such term this step)."""
        for group in self._micro_groups(mini, rollouts):
            prompt = self._prompt_pass(rollouts, group)
            for idx in group:
                self._micro_step(rollouts, idx, adv, loss_owner, teacher_hidden, old, n_tok, tot, prompt)
            if prompt is not None:
                prompt.backward()

    def _prompt_pass(self, rollouts: Sequence[Rollout], group: list[list[int]]) -> PromptPass | None:
        """The prompt's pass shared by the micro-batches of one prompt's group (:class:`PromptPass`),
        where it has more than one and the decoder keeps a cache (not under gradient checkpointing);
        else None (each micro-batch runs the prompt, once for its rows)."""
        from harness.replay import decoder_and_head, unwrap

        if len(group) < 2 or getattr(unwrap(self.policy), "is_gradient_checkpointing", False):
            return None
        prompt = rollouts[group[0][0]].prompt_ids
        if not prompt:
            return None

        ids = torch.tensor([list(prompt)], dtype=torch.long, device=self.device)
        return PromptPass(decoder_and_head(self.policy)[0], ids, detached=True)

    def _micro_step(self, rollouts: Sequence[Rollout], idx: list[int], adv: torch.Tensor, loss_owner: Any,
                    teacher_hidden: list[torch.Tensor] | None, old: dict[int, torch.Tensor], n_tok: int,
                    tot: UpdateStats, prompt: PromptPass | None) -> None:
        """Forward and backward of one micro-batch (its backward stops at ``prompt``'s leaves, if given)."""
        obj = self.objective
        mb = self._mb(rollouts, idx)
        if loss_owner is not None:  # its loss reads the full distributions
            logits = response_logits(self.policy, mb, self.temperature, prompt)
            logp = gather_logprobs(logits, mb.response_ids)
            ent = entropy(logits) if obj.needs_entropy else None
        else:  # the LM head and log-softmax at the valid tokens only
            logp, ent = response_logprobs(self.policy, mb, self.temperature, with_entropy=obj.needs_entropy,
                                          prompt=prompt)
        old_lp = self._padded(old, idx, mb.T) if old else logp.detach()
        ref_lp = self._ref_logprobs(mb) if obj.needs_reference else None
        terms = obj(logp, old_lp, adv[idx, :mb.T].to(logp.device), mb.response_mask, n_tok, ref_lp, ent)
        loss = terms.loss
        if loss_owner is not None:  # the coefficient is the algorithm's own
            d = self._own_loss(loss_owner, logits, mb, idx, teacher_hidden) * (int(mb.response_mask.sum())
                                                                              / max(n_tok, 1))
            loss = loss + d
            tot.extra_loss += float(d.detach())
        loss.backward()
        tot.loss += float(loss.detach())
        tot.clipped += terms.clipped
        tot.kl += terms.kl_sum
        tot.entropy += terms.entropy_sum
        tot.ratio_max = max(tot.ratio_max, terms.ratio_max)

    def _micro(self, idx: list[int], rollouts: Sequence[Rollout]) -> list[list[int]]:
        """Micro-batches of ``micro_batch_size`` sequences of one prompt each (its group's responses,
        so the forward pass runs the prompt once: :func:`harness.backends.loss.make_micro_batch`),
        of similar response lengths (less padding); the accumulated gradient is the same sum in any
        order."""
        return [mb for group in micro_batches_by_prompt(idx, rollouts, self.optim.micro_batch_size) for mb in group]

    def _micro_groups(self, idx: list[int], rollouts: Sequence[Rollout]) -> list[list[list[int]]]:
        """:meth:`_micro`'s micro-batches, those of each prompt together."""
        return micro_batches_by_prompt(idx, rollouts, self.optim.micro_batch_size)

    def _mb(self, rollouts: Sequence[Rollout], idx: list[int]) -> Any:
        """The micro-batch, as wide as its own longest prompt and response."""
        T = max(1, max(len(rollouts[j].response_ids) for j in idx))
        return make_micro_batch([rollouts[j].prompt_ids for j in idx], [rollouts[j].response_ids for j in idx],
                                T, self.pad_id, self.device)

    @staticmethod
    def _padded(old: dict[int, torch.Tensor], idx: list[int], T: int) -> torch.Tensor:
        """The old log-probabilities of ``idx`` as [b, T] (each kept at its own response length)."""
        out = torch.zeros(len(idx), T, dtype=old[idx[0]].dtype, device=old[idx[0]].device)
        for i, j in enumerate(idx):
            out[i, :old[j].shape[0]] = old[j]
        return out

    @torch.no_grad()
    def _old_logprobs(self, rollouts: Sequence[Rollout], order: list[int]) -> dict[int, torch.Tensor]:
        """The policy's log-probabilities before the first optimiser update (several mini-batches), in
        the compute dtype, as the first mini-batch's own pass computes them (rho = 1 there)."""
        old: dict[int, torch.Tensor] = {}
        with self.autocast():
            for idx in self._micro(order, rollouts):
                mb = self._mb(rollouts, idx)
                lp, _ = response_logprobs(self.policy, mb, self.temperature)
                for i, j in enumerate(idx):
                    old[j] = lp[i, :len(rollouts[j].response_ids)]
        return old

    def reference_policy(self) -> Reference:
        """The reference policy (a clear error where none was loaded)."""
        if self.reference is None:
            raise RuntimeError("the reference policy is only loaded when optim.kl_coef > 0 or the algorithm "
                               "declares needs_reference")
        return self.reference

    @torch.no_grad()
    def _ref_logprobs(self, mb: Any) -> torch.Tensor:
        ref = self.reference_policy()
        with ref.active():
            return response_logprobs(ref.model, mb, self.temperature)[0]

    def _own_loss(self, algo: Any, logits: torch.Tensor, mb: Any, idx: list[int],
                  teacher_hidden: list[torch.Tensor]) -> torch.Tensor:
        """The algorithm's own loss term (``Algorithm.own_loss``; OPSD's distillation) against the
        teacher's logits, made from the teacher replay's hidden states with the reference's LM head."""
        _, head, cap = decoder_and_head(self.reference_policy().model)
        teacher = torch.zeros_like(logits)
        with torch.no_grad():
            for i, j in enumerate(idx):
                h = teacher_hidden[j]
                if h.numel():
                    teacher[i, :h.shape[0]] = head_logits(head, h.to(self.device), cap, self.temperature)
        return algo.own_loss(logits, teacher, mb.response_mask)


def micro_batches_by_prompt(idx: list[int], rollouts: Sequence[Rollout], size: int) -> list[list[list[int]]]:
    """For each prompt of ``idx`` (in order of first appearance), its responses sorted by length in
    micro-batches of at most ``size``."""
    size = max(1, size)
    by_prompt: dict[tuple[int, ...], list[int]] = {}
    for j in idx:
        by_prompt.setdefault(tuple(rollouts[j].prompt_ids), []).append(j)
    out: list[list[list[int]]] = []
    for members in by_prompt.values():
        members = sorted(members, key=lambda j: (len(rollouts[j].response_ids), j))
        out.append([members[i:i + size] for i in range(0, len(members), size)])
    return out
