"""The ``example-clip`` algorithm: GDPO with each reward's group advantage clipped.

    A_k = (r_k - mu_k) / (sigma_k + eps)            per reward, within each prompt group (Eq. 1)
    S   = sum_k clip(A_k, -clip, clip)               one value per response
    A   = S / (std_B(S) + eps)                       GDPO's batch rescale (``rescale`` field)

Clipping keeps one reward with a lopsided group (one success among many failures) from
dominating the response's advantage. Because the class is a response-level
:class:`~algorithms.gdpo.Reweighter`, ``mrtpo+example-clip`` exists as well: MRTPO spreads each
clipped per-reward contribution over the tokens relevant to that reward.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from algorithms.base import RolloutBatch
from algorithms.gdpo import Aggregate, AggregateConfig, Reweighter
from mrbench_core.fields import setting


@dataclass
class ClipConfig(AggregateConfig):
    """clip: the largest |A_k| a reward contributes (plus GDPO's eps, rescale and rescale_eps)."""

    clip: float = setting(2.0, help="the largest |A_k| a reward contributes", gt=0)


class ClippedGDPO(Reweighter):
    """Clipped GDPO: per-reward group z-scores clipped to [-clip, clip], summed, batch rescale."""

    name = "example-clip"
    config_class = ClipConfig

    def aggregate(self, batch: RolloutBatch) -> Aggregate:
        A = self.group_advantages(batch).to(torch.float32)  # [B, K], 0 where a reward is NaN
        contributions = A.clamp(-self.config.clip, self.config.clip)
        ones = torch.ones(batch.num_responses, device=A.device)
        return Aggregate(contributions, response_scale=ones, keep=ones.bool())
