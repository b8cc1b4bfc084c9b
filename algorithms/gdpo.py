"""GDPO (paper Eq. 2) and the response-level aggregation every reweighter shares.

A response-level method is described by an :class:`Aggregate`:

* ``contributions[B,K]``: reward k's share of response j's advantage before the batch rescale
  (GDPO: c_k * A_k with A_k the group z-score of Eq. 1). Their sum over k is S^{(j)}.
* ``response_scale[B]``: a factor applied after the rescale (1 except GD2PO's kept share).
* ``keep[B]``: which responses enter the batch statistics (all except GD2PO's dropped ones).

The token advantage is then ``(S - shift) / scale * response_scale`` on every valid token, where
the batch rescale gives (shift, scale) from the response-level S (``rescale`` config):

* ``"paper"`` (default): shift 0, scale = std_B(S) + eps, the SAMPLE std over the batch's
  responses, exactly as the paper writes S / std_B(S) (eps: ``rescale_eps``, default 1e-6).
* ``"verl"``: masked whitening over valid TOKENS (each response's S repeated T_j times):
  shift = token mean, scale = sqrt(unbiased token variance + 1e-8).
* ``"trl"``: over RESPONSES, shift = mean(S), scale = std(S) + 1e-4 (sample std).
* ``"none"``: shift 0, scale 1.

In every mode a batch whose spread is at or below eps (std <= eps; for "verl" the token variance
<= eps) is shifted but not divided (scale 1): see :func:`rescale_affine`.

MRTPO (``mrtpo.py``) keeps this (shift, scale), computed from the UNIFORM S, and applies it to
its per-token reallocation, so beta = 0 gives GDPO exactly.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
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
    finite_or_nan,
    group_standardise,
    masked_mean,
    masked_var,
    sample_std,
)
from algorithms.registry import ALGORITHMS
from algorithms.weights import WeightsError, normalise_weights, weights_at
from mrbench_core.fields import setting

RESCALE_MODES = ("paper", "verl", "trl", "none")
DEFAULT_RESCALE_EPS = {"paper": 1e-6, "verl": 1e-8, "trl": 1e-4, "none": 0.0}


@dataclass
class Aggregate:
    """Response-level decomposition of an advantage (see the module docstring)."""

    contributions: Tensor  # [B,K]
    response_scale: Tensor  # [B]
    keep: Tensor  # [B] bool

    @property
    def uniform(self) -> Tensor:
        """S^{(j)} = sum_k contributions[j, k]."""
        return self.contributions.sum(dim=1)

    def reward_parts(self, scale: Tensor) -> Tensor:
        """[B,K] float32: a_{j,k} = C_k^{(j)} rs_j / scale, reward k's part of response j's advantage
        after the batch rescale's division (before its shift)."""
        return self.contributions.to(torch.float32) * self.response_scale.to(torch.float32).unsqueeze(1) / scale


@dataclass
class ReweightedAdvantages(Advantages):
    """:class:`~algorithms.base.Advantages` of a response-level method, with the aggregate and the
    batch rescale they came from (0-d tensors ``shift`` and ``scale``), which its per-reward split
    reads instead of computing them again."""

    aggregate: Aggregate = field(kw_only=True)
    shift: Tensor = field(kw_only=True)
    scale: Tensor = field(kw_only=True)


@dataclass
class AggregateConfig:
    """Fields every response-level method shares.

    eps: Eq. 1 denominator epsilon (1e-6, GDPO's verl value; TRL uses 1e-4).
    rescale: batch rescale, one of "paper", "verl", "trl", "none".
    rescale_eps: epsilon of the rescale; None = the mode's default (paper 1e-6, verl 1e-8, trl 1e-4).
    """

    eps: float = setting(1e-6, help="epsilon of Eq. 1's per-reward group z-score (GDPO's verl value; TRL: 1e-4)",
                         ge=0)
    rescale: str = setting("paper", help="batch rescale of the summed advantage (paper: Eq. 2, S / std_B(S))",
                           choices=RESCALE_MODES)
    rescale_eps: float | None = setting(None, help="epsilon of the batch rescale; null: the mode's own (paper "
                                                   "1e-6, verl 1e-8, trl 1e-4)", ge=0)

    def __post_init__(self) -> None:
        """Where a subclass checks a constraint between its fields (``super().__post_init__()``
        first); each field's own range is declared with ``setting(ge=..., choices=...)`` and checked
        by :func:`algorithms.base.build_config`."""

    @property
    def effective_rescale_eps(self) -> float:
        return DEFAULT_RESCALE_EPS[self.rescale] if self.rescale_eps is None else float(self.rescale_eps)


def rescale_affine(S: Tensor, keep: Tensor, mask: Tensor, mode: str, eps: float) -> tuple[Tensor, Tensor]:
    """(shift, scale) of the batch rescale A = (S - shift) / scale; see the module docstring.

    A batch whose spread (the std of the mode) is at or below ``eps`` is not divided (scale 1):
    its differences are rounding residue, and dividing them by about eps would turn a batch
    whose S is almost constant (one kept response under GD2PO, a non-centred S under "paper")
    into advantages of order 1/eps.
    """
    S = S.to(torch.float32)
    kept = S[keep]
    zero = torch.zeros((), dtype=S.dtype, device=S.device)
    one = torch.ones((), dtype=S.dtype, device=S.device)
    if mode == "none":
        return zero, one
    if mode in ("paper", "trl"):
        shift = kept.mean() if mode == "trl" and kept.numel() else zero
        spread = sample_std(kept)
        return shift, torch.where(spread > eps, spread + eps, one)
    if mode == "verl":
        token_mask = mask & keep.unsqueeze(1)
        values = S.unsqueeze(1).expand_as(mask)
        var = masked_var(values, token_mask)
        return masked_mean(values, token_mask), torch.where(var > eps, torch.sqrt(var + eps), one)
    raise ValueError(f"unknown rescale mode {mode!r}; known: {RESCALE_MODES}")


class Reweighter(Algorithm):
    """A response-level method: rewards -> :class:`Aggregate` -> one advantage per response.

    Subclasses implement :meth:`aggregate`. MRTPO composes with any reweighter by weighting each
    column of ``contributions`` per token (``mrtpo+<name>``).
    """

    config_class = AggregateConfig

    @abstractmethod
    def aggregate(self, batch: RolloutBatch) -> Aggregate:
        """Per-reward contributions, response scale and kept responses for this batch."""

    def group_advantages(self, batch: RolloutBatch) -> Tensor:
        """A_k of Eq. 1 (0 for NaN rewards, constant rewards and groups of one)."""
        return group_standardise(batch.rewards, batch.group_ids, self.config.eps)

    def rescaled(self, agg: Aggregate, mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """(advantage[B], shift, scale): A = (S - shift) / scale * response_scale, with (shift, scale)
        the batch rescale of the uniform S (module docstring)."""
        shift, scale = rescale_affine(agg.uniform, agg.keep, mask, self.config.rescale,
                                      self.config.effective_rescale_eps)
        adv = (agg.uniform.to(torch.float32) - shift) / scale * agg.response_scale.to(torch.float32)
        return adv, shift, scale

    def response_advantages(self, batch: RolloutBatch) -> Tensor:
        """[B]: the rescaled response-level advantage (the value every valid token receives)."""
        return self.rescaled(self.aggregate(batch), batch.response_mask)[0]

    def reward_weights(self, batch: RolloutBatch) -> Tensor | None:
        """The per-reward weights c_k this method uses on this batch, when it has them (for logs)."""
        return None

    def advantages(self, batch: RolloutBatch) -> Advantages:
        agg = self.aggregate(batch)
        response_adv, shift, scale = self.rescaled(agg, batch.response_mask)
        adv = broadcast_to_tokens(response_adv, batch.response_mask)
        out = {
            "adv_abs_mean": finite_or_nan(masked_mean(adv.abs(), batch.response_mask)),
            "uniform_abs_mean": finite_or_nan(agg.uniform.abs().mean()) if agg.uniform.numel() else 0.0,
            "rescale_shift": finite_or_nan(shift),
            "rescale_scale": finite_or_nan(scale),
            "kept_fraction": finite_or_nan(agg.keep.float().mean()) if agg.keep.numel() else 0.0,
        }
        weights = self.reward_weights(batch)
        if weights is not None:
            out.update({f"reward_weight_{k}": finite_or_nan(w) for k, w in enumerate(weights.tolist())})
        return ReweightedAdvantages(adv, out, aggregate=agg, shift=shift, scale=scale)

    def contributions(self, batch: RolloutBatch, result: Advantages) -> Contributions:
        """a_{j,k} = C_k^{(j)} rs_j / scale on every valid token of response j: the parts sum to the
        advantage plus the rescale's shift, shift rs_j / scale (0 in the paper's mode)."""
        if isinstance(result, ReweightedAdvantages):
            agg, scale = result.aggregate, result.scale
        else:  # a subclass whose advantages() returns plain Advantages
            agg = self.aggregate(batch)
            scale = self.rescaled(agg, batch.response_mask)[2]
        m = batch.response_mask.unsqueeze(1).to(torch.float32)
        return Contributions(agg.reward_parts(scale).unsqueeze(-1) * m, reward_weights=self.reward_weights(batch))


@dataclass
class GDPOConfig(AggregateConfig):
    """GDPO: ``weights`` = c_k: a list (one per reward column), or reward name -> number or schedule
    over steps (constant, linear, cosine, step; :mod:`algorithms.weights`); None = all 1."""

    weights: tuple[float, ...] | dict[str, Any] | str | None = setting(
        None, help="c_k per reward: a list (one per reward column), or reward name -> number or schedule over "
                   "steps (constant, linear, cosine, step); null: all 1")

    def __post_init__(self) -> None:
        super().__post_init__()
        try:
            self.weights = normalise_weights(self.weights)
        except WeightsError as exc:
            raise ConfigError(str(exc)) from None


def column_weights(weights: Any, K: int, like: Tensor, batch: RolloutBatch | None = None) -> Tensor:
    """The c_k in force as a tensor [K] (all ones when None); a length mismatch is an error. A
    schedule or a mapping by name is evaluated at ``batch``'s step and column names."""
    if batch is None:
        return weights_at(weights, K, 0, None, None, like)
    return weights_at(weights, K, batch.step, batch.total_steps, batch.reward_names, like)


@ALGORITHMS.register("gdpo")
class GDPO(Reweighter):
    """GDPO: per-reward group z-scores, weighted sum, batch rescale (paper Eq. 2).

    A_k^{(j)} = (r_k^{(j)} - mu_k) / (sigma_k + eps); S^{(j)} = sum_k c_k A_k^{(j)};
    token advantage = rescale(S^{(j)}) on every valid token (default S / (std_B(S) + eps)).
    """

    config_class = GDPOConfig

    def aggregate(self, batch: RolloutBatch) -> Aggregate:
        A = self.group_advantages(batch).to(torch.float32)
        c = column_weights(self.config.weights, batch.num_rewards, A, batch)
        B = batch.num_responses
        return Aggregate(A * c, torch.ones(B, device=A.device), torch.ones(B, dtype=torch.bool, device=A.device))

    def reward_weights(self, batch: RolloutBatch) -> Tensor | None:
        return column_weights(self.config.weights, batch.num_rewards, batch.rewards, batch)

