"""Token credit from the old policy's entropy: forking tokens and GTPO.

Both read ``batch.token_entropy[B,T]`` (``ReplayRequest.ENTROPY``): H_{j,t}, the entropy of the
distribution that sampled token t of response j, at the rollout temperature. A response whose
entropy is NaN or infinite on a valid token was not supplied and keeps uniform credit. Each comes
per reward on GDPO and on the summed reward's GRPO advantage (:mod:`algorithms.token_credit`).

**Forking tokens** ("Beyond the 80/20 Rule: High-Entropy Minority Tokens Drive Effective RL for
LLM Reasoning", Wang et al. 2025, arXiv 2506.01939): the policy gradient only on the tokens whose
entropy is in the batch's top rho (paper: rho = 0.2): m_t = 1[H_t >= tau], tau the
ceil(rho N)-th largest entropy of the N valid tokens of the responses that carry a signal (the
paper's batch: DAPO's dynamic sampling keeps only groups whose reward varies), and
A_t = m_t U_j. The mask does not depend on the reward, so the per-reward form is the mask on
GDPO's advantage, and the summed form the mask on GRPO's. rho = 1 keeps every token: the
underlying method exactly.

**GTPO** ("GTPO and GRPO-S: Token and Sequence-Level Reward Shaping with Policy Entropy", Tan et
al., arXiv 2508.04349): a correct response's token gets alpha_1 r + alpha_2 times its share of the
entropy (Eq. 3), an incorrect one's -alpha_1 - alpha_2 times its share of the inverse entropy 1/H
(Eq. 5: a confident mistake is blamed most); the paper's experiments use alpha_1 = 1, alpha_2 = 0.1.
Here each part of the advantage is weighted by the same profile, normalised to mean 1 over the
response's valid tokens:

    w_t = (alpha_1 + alpha_2 rho_t) / (alpha_1 + alpha_2),
    rho_t = H_t / mean_t H  for a positive part,  (1 / (H_t + eps)) / mean_t (1 / (H_t + eps))  for a negative one,

so A_t = U_j + s sum_p part_p (w_{p,t} - 1), which is A (1 + beta (H_t / mean H - 1)) with
beta = alpha_2 / (alpha_1 + alpha_2) for a positive advantage; s is MRTPO's Eq. 8 bound in the
per-reward form (:mod:`algorithms.token_credit`), 1 in the summed form. Choices of ours, where the paper
differs or is silent: the entropy share is taken over the response's own tokens (the paper compares
a token with the same position of the group's other responses of the same outcome, then normalises
the shaped rewards, Eq. 6), so each response keeps its advantage's mean; "positive" is the sign of
the part's advantage (the paper's rewards are 0/1); eps = 1e-6 nats. Entropy equal on every token
of a response gives w = 1 exactly (GDPO or GRPO exactly), as alpha_2 = 0 does.

GRPO-S, the paper's sequence-level variant, weights whole responses and moves no credit between a
response's tokens; it is not implemented here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

from algorithms.base import (
    ReplayRequest,
    RolloutBatch,
    check,
    finite_or_nan,
    masked_mean,
    rewards_varying_in_group,
)
from algorithms.registry import ALGORITHMS
from algorithms.token_credit import Credit, TokenCredit, Underlying, supplied_rows
from mrbench_core.fields import setting

#: added to the entropy before GTPO inverts it (nats; a token sampled with certainty has H = 0)
INVERSE_EPS = 1e-6


@dataclass
class ForkingConfig:
    """rho: the share of the batch's tokens, the highest-entropy ones, that keep their advantage."""

    rho: float = setting(0.2, help="share of the batch's tokens, the highest-entropy ones, that keep their advantage "
                                   "(paper: 0.2; 1 = the underlying advantage exactly)", gt=0, le=1)


@dataclass
class GTPOConfig:
    """alpha_1, alpha_2: the weights of the response's advantage and of the token's entropy share
    (paper Eq. 3 and 5; its experiments: 1.0 and 0.1)."""

    alpha_1: float = setting(1.0, help="weight of the response's own advantage in each token's (the paper's "
                                       "alpha_1; its experiments: 1.0)", ge=0)
    alpha_2: float = setting(0.1, help="weight of the token's share of the response's entropy (the paper's "
                                       "alpha_2; its experiments: 0.1; 0 = the underlying advantage exactly)", ge=0)

    def __post_init__(self) -> None:
        check(self.alpha_1 + self.alpha_2 > 0, "--algo.alpha_1 + --algo.alpha_2 must be > 0 (the weights are "
                                               "normalised by their sum)")


def _need_entropy(algo: TokenCredit, batch: RolloutBatch) -> Tensor:
    if batch.token_entropy is None:
        raise ValueError(f"{algo.name} at step {batch.step} needs batch.token_entropy [B,T] from the "
                         f"{ReplayRequest.ENTROPY.value} request; got None")
    return batch.token_entropy.to(torch.float32)


def forking_mask(entropy: Tensor, mask: Tensor, pool_rows: Tensor, rho: float) -> tuple[Tensor, Tensor, float]:
    """(keep[B,T] bool, supplied[B] bool, tau): the tokens in the top ``rho`` of the entropies of the
    valid tokens of the ``pool_rows`` responses (module docstring); a response not supplied keeps
    every valid token. tau is NaN when every token is kept without a threshold."""
    supplied = supplied_rows(entropy, mask)
    values = entropy[mask & (supplied & pool_rows).unsqueeze(1)]
    if rho >= 1.0 or values.numel() == 0:
        return mask.clone(), supplied, float("nan")
    k = max(1, math.ceil(rho * values.numel() - 1e-9))
    tau = torch.topk(values, k).values.min()
    keep = torch.where(supplied.unsqueeze(1), entropy >= tau, torch.ones_like(mask)) & mask
    return keep, supplied, float(tau)


def entropy_ratios(entropy: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(rho_pos[B,T], rho_neg[B,T], supplied[B]): each token's entropy over the response's mean, and
    its inverse entropy over the mean inverse (GTPO, module docstring); exactly 1 off the valid
    tokens, for a response not supplied, and for one whose entropy is the same on every token."""
    supplied = supplied_rows(entropy, mask)
    use = mask & supplied.unsqueeze(1)
    H = torch.where(use, entropy.clamp_min(0.0), torch.zeros_like(entropy))
    one = torch.ones_like(H)

    def ratio(x: Tensor) -> Tensor:
        x = torch.where(use, x, torch.zeros_like(x))
        mean = x.sum(1) / use.sum(1).clamp_min(1)
        high = torch.where(use, x, torch.full_like(x, -math.inf)).amax(1)
        low = torch.where(use, x, torch.full_like(x, math.inf)).amin(1)
        varies = (high > low) & (mean > 0)
        return torch.where(use & varies.unsqueeze(1), x / mean.clamp_min(1e-30).unsqueeze(1), one)

    return ratio(H), ratio(1.0 / (H + INVERSE_EPS)), supplied


def signed_weights(parts: Tensor, w_pos: Tensor, w_neg: Tensor) -> Tensor:
    """[B,P,T]: each part's weight profile by the sign of its advantage (1 for a zero part)."""
    sign = parts.sign().unsqueeze(-1)
    return torch.where(sign > 0, w_pos.unsqueeze(1), torch.where(sign < 0, w_neg.unsqueeze(1),
                                                                  torch.ones_like(w_pos).unsqueeze(1)))


@ALGORITHMS.register("forking")
class Forking(TokenCredit):
    """Forking tokens (arXiv 2506.01939): only the top-rho entropy tokens, per reward on GDPO (mrbench's construction).

    The paper's method is single-reward; ``forking-summed`` is its own form on the summed reward."""

    replay_request = ReplayRequest.ENTROPY
    config_class = ForkingConfig

    def needs_replay(self, step: int) -> bool:
        return self.config.rho < 1.0

    def credit(self, batch: RolloutBatch, base: Underlying) -> Credit:
        mask = batch.response_mask
        if self.config.rho >= 1.0:
            keep, supplied, tau = mask.clone(), torch.zeros_like(base.signal), float("nan")
        else:
            keep, supplied, tau = forking_mask(_need_entropy(self, batch), mask, base.signal, self.config.rho)
        zero = torch.zeros((), dtype=torch.float32, device=mask.device)
        tokens = torch.where(keep, base.uniform.unsqueeze(1), zero)
        keep3 = keep.unsqueeze(1).expand(-1, base.reward_parts.shape[1], -1)
        per_reward = torch.where(keep3, base.reward_parts.unsqueeze(-1), zero)
        pool = mask & base.signal.unsqueeze(1)
        kept = float((keep & pool).sum()) / max(1, int(pool.sum()))
        metrics = {"entropy_threshold": finite_or_nan(tau), "kept_share": kept,
                   "entropy_supplied": float(supplied[base.signal].float().mean()) if bool(base.signal.any()) else 0.0}
        weighted = rewards_varying_in_group(batch.rewards, batch.group_ids) & supplied.unsqueeze(1)
        return Credit(tokens, per_reward, keep3.to(torch.float32), weighted, metrics)


@ALGORITHMS.register("gtpo")
class GTPO(TokenCredit):
    """GTPO (arXiv 2508.04349): advantages weighted by token entropy share, per reward on GDPO (mrbench's construction).

    Inverse entropy for a negative advantage. The paper's method is single-reward; ``gtpo-summed`` is
    its own form on the summed reward."""

    replay_request = ReplayRequest.ENTROPY
    config_class = GTPOConfig

    def needs_replay(self, step: int) -> bool:
        return self.config.alpha_2 > 0.0

    def credit(self, batch: RolloutBatch, base: Underlying) -> Credit:
        mask = batch.response_mask
        a1, a2 = self.config.alpha_1, self.config.alpha_2
        if a2 == 0.0:
            rho_pos = rho_neg = torch.ones(mask.shape, dtype=torch.float32, device=mask.device)
            supplied = torch.zeros_like(base.signal)
        else:
            rho_pos, rho_neg, supplied = entropy_ratios(_need_entropy(self, batch), mask)
        beta = a2 / (a1 + a2)  # w = (a1 + a2 rho) / (a1 + a2), written so that rho = 1 gives exactly 1
        w_pos, w_neg = 1.0 + beta * (rho_pos - 1.0), 1.0 + beta * (rho_neg - 1.0)
        w = signed_weights(base.parts, w_pos, w_neg)
        moved = base.parts.unsqueeze(-1) * (w - 1.0)  # [B,P,T]
        s = self.bound(base, moved, mask)
        zero = torch.zeros((), dtype=torch.float32, device=mask.device)
        tokens = torch.where(mask, base.uniform.unsqueeze(1) + s * moved.sum(dim=1), zero)
        K = base.reward_parts.shape[1]
        # per reward, each reward's weights by its own sign; in the summed form, the one advantage's
        w_reward = 1.0 + s * (w[:, :K] - 1.0) if self.per_reward else w.expand(-1, K, -1)
        per_reward = torch.where(mask.unsqueeze(1), base.reward_parts.unsqueeze(-1) * w_reward, zero)
        w_reward = torch.where(mask.unsqueeze(1), w_reward, torch.ones_like(w_reward))
        valid = mask & supplied.unsqueeze(1)
        metrics = {"entropy_mean": finite_or_nan(masked_mean(batch.token_entropy.float(), valid))
                   if batch.token_entropy is not None and bool(valid.any()) else float("nan"),
                   "weight_max": finite_or_nan(w_reward.amax()) if w_reward.numel() else 1.0,
                   "bound_scale": finite_or_nan(s),
                   "entropy_supplied": float(supplied[base.signal].float().mean()) if bool(base.signal.any()) else 0.0}
        weighted = rewards_varying_in_group(batch.rewards, batch.group_ids) & supplied.unsqueeze(1)
        return Credit(tokens, per_reward, w_reward.contiguous(), weighted, metrics)


@ALGORITHMS.register("forking-summed")
class ForkingSummed(Forking):
    """Forking tokens (arXiv 2506.01939) on the summed reward's GRPO advantage: the paper's own, single-reward form."""

    per_reward = False


@ALGORITHMS.register("gtpo-summed")
class GTPOSummed(GTPO):
    """GTPO (arXiv 2508.04349) on the summed reward's GRPO advantage: the paper's own, single-reward form."""

    per_reward = False
