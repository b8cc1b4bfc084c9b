"""GRPO as the paper uses it: a group z-score of the summed reward, no batch rescale.

S_raw^{(j)} = sum over the rewards present for response j (NaN rewards are absent, not 0);
A^{(j)} = (S_raw^{(j)} - mu_g) / (sigma_g + eps) with the group's mean and SAMPLE std (Eq. 1);
every valid token of response j gets A^{(j)}. A response with no present reward is left out of its
group's statistics and gets 0; a group of one or with a constant sum gets 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from algorithms.base import Algorithm, RolloutBatch, broadcast_to_tokens, check, group_standardise
from algorithms.registry import ALGORITHMS


@dataclass
class GRPOConfig:
    """eps: Eq. 1 denominator epsilon."""

    eps: float = 1e-6

    def __post_init__(self) -> None:
        check(self.eps >= 0, f"eps must be >= 0, got {self.eps}")


def summed_rewards(rewards: Tensor) -> Tensor:
    """[B]: sum of the non-NaN rewards of each response; NaN where none is present."""
    present = ~torch.isnan(rewards)
    total = torch.where(present, rewards, torch.zeros_like(rewards)).sum(dim=1)
    return torch.where(present.any(dim=1), total, torch.full_like(total, float("nan")))


@ALGORITHMS.register("grpo")
class GRPO(Algorithm):
    """GRPO: group z-score of the summed reward, no batch rescale."""

    name = "grpo"
    config_class = GRPOConfig

    def response_advantages(self, batch: RolloutBatch) -> Tensor:
        """[B] group z-scores of the summed reward."""
        return group_standardise(summed_rewards(batch.rewards.float()), batch.group_ids, self.config.eps)

    def token_advantages(self, batch: RolloutBatch) -> Tensor:  # logs the default mean |A|
        return broadcast_to_tokens(self.response_advantages(batch), batch.response_mask)
