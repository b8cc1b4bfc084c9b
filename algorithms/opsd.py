"""OPSD (on-policy self-distillation) as a baseline: a distillation loss, not an advantage.

What the backend supplies (``ReplayRequest.TEACHER``): for each sampled response, the student's
logits with gradient (policy on the plain prompt, over the response positions) and the teacher's
logits (the same initial model whose context also shows the privileged reference solution, e.g.
as an earlier answer, followed by the original prompt; SAME chat template and thinking flags as
the student), both [B, T, V] over the student's OWN sampled tokens, plus ``response_mask``.

Loss (generalised Jensen-Shannon divergence of GKD), per valid token, with T = teacher and
S = student next-token distributions and M = beta T + (1 - beta) S:

    JSD_beta(T || S) = beta KL(T || M) + (1 - beta) KL(S || M),   0 < beta < 1 (config ``jsd_beta``, default 0.5),

and by convention (not as limits, which are 0) beta = 0 -> KL(T || S) (forward KL) and
beta = 1 -> KL(S || T) (reverse KL). The loss is the mean over all valid tokens of the batch,
times ``loss_coef``; the teacher is detached.

Token advantages: ``advantage = "none"`` (default) returns zeros, pure distillation as in the
source, so the clipped surrogate contributes nothing; ``"grpo"`` adds GRPO advantages for an
RL + distillation variant. The loss is OPSD's :meth:`~algorithms.base.Algorithm.own_loss` (which
makes ``has_loss`` True): the backend adds it to the policy objective on the teacher replay's logits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import torch
from torch import Tensor

from algorithms.base import Advantages, Algorithm, ReplayRequest, RolloutBatch
from algorithms.grpo import GRPO
from algorithms.registry import ALGORITHMS
from algorithms.relevance import LOGPROB_FLOOR, default_chunk_size
from mrbench_core.fields import setting

#: ``advantage`` values: pure distillation, or GRPO's advantages added
ADVANTAGES = ("none", "grpo")


@dataclass
class OPSDConfig:
    """jsd_beta: the generalised JSD's mixing weight (``beta`` before; ``--algo.beta`` is
    MRTPO's); loss_coef: multiplier of the loss; advantage: "none" or "grpo"; chunk_size:
    positions per chunk of the loss (None = automatic)."""

    jsd_beta: float = setting(0.5, help="mixing weight of the generalised Jensen-Shannon divergence "
                                        "(0: forward KL, 1: reverse KL)", ge=0, le=1)
    loss_coef: float = setting(1.0, help="multiplier of the distillation loss")
    advantage: str = setting("none", help="none (pure distillation) or grpo (adds GRPO's advantages)",
                             choices=ADVANTAGES)
    chunk_size: int | None = setting(None, help="positions per chunk of the loss; null: automatic", ge=1)


def _kl(log_a: Tensor, log_b: Tensor) -> Tensor:
    """KL(a || b) per row from log-probabilities (a = 0 entries contribute 0)."""
    return (log_a.exp() * (log_a - log_b)).sum(-1)


def generalized_jsd(student_logits: Tensor, teacher_logits: Tensor, beta: float) -> Tensor:
    """Per-row JSD_beta(teacher || student) in float32 for [N, V] logits (formula in the module doc)."""
    ls = torch.log_softmax(student_logits.to(torch.float32), -1).clamp_min(LOGPROB_FLOOR)
    lt = torch.log_softmax(teacher_logits.detach().to(torch.float32), -1).clamp_min(LOGPROB_FLOOR)
    if beta == 0.0:
        return _kl(lt, ls)
    if beta == 1.0:
        return _kl(ls, lt)
    lm = torch.logaddexp(lt + math.log(beta), ls + math.log1p(-beta))
    return beta * _kl(lt, lm) + (1.0 - beta) * _kl(ls, lm)


@ALGORITHMS.register("opsd")
class OPSD(Algorithm):
    """OPSD: generalised JSD between a privileged teacher and the student on the student's samples."""

    replay_request = ReplayRequest.TEACHER
    config_class = OPSDConfig
    needs_reference = True
    renamed: ClassVar[Mapping[str, str]] = MappingProxyType({"beta": "jsd_beta"})

    def advantages(self, batch: RolloutBatch) -> Advantages:
        mask = batch.response_mask
        if self.config.advantage == "grpo":
            adv = GRPO().token_advantages(batch)
        else:
            adv = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
        return Advantages(adv, {"opsd_beta": self.config.jsd_beta, "loss_coef": self.config.loss_coef})

    def own_loss(self, student_logits: Tensor, teacher_logits: Tensor, response_mask: Tensor) -> Tensor:
        """OPSD's loss term: :meth:`distillation_loss`."""
        return self.distillation_loss(student_logits, teacher_logits, response_mask)

    def distillation_loss(self, student_logits: Tensor, teacher_logits: Tensor, response_mask: Tensor) -> Tensor:
        """loss_coef * mean over valid tokens of JSD_beta(teacher || student); a scalar with grad."""
        if student_logits.shape != teacher_logits.shape:
            raise ValueError(f"student logits {tuple(student_logits.shape)} and teacher logits "
                             f"{tuple(teacher_logits.shape)} differ; the teacher must score the student's tokens")
        if student_logits.shape[:-1] != response_mask.shape:
            raise ValueError(f"logits {tuple(student_logits.shape)} do not match mask {tuple(response_mask.shape)}")
        V = student_logits.shape[-1]
        student = student_logits.reshape(-1, V)  # views: no copy of the logits
        teacher = teacher_logits.reshape(-1, V)
        weight = response_mask.reshape(-1).to(torch.float32)
        count = weight.sum()
        if float(count) == 0:
            return student_logits.sum() * 0.0
        step = self.config.chunk_size or default_chunk_size(V)
        total = student_logits.new_zeros((), dtype=torch.float32)
        for i in range(0, student.shape[0], step):
            rows = weight[i:i + step]
            if bool(rows.any()):
                total = total + (generalized_jsd(student[i:i + step], teacher[i:i + step], self.config.jsd_beta)
                                 * rows).sum()
        return self.config.loss_coef * total / count
