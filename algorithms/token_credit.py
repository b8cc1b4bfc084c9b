"""The field's per-token credit methods on mrbench's advantages: what they share.

Each method (:mod:`algorithms.entropy_credit`: forking tokens, GTPO; :mod:`algorithms.ktae`)
moves one advantage over a response's tokens with a token signal the step supplies on request
(the old policy's entropy, ``ReplayRequest.ENTROPY``; the sampled token ids,
``ReplayRequest.TOKEN_IDS``). Their papers are single-reward; each comes in two forms:

* **per reward** (``forking``, ``gtpo``, ``ktae``), mrbench's construction. GDPO's advantage is the
  sum of per-reward parts a_{j,k} = c_k A_k rs_j / scale (Eq. 2 before the sum,
  :meth:`algorithms.gdpo.Aggregate.reward_parts`); each part is moved by the method's signal for
  that reward, then they are summed as in GDPO: A_t = U_j + sum_k D_{j,k,t}, with U_j GDPO's own
  advantage of response j and D_{j,k,t} the change the signal makes to reward k's part at token t
  (0 where it changes nothing, so a signal that changes nothing gives GDPO exactly). The batch
  rescale's shift (modes ``trl`` and ``verl``; none in ``paper``) is one more part,
  b_j = -shift rs_j / scale, moved as a reward's part is. A signal that depends on the reward
  (GTPO's sign, KTAE's outcome) moves each reward's part its own way;
* **summed** (``forking-summed``, ``gtpo-summed``, ``ktae-summed``), the paper's own form: the
  method on one advantage, that of the summed reward, which with several rewards is GRPO's
  (what a single-reward method sees when the rewards are added): A_t = U_j + D_{j,t}.

In the per-reward form what the signals move, D_{j,t} = sum_k D_{j,k,t}, is scaled as MRTPO scales
its reallocation (its paper's Eq. 8, :func:`algorithms.mrtpo.bound_scale`): by
s = min(1, sqrt(sum_j T_j U_j^2 / sum_{j,t} D_{j,t}^2)), so that it never carries more than the
uniform advantage's second moment over the batch. GDPO's batch rescale divides by the spread of
the summed advantage, which is small when the rewards' parts nearly cancel; each part can then be
far larger than their sum, and without the bound the tokens would receive those parts. s = 1
whenever the signals move less than that, and a batch whose uniform advantages are all 0 gets 0.
The summed form has no batch rescale and needs no bound.

Either way every token of a response whose group carries no signal gets 0, as under GDPO or GRPO.
The per-reward split (:meth:`TokenCredit.contributions`, the ``adv/<r>/...`` and
``credit/<r>/read_mass`` diagnostics) is a_{j,k} moved by reward k's signal; in the summed form
each reward's GRPO part (:meth:`algorithms.grpo.GRPO.reward_parts`) is moved by the one signal.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import Tensor

from algorithms.base import (
    Advantages,
    Algorithm,
    Contributions,
    RolloutBatch,
    config_with_aggregator,
    finite_or_nan,
    masked_mean,
    rewards_varying_in_group,
)
from algorithms.gdpo import GDPO
from algorithms.grpo import GRPO
from algorithms.mrtpo import bound_scale


@dataclass(frozen=True)
class Underlying:
    """The advantage a token-credit method moves, for one batch.

    - ``uniform[B]``: U_j, the underlying method's own response advantage (GDPO's, or GRPO's of
      the summed reward);
    - ``parts[B,P]``: the advantages the signal moves: the K reward parts a_{j,k} and the shift part
      b_j (per-reward form, P = K + 1), or U_j alone (summed form, P = 1);
    - ``unit[B,P]``: what one unit of a part's own advantage (a reward's group z-score; the summed
      reward's) is worth in the token advantage: c_k rs_j / scale per reward (0 for the shift part),
      1 in the summed form; KTAE adds its key-token values in these units;
    - ``reward_parts[B,K]``: each reward's part of U_j (GDPO's a_{j,k}, or GRPO's split);
    - ``reward_weights[K]``: the c_k in force; ``signal[B]``: some reward varies in the response's
      group (elsewhere every advantage is 0).
    """

    uniform: Tensor
    parts: Tensor
    unit: Tensor
    reward_parts: Tensor
    reward_weights: Tensor | None
    signal: Tensor


@dataclass(frozen=True)
class Credit:
    """One batch's token credit: ``tokens[B,T]`` (the token advantages), ``per_reward[B,K,T]`` (each
    reward's part moved by its signal; None where the method's change is not reward by reward),
    ``token_weights[B,K,T]`` (the multiplicative weight on each reward's part, where the method has
    one), ``weighted[B,K]`` (the pairs whose credit follows the signal) and the method's metrics."""

    tokens: Tensor
    per_reward: Tensor | None
    token_weights: Tensor | None
    weighted: Tensor
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class TokenCreditAdvantages(Advantages):
    """:class:`~algorithms.base.Advantages` of a token-credit method, with its :class:`Credit`."""

    credit: Credit = field(kw_only=True)


class TokenCredit(Algorithm):
    """A per-token credit method on GDPO's per-reward parts (``per_reward``) or on GRPO's advantage of
    the summed reward (see the module docstring). Subclasses implement :meth:`credit`."""

    #: True: the per-reward form on GDPO; False: the paper's own form on the summed reward (GRPO)
    per_reward: ClassVar[bool] = True

    def __init__(self, **config: Any):
        self.aggregator_class = GDPO if self.per_reward else GRPO
        self.config, self.aggregator = config_with_aggregator(self.name, self.config_class, self.aggregator_class,
                                                              config)

    def config_dict(self) -> dict[str, Any]:
        return {**self.aggregator.config_dict(), **dataclasses.asdict(self.config)}

    def underlying(self, batch: RolloutBatch) -> Underlying:
        """The advantage this method moves (:class:`Underlying`)."""
        signal = rewards_varying_in_group(batch.rewards, batch.group_ids).any(dim=1)
        if not self.per_reward:
            grpo: Any = self.aggregator
            U = grpo.response_advantages(batch).to(torch.float32)
            one = torch.ones_like(U).unsqueeze(1)
            return Underlying(U, U.unsqueeze(1), one, grpo.reward_parts(batch), grpo.reward_weights(batch), signal)
        gdpo: Any = self.aggregator
        agg = gdpo.aggregate(batch)
        U, shift, scale = gdpo.rescaled(agg, batch.response_mask)
        rs = agg.response_scale.to(torch.float32)
        a = agg.reward_parts(scale)
        c = gdpo.reward_weights(batch)
        shift_part = -shift * rs / scale
        unit = torch.cat([c.unsqueeze(0) * (rs / scale).unsqueeze(1), torch.zeros_like(rs).unsqueeze(1)], dim=1)
        return Underlying(U, torch.cat([a, shift_part.unsqueeze(1)], dim=1), unit, a, c, signal)

    @abstractmethod
    def credit(self, batch: RolloutBatch, base: Underlying) -> Credit:
        """The token credit of ``base`` under this method's signal."""

    def bound(self, base: Underlying, moved: Tensor, mask: Tensor) -> Tensor:
        """s, the scale of what the signals moved (``moved[B,T]``, or per part ``[B,P,T]``): Eq. 8's in
        the per-reward form (module docstring), 1 in the summed form."""
        total = moved.sum(dim=1) if moved.dim() == 3 else moved
        if not self.per_reward:
            return torch.ones((), dtype=torch.float32, device=mask.device)
        return bound_scale(base.uniform, torch.where(mask, total, torch.zeros_like(total)), mask)

    def advantages(self, batch: RolloutBatch) -> TokenCreditAdvantages:
        base = self.underlying(batch)
        credit = self.credit(batch, base)
        mask = batch.response_mask
        metrics = {"adv_abs_mean": finite_or_nan(masked_mean(credit.tokens.abs(), mask)),
                   "uniform_abs_mean": finite_or_nan(base.uniform.abs().mean()) if base.uniform.numel() else 0.0,
                   **credit.metrics}
        return TokenCreditAdvantages(credit.tokens, metrics, credit.token_weights if self.per_reward else None,
                                     credit=credit)

    def contributions(self, batch: RolloutBatch, result: Advantages) -> Contributions | None:
        """Each reward's part moved by its signal (the module docstring); None where the method's
        change is not reward by reward (KTAE's summed form)."""
        credit = result.credit if isinstance(result, TokenCreditAdvantages) else self.advantages(batch).credit
        if credit.per_reward is None:
            return None
        return Contributions(credit.per_reward, reward_weights=self.aggregator.reward_weights(batch),
                             token_weights=credit.token_weights, relevance_weighted=credit.weighted)


def supplied_rows(signal: Tensor | None, mask: Tensor) -> Tensor:
    """[B] bool: the responses whose per-token signal ([B,T], NaN = not supplied) is finite on every
    valid token (and that have one)."""
    if signal is None:
        return torch.zeros(mask.shape[0], dtype=torch.bool, device=mask.device)
    bad = (~torch.isfinite(signal.to(torch.float32)) & mask).any(dim=1)
    return mask.any(dim=1) & ~bad

