"""MRTPO: each reward's group advantage goes mainly to the tokens relevant to that reward.

Inputs: the per-reward contributions C_k^{(j)} of a response-level aggregator (GDPO by default,
so C_k = A_k of Eq. 1; ``mrtpo+saw`` uses SAW's c_k A_k, and so on) and the relevance
q_{k,t} in [0,1] that the replay engine computed (paper Eq. 5, ``batch.relevance[B,K,T]``).
Paper: "Each Reward to Its Relevant Tokens: Reward-Specific Token-Level Credit Assignment for
Multi-Reward RL", arXiv 2610.21439 (MRTPO: Multi-Reward-to-Token Policy Optimization).

1. Weights (Eq. 6): w_{k,t} = (1 - beta_n) + beta_n * q_{k,t} / qbar_k, where qbar_k is the mean
   of q_{k,.} over the response's VALID tokens, so the weights average to exactly 1 over them.
   A (response, reward) whose relevance row is NaN or infinite on any valid token (not
   replayed), or whose q is all zero, keeps the uniform weight 1. Negative q is clamped to 0.
2. Warm-up (App. D): beta_n = beta * (3u^2 - 2u^3), u = min(n / N, 1); N = ``warmup_steps``.
3. Per-token sum (Eq. 7): S_t = sum_k C_k w_{k,t} = S + R_t with S = sum_k C_k (the uniform
   advantage) and R_t = sum_k C_k (w_{k,t} - 1), which has zero mean over each response.
4. The aggregator's batch rescale, with (shift, scale) computed from the UNIFORM S exactly as the
   aggregator does (GDPO: Eq. 7 divides by std_B(S)), and its response scale rs_j. Each response
   gets its uniform advantage U_j = (S_j - shift) / scale * rs_j, the aggregator's own value, and
   the reallocated part D_{j,t} = R_{j,t} / scale * rs_j in the same units.
5. Bound (Eq. 8), over the batch's valid tokens, on what the tokens actually receive:
   s = min(1, sqrt(sum_j T_j U_j^2 / sum_{j,t} D_{j,t}^2)) (s = 1 when D is 0 everywhere) and
   A_t = U_j + s D_{j,t}. With the paper's rescale (no shift, rs = 1) the common 1/scale cancels
   and this is Eq. 8 on S and R as the paper writes it. With a shift ("trl", "verl") or a response
   scale (GD2PO) Eq. 8 on the raw S would compare R with values the tokens never receive: one
   kept response under GD2PO has U = 0 but S != 0, and R / 1e-4 would reach the tokens.

Guarantee (bound on, every batch): the token advantages are finite, each response keeps its
uniform advantage U_j as its mean over its T_j valid tokens, and for every valid token

    |A_t - U_j| <= min( beta_n (T_j - 1) sum_k |a_{j,k}| ,  sqrt(sum_i T_i U_i^2) )

with a_{j,k} = C_k^{(j)} rs_j / scale, reward k's part of response j's advantage before the
shift (the first term because w_{k,t} - 1 lies in [-beta_n, beta_n (T_j - 1)]; the second
because one token's share of the reallocated second moment is at most all of it). So a batch
whose uniform advantages are all zero gets exactly zero token advantages. Without the bound
(``bound=False``) only the first term holds.
Beta = 0 (or w = 1 everywhere) gives D = 0 exactly, so the aggregator is reproduced bit for bit.

Ablations: ``mrtpo-joint`` uses one relevance profile q_t (``batch.joint_relevance[B,T]``, all
blocks replayed together) on the summed advantage: S_t = S w_t. ``mrtpo-shuffled`` permutes each
response's weights among its valid tokens (one permutation per response, shared by its rewards;
torch generator seeded from the ``shuffle`` stream of :mod:`mrbench_core.seeds` for (seed, step)),
keeping each weight distribution and the bound scale but destroying the alignment with tokens.

``mrtpo-oracle`` (upper bound) takes q from the tokens each verifier reports it read (0/1 masks,
``ReplayRequest.READ_SPANS``, no forward pass) instead of a replay; see :class:`MRTPOOracle`.

Backend hooks: ``needs_replay(step)`` is False while beta_n = 0 (the replay may be skipped and
``relevance`` left None); :func:`algorithms.base.rewards_varying_in_group` says which
(response, reward) pairs need a replay at all.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from algorithms.base import (
    Advantages,
    Algorithm,
    Contributions,
    ReplayRequest,
    RolloutBatch,
    config_with_aggregator,
    finite_or_nan,
    masked_mean,
    rewards_varying_in_group,
    warmup_factor,
)
from algorithms.gdpo import GDPO, Aggregate, Reweighter
from algorithms.registry import ALGORITHMS
from mrbench_core.fields import setting
from mrbench_core.seeds import SHUFFLE, stream_seed


@dataclass
class MRTPOConfig:
    """beta: share of each advantage that follows relevance (paper: 0.5).
    warmup_steps: N of the smoothstep warm-up (paper: 10; 0 = none). bound: Eq. 8 on/off.
    require_relevance: make a run whose varying rewards can never be replayed an error (by default
    the backend warns and records it: without relevance MRTPO trains as its aggregator)."""

    beta: float = setting(0.5, help="share of each reward's advantage that follows its token relevance "
                                    "(paper Eq. 6; 0 = GDPO exactly)", ge=0, lt=1)
    warmup_steps: int = setting(10, help="N of the smoothstep warm-up of beta (paper App. D: 10; 0 = none)", ge=0)
    bound: bool = setting(True, help="scale the reallocation so each response keeps its advantage's second "
                                     "moment (paper Eq. 8)")
    require_relevance: bool = setting(False, help="make a run whose varying rewards can never be replayed an error "
                                                  "(default: warn, and train as the aggregator)")


@dataclass
class MRTPOShuffledConfig(MRTPOConfig):
    """seed: base seed of the per-step permutations."""

    seed: int = setting(0, help="base seed of the per-step permutations (the shuffle stream)")


def relevance_weights(q: Tensor, mask: Tensor, beta: float) -> tuple[Tensor, Tensor]:
    """Eq. 6 weights w[B,K,T] (1 off the valid tokens) and has_relevance[B,K].

    q[B,K,T] relevance; mask[B,T] valid tokens. See the module docstring for NaN and zero rows.
    """
    valid = mask.unsqueeze(1).expand_as(q)
    q = q.to(torch.float32)
    bad_row = (~torch.isfinite(q) & valid).any(dim=-1)
    q0 = torch.where(valid & torch.isfinite(q), q.clamp_min(0.0), torch.zeros_like(q))
    n = valid.sum(dim=-1).to(torch.float32)
    qbar = q0.sum(dim=-1) / n.clamp_min(1)
    has = ~bad_row & (qbar > 0)
    w = (1.0 - beta) + beta * q0 / qbar.clamp_min(1e-30).unsqueeze(-1)
    w = torch.where(has.unsqueeze(-1) & valid, w, torch.ones_like(w))
    return w, has


def reallocated_part(contrib: Tensor, w: Tensor, mask: Tensor) -> Tensor:
    """Eq. 7's R[B,T] = sum_k C_k (w_{k,t} - 1) on valid tokens, 0 elsewhere (pre-rescale units)."""
    R = (contrib.to(torch.float32).unsqueeze(-1) * (w - 1.0)).sum(dim=1)
    return torch.where(mask, R, torch.zeros_like(R))


def bound_scale(uniform: Tensor, D: Tensor, mask: Tensor) -> Tensor:
    """Eq. 8's s = min(1, sqrt(sum_j T_j U_j^2 / sum D^2)) over valid tokens; 1 when D is 0."""
    one = torch.ones((), dtype=torch.float32, device=D.device)
    den = (D * D).sum()
    if float(den) == 0.0:
        return one
    num = (mask.sum(dim=1).to(torch.float32) * uniform * uniform).sum()
    return torch.minimum(one, torch.sqrt(num / den))


def shuffle_within_valid(w: Tensor, mask: Tensor, generator: torch.Generator) -> Tensor:
    """Permute w[B,K,T] along T among each response's valid tokens (same permutation for all k)."""
    B, T = mask.shape
    ar = torch.arange(T, dtype=torch.float32).expand(B, T)
    m = mask.cpu()
    in_order = torch.argsort(torch.where(m, ar, ar + T), dim=1)
    keys = torch.rand(B, T, generator=generator)
    shuffled = torch.argsort(torch.where(m, keys, 2.0 + ar), dim=1)
    source = torch.empty_like(in_order).scatter_(1, in_order, shuffled).to(w.device)
    return w.gather(2, source.unsqueeze(1).expand_as(w))


@dataclass(frozen=True)
class MRTPOComputation:
    """One batch's MRTPO computation (steps 1-5 of the module docstring); K' is K, or 1 for one
    joint profile (``mrtpo-joint``).

    - ``tokens[B,T]``: the token advantages A_t (0 off the valid tokens);
    - ``beta``: beta_n at the batch's step; ``bound_scale``: Eq. 8's s (a 0-d tensor, 1 without the bound);
    - ``reallocated[B,T]``: D_{j,t}, the reallocated part in the advantage's units;
    - ``uniform[B]``: U_j, the aggregator's own response advantage;
    - ``aggregate``: the aggregator's :class:`~algorithms.gdpo.Aggregate`;
    - ``relevance_weighted[B,K']`` bool: the pairs whose weights follow relevance;
    - ``token_weights[B,K',T]``: the Eq. 6 weights w after any ablation's change (1 where uniform).
    """

    tokens: Tensor
    beta: float
    bound_scale: Tensor
    reallocated: Tensor
    uniform: Tensor
    aggregate: Aggregate
    relevance_weighted: Tensor
    token_weights: Tensor


@dataclass
class MRTPOAdvantages(Advantages):
    """MRTPO's :class:`~algorithms.base.Advantages`, with the computation they came from (read by
    :meth:`MRTPO.contributions`)."""

    computation: MRTPOComputation = field(kw_only=True)


@ALGORITHMS.register("mrtpo")
class MRTPO(Algorithm):
    """MRTPO: per-reward token weights from replay relevance (Eq. 6-8) on GDPO's advantages."""

    replay_request = ReplayRequest.LEAVE_ONE_OUT
    config_class = MRTPOConfig
    aggregator_class: type[Reweighter] = GDPO
    #: the weights are one profile per reward (False: one profile for all, the joint ablation)
    per_reward_weights = True

    def __init__(self, **config: Any):
        self.config, self.aggregator = config_with_aggregator(self.name, self.config_class, self.aggregator_class,
                                                              config)

    def config_dict(self) -> dict[str, Any]:
        return {**self.aggregator.config_dict(), **dataclasses.asdict(self.config)}

    def effective_beta(self, step: int) -> float:
        """beta_n = beta * smoothstep(min(n / N, 1))."""
        return self.config.beta * warmup_factor(step, self.config.warmup_steps)

    def needs_replay(self, step: int) -> bool:
        return self.effective_beta(step) > 0.0

    # -- the pieces subclasses change -------------------------------------------------------------
    def token_weights(self, batch: RolloutBatch, agg: Aggregate, beta: float) -> tuple[Tensor, Tensor, Tensor]:
        """(contributions[B,K'], weights[B,K',T], has_relevance[B,K'])."""
        if batch.relevance is None:
            raise ValueError(f"{self.name} at step {batch.step} (beta_n={beta:.4g}) needs batch.relevance "
                             f"[B,K,T] from the replay kind {self.replay_request.value}; got None")
        w, has = relevance_weights(batch.relevance, batch.response_mask, beta)
        return agg.contributions, w, has

    # -- the shared computation -------------------------------------------------------------------
    def compute(self, batch: RolloutBatch) -> MRTPOComputation:
        """Token advantages plus the intermediate quantities the metrics, the per-reward split and
        the credit records read (:class:`MRTPOComputation`)."""
        agg = self.aggregator.aggregate(batch)
        beta = self.effective_beta(batch.step)
        mask = batch.response_mask
        if beta == 0.0:
            contrib = agg.contributions
            w = torch.ones(*contrib.shape, mask.shape[1], device=contrib.device)
            has = torch.zeros(contrib.shape, dtype=torch.bool, device=contrib.device)
        else:
            contrib, w, has = self.token_weights(batch, agg, beta)
        R = reallocated_part(contrib, w, mask)
        U, _shift, scale = self.aggregator.rescaled(agg, mask)
        D = R / scale * agg.response_scale.to(torch.float32).unsqueeze(1)
        one = torch.ones((), dtype=torch.float32, device=D.device)
        s = bound_scale(U, D, mask) if self.config.bound else one
        adv = torch.where(mask, U.unsqueeze(1) + s * D, torch.zeros_like(D))
        return MRTPOComputation(adv, beta, s, D, U, agg, has, w)

    def advantages(self, batch: RolloutBatch) -> MRTPOAdvantages:
        out = self.compute(batch)
        mask = batch.response_mask
        U = out.uniform
        uniform_sq = (mask.sum(1).float() * U * U).sum()
        realloc_sq = (out.reallocated ** 2).sum() * out.bound_scale ** 2
        varying = rewards_varying_in_group(batch.rewards, batch.group_ids)
        if out.relevance_weighted.shape[1] != varying.shape[1]:  # one joint profile per response
            varying = varying.any(dim=1, keepdim=True)
        coverage = (out.relevance_weighted & varying).sum() / varying.sum().clamp_min(1)
        metrics = {
            "beta_eff": out.beta,
            "bound_scale": finite_or_nan(out.bound_scale),
            "realloc_ratio": finite_or_nan(torch.sqrt(realloc_sq / uniform_sq)) if float(uniform_sq) > 0 else 0.0,
            "relevance_coverage": finite_or_nan(coverage),  # varying (response, reward) pairs with q
            "adv_abs_mean": finite_or_nan(masked_mean(out.tokens.abs(), mask)),
            "uniform_abs_mean": finite_or_nan(out.aggregate.uniform.abs().mean()) if U.numel() else 0.0,
        }
        return MRTPOAdvantages(out.tokens, metrics, out.token_weights if self.per_reward_weights else None,
                               computation=out)

    def contributions(self, batch: RolloutBatch, result: Advantages) -> Contributions:
        """a_{j,k} (1 + s (w_{k,t} - 1)) with a_{j,k} the aggregator's part of the advantage
        (:meth:`~algorithms.gdpo.Aggregate.reward_parts`) and s the Eq. 8 bound scale; a joint
        profile weights every reward alike (no per-reward token weights then). The parts sum to the
        token advantage, plus the aggregator's shift where it has one."""
        out = result.computation if isinstance(result, MRTPOAdvantages) else self.compute(batch)
        mask = batch.response_mask
        scale = self.aggregator.rescaled(out.aggregate, mask)[2]
        a = out.aggregate.reward_parts(scale)
        w = out.token_weights
        per_token = a.unsqueeze(-1) * (1.0 + out.bound_scale * (w - 1.0)) * mask.unsqueeze(1).to(torch.float32)
        weights = self.aggregator.reward_weights(batch)
        if w.shape[1] != a.shape[1]:  # one joint profile
            return Contributions(per_token, reward_weights=weights)
        return Contributions(per_token, reward_weights=weights, token_weights=w,
                             relevance_weighted=out.relevance_weighted & (out.beta > 0))


@ALGORITHMS.register("mrtpo-joint")
class MRTPOJoint(MRTPO):
    """mrtpo-joint (ablation): one relevance profile, all blocks replayed together, on the summed advantage.

    w_t = (1 - beta_n) + beta_n q_t / qbar, S_t = S w_t, then Eq. 8."""

    replay_request = ReplayRequest.JOINT
    per_reward_weights = False

    def token_weights(self, batch: RolloutBatch, agg: Aggregate, beta: float) -> tuple[Tensor, Tensor, Tensor]:
        if batch.joint_relevance is None:
            raise ValueError(f"{self.name} at step {batch.step} needs batch.joint_relevance [B,T]; got None")
        w, has = relevance_weights(batch.joint_relevance.unsqueeze(1), batch.response_mask, beta)
        return agg.uniform.unsqueeze(1), w, has


@ALGORITHMS.register("mrtpo-shuffled")
class MRTPOShuffled(MRTPO):
    """mrtpo-shuffled (ablation): MRTPO's weights permuted among each response's valid tokens."""

    config_class = MRTPOShuffledConfig

    def token_weights(self, batch: RolloutBatch, agg: Aggregate, beta: float) -> tuple[Tensor, Tensor, Tensor]:
        contrib, w, has = super().token_weights(batch, agg, beta)
        gen = torch.Generator().manual_seed(stream_seed(SHUFFLE, self.config.seed, batch.step))
        return contrib, shuffle_within_valid(w, batch.response_mask, gen), has


@ALGORITHMS.register("mrtpo-oracle")
class MRTPOOracle(MRTPO):
    """mrtpo-oracle (ablation, upper bound): MRTPO's reallocation on the tokens each verifier read.

    The relevance q_{k,t} is 1 on the tokens reward k's verifier reports it read (its verdict's
    character spans) and 0 elsewhere, so w_{k,t} = (1 - beta_n) + beta_n [t read] T_j / |read_k|:
    the share beta_n of C_k lands on the read tokens alone. No replay runs; the backend builds the
    masks from the verdicts (``read_spans``). A verifier that reports no span or reads the whole
    response gives a NaN row: uniform weight, as GDPO."""

    replay_request = ReplayRequest.READ_SPANS  # MRTPO's token weights, over the read masks


def compose(reweighter: type[Reweighter], base: type[MRTPO] = MRTPO) -> type[MRTPO]:
    """The class of ``<base.name>+<reweighter.name>`` (``mrtpo+saw``, ``mrtpo-oracle+saw``): the
    reweighter's contributions, ``base``'s token weights."""
    doc = (f"{base.name.upper()} on {reweighter.name.upper()}'s per-reward contributions "
           f"({reweighter.name}'s weights applied to A_k before the token weighting)")
    return type(f"{base.__name__}_{reweighter.__name__}", (base,),
                {"name": f"{base.name}+{reweighter.name}", "aggregator_class": reweighter, "__doc__": doc})
