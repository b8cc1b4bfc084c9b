"""CoRT (counterfactual replay, token-level rubric weighting) as a baseline.

The backend replays each response after the prompt with the rubric (x+) and without it (x-) and
passes delta_t = log pi(y_t | x+, y<t) - log pi(y_t | x-, y<t) as ``batch.logprob_delta[B,T]``
(``ReplayRequest.RUBRIC``; NaN = not replayed, that token gets s_t = 0). Then, per valid token:

    s_t = sigmoid(tau (delta_t - b)) - 1/2                      in (-1/2, 1/2)
    w~_t = 1 + eta * lambda_n * s_t                             (> 0 because eta < 2)
    w_t = w~_t / mean over the response's valid tokens of w~     (averages to 1)
    A_t = w_t * A                                               (weights carry no gradient)

A is ONE aggregated response advantage (``aggregate``: "gdpo", default, with its batch rescale,
or "grpo"); CoRT has one profile for the summed advantage, not one per reward.
lambda_n = smoothstep((n - warmup_steps) / ramp_steps) (0 before the warm-up ends; a step to 1 when
ramp_steps = 0). Defaults (tau = 1, b = 0, eta = 1, no warm-up, 10-step ramp) are our choice: the
source fixes the form, not these values.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from algorithms.base import (
    Advantages,
    Algorithm,
    ReplayRequest,
    RolloutBatch,
    broadcast_to_tokens,
    check,
    finite_or_nan,
    masked_mean,
    smoothstep,
)
from algorithms.gdpo import GDPO, RESCALE_MODES
from algorithms.grpo import GRPO
from algorithms.registry import ALGORITHMS
from mrbench_core.fields import setting

#: ``aggregate`` values: the response-level advantage the token weights apply to
AGGREGATES = ("gdpo", "grpo")


@dataclass
class CoRTConfig:
    """tau, bias, eta: the sigmoid slope, centre and strength; warmup_steps, ramp_steps: lambda's
    schedule; aggregate: "gdpo" or "grpo"; eps, rescale, rescale_eps: passed to that aggregator
    (rescale only for gdpo)."""

    tau: float = setting(1.0, help="slope of the sigmoid of the log-prob change delta_t")
    bias: float = setting(0.0, help="centre of that sigmoid")
    eta: float = setting(1.0, help="strength of the token weighting (below 2, every weight stays positive)",
                         ge=0, lt=2, why="so that every weight stays positive")
    warmup_steps: int = setting(0, help="steps before the token weighting starts (lambda = 0)", ge=0)
    ramp_steps: int = setting(10, help="steps over which lambda then rises linearly to 1", ge=0)
    aggregate: str = setting("gdpo", help="the advantage the weights apply to", choices=AGGREGATES)
    eps: float = setting(1e-6, help="epsilon of that aggregator's group z-score", ge=0)
    rescale: str = setting("paper", help="gdpo's batch rescale", choices=RESCALE_MODES)
    rescale_eps: float | None = setting(None, help="epsilon of gdpo's batch rescale; null: the mode's own", ge=0)

    def __post_init__(self) -> None:  # a constraint between fields; each field's range is declared above
        check(self.aggregate == "gdpo" or (self.rescale == "paper" and self.rescale_eps is None),
              "--algo.rescale / --algo.rescale_eps apply only to --algo.aggregate gdpo (GRPO has no batch rescale)")


def cort_weights(delta: Tensor, mask: Tensor, tau: float, bias: float, strength: float) -> Tensor:
    """w[B,T] (module docstring) with strength = eta * lambda_n; 1 off the valid tokens."""
    delta = delta.detach().to(torch.float32)
    s = torch.sigmoid(tau * (delta - bias)) - 0.5
    s = torch.where(torch.isnan(s) | ~mask, torch.zeros_like(s), s)
    w_tilde = 1.0 + strength * s
    mean = masked_mean(w_tilde, mask, dim=1).unsqueeze(1)
    return torch.where(mask, w_tilde / mean.clamp_min(1e-30), torch.ones_like(w_tilde))


@ALGORITHMS.register("cort")
class CoRT(Algorithm):
    """CoRT: token weights from the log-prob change when the rubric is removed, on one advantage."""

    replay_request = ReplayRequest.RUBRIC
    config_class = CoRTConfig

    def __init__(self, **config: object):
        super().__init__(**config)
        c = self.config
        self.aggregator = (GDPO(eps=c.eps, rescale=c.rescale, rescale_eps=c.rescale_eps)
                           if c.aggregate == "gdpo" else GRPO(eps=c.eps))

    def ramp(self, step: int) -> float:
        """lambda_n."""
        c = self.config
        if step < c.warmup_steps:
            return 0.0
        if c.ramp_steps == 0:
            return 1.0
        return smoothstep((step - c.warmup_steps) / c.ramp_steps)

    def needs_replay(self, step: int) -> bool:
        return self.config.eta * self.ramp(step) > 0.0

    def weights(self, batch: RolloutBatch) -> Tensor:
        strength = self.config.eta * self.ramp(batch.step)
        if strength == 0.0:
            return torch.ones(batch.response_mask.shape, device=batch.response_mask.device)
        if batch.logprob_delta is None:
            raise ValueError(f"cort at step {batch.step} needs batch.logprob_delta [B,T] from the rubric replay")
        return cort_weights(batch.logprob_delta, batch.response_mask, self.config.tau, self.config.bias, strength)

    def advantages(self, batch: RolloutBatch) -> Advantages:
        mask = batch.response_mask
        w = self.weights(batch)
        adv = broadcast_to_tokens(self.aggregator.response_advantages(batch), mask) * w
        return Advantages(adv, {
            "cort_lambda": self.ramp(batch.step),
            "weight_std": finite_or_nan(torch.sqrt(masked_mean((w - 1.0) ** 2, mask))),
            "weight_max": finite_or_nan(w[mask].max()) if bool(mask.any()) else 1.0,
            "adv_abs_mean": finite_or_nan(masked_mean(adv.abs(), mask)),
        })
