"""What an algorithm returns for one batch: its :class:`Advantages` (from
:meth:`~algorithms.base.Algorithm.advantages`) and, for the per-reward diagnostics, the split of
that advantage over the rewards, :class:`Contributions` (from
:meth:`~algorithms.base.Algorithm.contributions`). Both are re-exported by :mod:`algorithms.base`."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

__all__ = ["Advantages", "Contributions"]


@dataclass(frozen=True)
class Contributions:
    """How an algorithm's token advantage splits over the rewards of one batch: what
    :meth:`Algorithm.contributions` returns, and all the per-reward diagnostics
    (:mod:`algorithms.diagnostics`) read of an algorithm.

    - ``per_token[B,K,T]`` float32: reward k's part of response j's advantage at token t, 0 off the
      valid tokens and where reward k does not apply. Summed over k it is the token advantage
      (before a batch rescale's shift, for a method with one);
    - ``reward_weights[K]``: the c_k in force at the batch's step, for a method that weights its
      rewards (``reward/<r>/weight``); None for one that does not;
    - ``relevance_weighted[B,K]`` bool: the (response, reward) pairs whose credit follows a token
      signal (MRTPO's relevance, the entropy, KTAE's key tokens): the ``credit/<r>/q_mean``,
      ``top80_share`` and ``read_mass`` entries; None for a method that gives every token of a
      response the same credit, or whose rewards share each token's credit;
    - ``token_weights[B,K,T]``: the per-reward token weights of a method that weights each reward's
      part multiplicatively (MRTPO's Eq. 6 w, 1 where uniform; needs ``relevance_weighted``), for
      ``top80_share``; None otherwise (KTAE adds to the part instead).
    """

    per_token: Tensor
    reward_weights: Tensor | None = None
    token_weights: Tensor | None = None
    relevance_weighted: Tensor | None = None

    def __post_init__(self) -> None:
        if self.per_token.dim() != 3:
            raise ValueError(f"per_token must be [B, K, T], got shape {tuple(self.per_token.shape)}")
        B, K, _ = self.per_token.shape
        if self.reward_weights is not None and tuple(self.reward_weights.shape) != (K,):
            raise ValueError(f"reward_weights must be [K={K}], got shape {tuple(self.reward_weights.shape)}")
        if self.token_weights is not None and self.relevance_weighted is None:
            raise ValueError("token_weights need relevance_weighted, the pairs they apply to")
        if self.token_weights is not None and self.token_weights.shape != self.per_token.shape:
            raise ValueError(f"token_weights must have per_token's shape {tuple(self.per_token.shape)}, "
                             f"got {tuple(self.token_weights.shape)}")
        if self.relevance_weighted is not None and tuple(self.relevance_weighted.shape) != (B, K):
            raise ValueError(f"relevance_weighted must be [B={B}, K={K}], got "
                             f"{tuple(self.relevance_weighted.shape)}")


@dataclass
class Advantages:
    """What :meth:`Algorithm.advantages` returns for one batch, from one computation.

    - ``tokens[B,T]``: float32 token advantages, 0 where ``response_mask`` is False;
    - ``metrics``: the scalars the backend logs as ``algo/<key>``;
    - ``reward_weights[B,K,T]``: the per-reward token weights when the algorithm has them (MRTPO's
      Eq. 6 weights ``w``; None otherwise, and for one profile shared by all rewards), which the
      credit log records, so that nothing is computed a second time for it.

    A family whose per-reward split (:meth:`Algorithm.contributions`) reads intermediate quantities
    of the computation returns a subclass that declares them as typed fields
    (:class:`~algorithms.gdpo.ReweightedAdvantages`, :class:`~algorithms.mrtpo.MRTPOAdvantages`).

    ``tokens, metrics = algo.advantages(batch)`` unpacks as the earlier ``(adv, metrics)`` pair did.
    """

    tokens: Tensor
    metrics: dict[str, float] = field(default_factory=dict)
    reward_weights: Tensor | None = None

    def __iter__(self) -> Iterator[Any]:
        yield self.tokens
        yield self.metrics

    @classmethod
    def of(cls, value: Advantages | tuple[Tensor, Mapping[str, float]]) -> Advantages:
        """``value`` as :class:`Advantages`: a plugin written against the earlier contract may return
        the ``(tokens, metrics)`` pair."""
        if isinstance(value, Advantages):
            return value
        tokens, metrics = value
        return cls(tokens, dict(metrics))
