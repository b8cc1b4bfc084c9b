"""GRPO as the paper uses it: a group z-score of the summed reward, no batch rescale.

S_raw^{(j)} = sum_k c_k r_k over the rewards present for response j (NaN rewards are absent, not 0;
c_k = 1 unless ``weights`` sets them, constants or schedules over steps, :mod:`algorithms.weights`);
A^{(j)} = (S_raw^{(j)} - mu_g) / (sigma_g + eps) with the group's mean and SAMPLE std (Eq. 1);
every valid token of response j gets A^{(j)}. A response with no present reward is left out of its
group's statistics and gets 0; a group of one or with a constant sum gets 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from algorithms.base import (
    Advantages,
    Algorithm,
    ConfigError,
    Contributions,
    RolloutBatch,
    broadcast_to_tokens,
    group_standardise,
    group_stats,
)
from algorithms.registry import ALGORITHMS
from algorithms.weights import WeightsError, normalise_weights, weights_at
from mrbench_core.fields import setting


@dataclass
class GRPOConfig:
    """eps: Eq. 1 denominator epsilon.
    weights: c_k of the summed reward: a list (one per reward column), or reward name -> number or
    schedule over steps (constant, linear, cosine, step; :mod:`algorithms.weights`); None = all 1."""

    eps: float = setting(1e-6, help="epsilon added to the group std of Eq. 1 (z-score denominator)", ge=0)
    weights: tuple[float, ...] | dict[str, Any] | str | None = setting(
        None, help="c_k per reward: a list (one per reward column), or reward name -> number or schedule over "
                   "steps (constant, linear, cosine, step); null: all 1")

    def __post_init__(self) -> None:
        try:
            self.weights = normalise_weights(self.weights)
        except WeightsError as exc:
            raise ConfigError(str(exc)) from None


def summed_rewards(rewards: Tensor) -> Tensor:
    """[B]: sum of the non-NaN rewards of each response; NaN where none is present."""
    present = ~torch.isnan(rewards)
    total = torch.where(present, rewards, torch.zeros_like(rewards)).sum(dim=1)
    return torch.where(present.any(dim=1), total, torch.full_like(total, float("nan")))


@ALGORITHMS.register("grpo")
class GRPO(Algorithm):
    """GRPO: group z-score of the summed reward, no batch rescale."""

    config_class = GRPOConfig

    def reward_weights(self, batch: RolloutBatch) -> Tensor:
        """c[K] in force at the batch's step."""
        return weights_at(self.config.weights, batch.num_rewards, batch.step, batch.total_steps,
                          batch.reward_names, batch.rewards)

    def response_advantages(self, batch: RolloutBatch) -> Tensor:
        """[B] group z-scores of the (weighted) summed reward."""
        rewards = batch.rewards.float()
        if self.config.weights is not None:
            rewards = rewards * self.reward_weights(batch)
        return group_standardise(summed_rewards(rewards), batch.group_ids, self.config.eps)

    def token_advantages(self, batch: RolloutBatch) -> Tensor:  # logs the default mean |A|
        return broadcast_to_tokens(self.response_advantages(batch), batch.response_mask)

    def contributions(self, batch: RolloutBatch, result: Advantages) -> Contributions:
        """:meth:`reward_parts` on every valid token."""
        m = batch.response_mask.unsqueeze(1).to(torch.float32)
        return Contributions(self.reward_parts(batch).unsqueeze(-1) * m, reward_weights=self.reward_weights(batch))

    def reward_parts(self, batch: RolloutBatch) -> Tensor:
        """[B,K]: c_k (r_{j,k} - mean_g(c_k r_k)) / (std_g(S) + eps), S the weighted sum (the mean over
        the group's responses with some reward present): the parts sum to the advantage when every
        reward applies to every response of the group."""
        c = self.reward_weights(batch)
        r = batch.rewards.to(torch.float32) * c
        S = summed_rewards(r)
        st_s = group_stats(S.unsqueeze(1), batch.group_ids)
        present = ~torch.isnan(S)
        r_in = torch.where(present.unsqueeze(1), r, torch.full_like(r, float("nan")))
        st_r = group_stats(r_in, batch.group_ids)
        idx = st_s.index
        a = (r - st_r.mean[idx]) / (st_s.sample_std[idx] + self.config.eps)
        ok = ~torch.isnan(r) & present.unsqueeze(1) & st_s.varying[idx]
        return torch.where(ok, a, torch.zeros_like(a))
