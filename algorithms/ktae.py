"""KTAE: key-token values from the association between tokens and outcomes within a group.

"KTAE: A Model-Free Algorithm to Key-Tokens Advantage Estimation in Mathematical Reasoning" (Sun
et al., NeurIPS 2025, arXiv 2505.16826). Reads the sampled token ids (``batch.token_ids[B,T]``,
``ReplayRequest.TOKEN_IDS``, no forward pass). For one group and one outcome, its responses are
split into positive (outcome above the group's mean: the correct ones, for a 0/1 reward) and the
others. For every token id v used in the group, a 2x2 table counts the positive responses that
contain v (a) and do not (c), the others that do (b) and do not (d). Then

    F(v)  = exp(-2 p) with p the two-sided p-value of Fisher's exact test of the table (0 where p = 1),
    IG(v) = H(Y) - H(Y | v present) in bits (Y: positive or not),
    x(v)  = asin(sqrt(a / (a + c))) - asin(sqrt(b / (b + d)))  (direction: Cohen's h of the two rates),
    KT(v) = s tanh( (alpha F(v) + beta IG(v)) x(v) / (2 (alpha + beta)) ),

which is s (2 sigmoid(z) - 1) in the public code's form, and each token t of a response in the group
gets A_t = A + KT(y_t): the key-token value is added to the response's advantage (in units of the
group z-score). alpha, beta and s are ``fisher_weight``, ``ig_weight`` and ``scale`` (the public
code's 1, 1 and 1). Our choices: the public code also adds a term-frequency ratio to x; it is left
out, so that a token whose presence rate is the same among positive and other responses (no
association) gets exactly 0; p is taken as 1 within 1e-9.

Per reward (``ktae``, mrbench's construction; the paper has one 0/1 correctness reward): every
reward k has its own outcome (r_k above its group mean), tables and values KT_k; reward k's part
becomes a_{j,k} + c_k KT_k(y_t) rs_j / scale (its group z-score plus the value, through GDPO's
weight and rescale), so A_t = U_j + s sum_k c_k KT_k(y_t) rs_j / scale, s MRTPO's Eq. 8 bound
(:mod:`algorithms.token_credit`; 1 unless the values would carry more than the uniform advantage's
second moment). Summed (``ktae-summed``, the
paper's own form): the outcome is the summed reward, the advantage GRPO's, A_t = U_j + KT(y_t).
Only groups whose outcome varies get values; with no association every value is 0 and the
underlying advantage is reproduced exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from algorithms.base import (
    ReplayRequest,
    RolloutBatch,
    check,
    dense_groups,
    finite_or_nan,
    group_stats,
    rewards_varying_in_group,
)
from algorithms.grpo import summed_rewards
from algorithms.registry import ALGORITHMS
from algorithms.token_credit import Credit, TokenCredit, Underlying
from mrbench_core.fields import setting

#: a Fisher p-value within this of 1 counts as 1 (no evidence: F = 0)
P_ONE_TOL = 1e-9


@dataclass
class KTAEConfig:
    """fisher_weight, ig_weight: alpha and beta of the key-token value; scale: its largest size."""

    fisher_weight: float = setting(1.0, help="weight of Fisher's exact test in the key-token value (the paper's "
                                             "alpha; its code: 1)", ge=0)
    ig_weight: float = setting(1.0, help="weight of the information gain in the key-token value (the paper's beta; "
                                         "its code: 1)", ge=0)
    scale: float = setting(1.0, help="largest key-token value, in units of a group z-score (its code: 1; 0 = the "
                                     "underlying advantage exactly)", ge=0)

    def __post_init__(self) -> None:
        check(self.fisher_weight + self.ig_weight > 0, "--algo.fisher_weight + --algo.ig_weight must be > 0 (the "
                                                       "value is their weighted mean)")


def _log_comb(n: Tensor, k: Tensor) -> Tensor:
    return torch.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma(n - k + 1)


def fisher_p(a: Tensor, b: Tensor, c: Tensor, d: Tensor) -> Tensor:
    """Two-sided p-value of Fisher's exact test of each 2x2 table (float64 counts [U]): the summed
    hypergeometric probability of every table with the same margins that is at most as likely as
    the observed one (relative tolerance 1e-7, as SciPy uses)."""
    n, row, col = a + b + c + d, a + b, a + c
    low = (row + col - n).clamp_min(0)
    high = torch.minimum(row, col)
    xs = torch.arange(int(high.max()) + 1 if high.numel() else 1, dtype=a.dtype, device=a.device)
    grid = xs.unsqueeze(0).expand(a.shape[0], -1)
    valid = (grid >= low.unsqueeze(1)) & (grid <= high.unsqueeze(1))
    safe = torch.where(valid, grid, low.unsqueeze(1))
    log_p = _log_comb(col.unsqueeze(1), safe) + _log_comb((n - col).unsqueeze(1), row.unsqueeze(1) - safe) \
        - _log_comb(n, row).unsqueeze(1)
    p = torch.where(valid, log_p.exp(), torch.zeros_like(log_p))
    observed = (_log_comb(col, a) + _log_comb(n - col, row - a) - _log_comb(n, row)).exp()
    return (p * (p <= observed.unsqueeze(1) * (1 + 1e-7))).sum(1).clamp(0.0, 1.0)


def _binary_entropy(p: Tensor) -> Tensor:
    q = 1 - p
    return -(torch.where(p > 0, p * torch.log2(p.clamp_min(1e-300)), torch.zeros_like(p))
             + torch.where(q > 0, q * torch.log2(q.clamp_min(1e-300)), torch.zeros_like(q)))


def information_gain(a: Tensor, b: Tensor, c: Tensor, d: Tensor) -> Tensor:
    """H(Y) - H(Y | X) in bits, Y = positive or not, X = token present or not (float64 counts)."""
    n = a + b + c + d
    with_v, without = a + b, c + d
    h_y = _binary_entropy((a + c) / n)
    h_with = _binary_entropy(torch.where(with_v > 0, a / with_v.clamp_min(1), torch.zeros_like(a)))
    h_without = _binary_entropy(torch.where(without > 0, c / without.clamp_min(1), torch.zeros_like(c)))
    return (h_y - with_v / n * h_with - without / n * h_without).clamp_min(0.0)


def key_token_values(ids: Tensor, mask: Tensor, positive: Tensor, fisher_weight: float, ig_weight: float,
                     scale: float) -> Tensor:
    """KT(y_t) [n,T] float32 for the n responses of one group and one outcome (``positive[n]``, the
    module docstring); 0 off the valid tokens and where no response or every response is positive."""
    out = torch.zeros(ids.shape, dtype=torch.float32, device=ids.device)
    P = int(positive.sum())
    N = positive.numel() - P
    if P == 0 or N == 0 or not bool(mask.any()):
        return out
    rows = torch.arange(ids.shape[0], device=ids.device).unsqueeze(1).expand_as(ids)[mask]
    vocab, inverse = torch.unique(ids[mask], return_inverse=True)
    present = torch.zeros(ids.shape[0], vocab.numel(), dtype=torch.bool, device=ids.device)
    present[rows, inverse] = True
    a = present[positive].sum(0).to(torch.float64)
    b = present[~positive].sum(0).to(torch.float64)
    c, d = P - a, N - b
    p = fisher_p(a, b, c, d)
    F = torch.where(p < 1 - P_ONE_TOL, torch.exp(-2 * p), torch.zeros_like(p))
    ig = information_gain(a, b, c, d)
    x = torch.asin(torch.sqrt(a / P)) - torch.asin(torch.sqrt(b / N))
    z = (fisher_weight * F + ig_weight * ig) * x / (fisher_weight + ig_weight)
    value = (scale * torch.tanh(z / 2)).to(torch.float32)
    out[mask] = value[inverse]
    return out


def outcome_values(outcome: Tensor, group_ids: Tensor, ids: Tensor, mask: Tensor, config: KTAEConfig) -> Tensor:
    """KT[B,T] for one outcome column ``outcome[B]`` (NaN: the response has no such outcome): each
    group whose outcome varies gets its own tables; everything else 0."""
    out = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    st = group_stats(outcome.unsqueeze(1).to(torch.float32), group_ids)
    index, groups = dense_groups(group_ids)
    present = ~torch.isnan(outcome)
    for g in range(groups):
        if not bool(st.varying[g, 0]):
            continue
        members = (index == g) & present
        positive = outcome[members] > st.mean[g, 0]
        out[members] = key_token_values(ids[members], mask[members], positive, config.fisher_weight,
                                        config.ig_weight, config.scale)
    return out


@ALGORITHMS.register("ktae")
class KTAE(TokenCredit):
    """KTAE (NeurIPS 2025): token-outcome key-token values added per reward on GDPO (mrbench's construction).

    The paper's method is single-reward; ``ktae-summed`` is its own form on the summed reward."""

    replay_request = ReplayRequest.TOKEN_IDS
    config_class = KTAEConfig

    def needs_replay(self, step: int) -> bool:
        return self.config.scale > 0.0

    def credit(self, batch: RolloutBatch, base: Underlying) -> Credit:
        mask = batch.response_mask
        B, K = batch.rewards.shape
        zero = torch.zeros((), dtype=torch.float32, device=mask.device)
        if self.config.scale == 0.0:
            values = torch.zeros(B, K if self.per_reward else 1, mask.shape[1], device=mask.device)
        else:
            if batch.token_ids is None:
                raise ValueError(f"{self.name} at step {batch.step} needs batch.token_ids [B,T] from the "
                                 f"{ReplayRequest.TOKEN_IDS.value} request; got None")
            ids = batch.token_ids.to(torch.long)
            if self.per_reward:
                columns = [batch.rewards[:, k] for k in range(K)]
            else:
                grpo = self.aggregator
                weighted = batch.rewards.float() if grpo.config.weights is None else \
                    batch.rewards.float() * grpo.reward_weights(batch)
                columns = [summed_rewards(weighted)]
            values = torch.stack([outcome_values(col, batch.group_ids, ids, mask, self.config) for col in columns], 1)
        units = base.unit[:, :values.shape[1]]
        moved = units.unsqueeze(-1) * values  # [B,K',T]
        s = self.bound(base, moved, mask)
        tokens = torch.where(mask, base.uniform.unsqueeze(1) + s * moved.sum(dim=1), zero)
        valid = mask.unsqueeze(1)
        nonzero = values[valid.expand_as(values)]
        metrics = {"key_token_abs_mean": finite_or_nan(nonzero.abs().mean()) if nonzero.numel() else 0.0,
                   "key_token_max": finite_or_nan(nonzero.abs().max()) if nonzero.numel() else 0.0,
                   "bound_scale": finite_or_nan(s)}
        if not self.per_reward:
            return Credit(tokens, None, None, torch.zeros(B, K, dtype=torch.bool, device=mask.device), metrics)
        per_reward = torch.where(valid, base.reward_parts.unsqueeze(-1) + s * moved, zero)
        weighted = rewards_varying_in_group(batch.rewards, batch.group_ids) & (self.config.scale > 0.0)
        return Credit(tokens, per_reward, None, weighted, metrics)


@ALGORITHMS.register("ktae-summed")
class KTAESummed(KTAE):
    """KTAE (NeurIPS 2025) on the summed reward's GRPO advantage: the paper's own, single-reward form."""

    per_reward = False
