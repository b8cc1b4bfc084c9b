"""Response-level reweighters on top of GDPO (paper Table 8): SAW, DARA, DVAO, GD2PO, SA-MRPO.

Each one only changes how the per-reward group advantages are combined into one advantage per
response (an :class:`~algorithms.gdpo.Aggregate`); every token of a response then shares it.
All compose with MRTPO (``mrtpo+saw`` ...): MRTPO weights each reward's contribution per token.
Reward columns are compared across the batch, which assumes column k means the same reward in
every prompt (true for text2sql and toolcall; not for instruction following, where the paper
does not apply reweighting). Statistics that decide weights are computed without gradients.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from algorithms.base import RolloutBatch, check, group_stats
from algorithms.gdpo import RESCALE_MODES, Aggregate, AggregateConfig, Reweighter
from algorithms.registry import ALGORITHMS
from mrbench_core.fields import setting


def _ones(batch: RolloutBatch) -> tuple[Tensor, Tensor]:
    B, dev = batch.num_responses, batch.rewards.device
    return torch.ones(B, device=dev), torch.ones(B, dtype=torch.bool, device=dev)


def column_stats(rewards: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per column over non-NaN entries: (count[K], mean[K], sample std[K]; 0 when count < 2)."""
    valid = ~torch.isnan(rewards)
    r0 = torch.where(valid, rewards, torch.zeros_like(rewards))
    count = valid.sum(0).to(rewards.dtype)
    mean = r0.sum(0) / count.clamp_min(1)
    ss = (torch.where(valid, rewards - mean, torch.zeros_like(rewards)) ** 2).sum(0)
    std = torch.where(count >= 2, torch.sqrt(ss / (count - 1).clamp_min(1)), torch.zeros_like(ss))
    return count, mean, std


# ---------------------------------------------------------------------------------------------- SAW


@dataclass
class SAWConfig(AggregateConfig):
    """cv_shift: per-reward constant added before the CV; None = from the declared reward ranges
    (``batch.reward_low``): a reward that can be negative is shifted by -low, so the public code's
    +3 on the [-3,3] correctness reward, and no shift for rewards in [0, ...] or undeclared ones.
    shift_from_ranges: False turns that default off. cv_eps: 1e-8 in both CV and normalisation."""

    cv_shift: tuple[float, ...] | None = setting(None, help="per-reward constant added before the coefficient of "
                                                           "variation; null: from the declared reward ranges")
    shift_from_ranges: bool = setting(True, help="shift a reward that can be negative by -low (the public SAW "
                                                 "code's +3 on [-3, 3]); false: no default shift")
    cv_eps: float = setting(1e-8, help="epsilon of the coefficient of variation and of its normalisation")


@ALGORITHMS.register("saw")
class SAW(Reweighter):
    """SAW (stage-aware weighting): c_k from each reward's coefficient of variation in the batch.

    CV_k = std_B(r_k + shift_k) / (|mean_B(r_k + shift_k)| + 1e-8) (shift_k: ``cv_shift``, else
    max(0, -low_k) from the task's declared ranges, see :class:`SAWConfig`) with the SAMPLE std over the
    batch's responses where r_k is not NaN (CV 0 with fewer than two); with K' the number of reward
    columns present in the batch, c_k = K' * CV_k / (sum_k CV_k + 1e-8), so the weights sum to K'
    (paper App. B: three weights sum to three); if every CV is 0, c_k = 1. Then S = sum_k c_k A_k
    and the GDPO batch rescale.
    """

    config_class = SAWConfig

    def reward_weights(self, batch: RolloutBatch) -> Tensor:
        r = batch.rewards.detach().to(torch.float32)
        r = r + self.shifts(batch).to(r.device)
        count, mean, std = column_stats(r)
        cv = std / (mean.abs() + self.config.cv_eps)
        present = float((count > 0).sum())
        total = cv.sum()
        if float(total) == 0.0:
            return torch.ones_like(cv)
        return present * cv / (total + self.config.cv_eps)

    def shifts(self, batch: RolloutBatch) -> Tensor:
        """[K]: the constant added to each reward column before its CV (see :class:`SAWConfig`)."""
        K = batch.num_rewards
        if self.config.cv_shift is not None:
            if len(self.config.cv_shift) != K:
                raise ValueError(f"cv_shift has {len(self.config.cv_shift)} entries, batch has K={K}")
            return torch.tensor(self.config.cv_shift, dtype=torch.float32)
        if not self.config.shift_from_ranges or batch.reward_low is None:
            return torch.zeros(K)
        low = batch.reward_low.detach().to(torch.float32).cpu()
        return torch.where(torch.isnan(low), torch.zeros_like(low), (-low).clamp_min(0.0))

    def aggregate(self, batch: RolloutBatch) -> Aggregate:
        A = self.group_advantages(batch).to(torch.float32)
        return Aggregate(A * self.reward_weights(batch), *_ones(batch))


# ---------------------------------------------------------------------------------------------- DARA


@dataclass
class DARAConfig(AggregateConfig):
    """cap: the largest boost lambda_k of a sparse reward's positive advantages."""

    cap: float = setting(3.0, help="largest boost lambda_k of a sparse reward's positive advantages", ge=1)


@ALGORITHMS.register("dara")
class DARA(Reweighter):
    """DARA (density-aware aggregation): boost the positive advantages of sparse rewards.

    Density d_k = (groups in which reward k varies) / (groups in which reward k is present).
    Decision (the source gives only "larger, capped"): lambda_k = min(cap, max_k' d_k' / d_k), so
    the densest reward keeps 1 and a reward varying in half as many groups gets 2; lambda_k = 1 if
    d_k = 0 (its advantages are 0 anyway). Contribution: A_k + (lambda_k - 1) * max(A_k, 0).
    """

    config_class = DARAConfig

    def densities(self, batch: RolloutBatch) -> Tensor:
        st = group_stats(batch.rewards.float(), batch.group_ids)
        return st.varying.float().sum(0) / (st.count > 0).float().sum(0).clamp_min(1)

    def reward_weights(self, batch: RolloutBatch) -> Tensor:
        """lambda_k (the boost of positive advantages)."""
        d = self.densities(batch)
        dmax = d.max() if d.numel() else torch.zeros(())
        lam = torch.where(d > 0, (dmax / d.clamp_min(1e-12)).clamp(max=self.config.cap), torch.ones_like(d))
        return lam

    def aggregate(self, batch: RolloutBatch) -> Aggregate:
        A = self.group_advantages(batch).to(torch.float32)
        lam = self.reward_weights(batch)
        return Aggregate(A + (lam - 1.0) * A.clamp_min(0.0), *_ones(batch))


# ---------------------------------------------------------------------------------------------- DVAO


@dataclass
class DVAOConfig(AggregateConfig):
    """DVAO uses eps 1e-8 and no batch rescale by default."""

    eps: float = setting(1e-8, help="epsilon of the per-reward group z-score (DVAO: 1e-8)", ge=0)
    rescale: str = setting("none", help="batch rescale of the summed advantage (DVAO: none)", choices=RESCALE_MODES)


@ALGORITHMS.register("dvao")
class DVAO(Reweighter):
    """DVAO: one variance-weighted ratio per group instead of per-reward z-scores.

    Per group g and reward k (over responses where r_k is not NaN): mu_gk and the POPULATION
    std sigma_gk; weights w_gk = sigma_gk / sum_k' sigma_gk' (within-group std normalised across
    rewards); A^{(j)} = sum_k w_gk (r_k^{(j)} - mu_gk) / (sum_k w_gk sigma_gk + eps).
    Contribution of reward k: w_gk (r_k - mu_gk) / (sum_k' w_gk' sigma_gk' + eps). A group where
    no reward varies gets 0. Default: no batch rescale.
    """

    config_class = DVAOConfig

    def aggregate(self, batch: RolloutBatch) -> Aggregate:
        r = batch.rewards.to(torch.float32)
        st = group_stats(r, batch.group_ids)
        idx, sigma = st.index, st.population_std
        dev = torch.where(~torch.isnan(r), r - st.mean[idx], torch.zeros_like(r))
        total_sigma = sigma.sum(1, keepdim=True)
        w = torch.where(total_sigma > 0, sigma / total_sigma.clamp_min(1e-30), torch.zeros_like(sigma))
        denom = (w * sigma).sum(1, keepdim=True) + self.config.eps
        contrib = w[idx] * dev / denom[idx]
        contrib = torch.where((total_sigma > 0)[idx].expand_as(contrib), contrib, torch.zeros_like(contrib))
        return Aggregate(contrib, *_ones(batch))


# ---------------------------------------------------------------------------------------------- GD2PO


@dataclass
class GD2POConfig(AggregateConfig):
    """sign_tol: |A_k| <= sign_tol counts as no sign. Default rescale: whitening over the kept
    responses ("trl": (S - mean) / (std + 1e-4))."""

    rescale: str = setting("trl", help="batch rescale over the kept responses (GD2PO: trl whitening)",
                           choices=RESCALE_MODES)
    sign_tol: float = setting(0.0, help="|A_k| at or below this counts as no sign")


@ALGORITHMS.register("gd2po")
class GD2PO(Reweighter):
    """GD2PO: drop responses whose per-reward advantages disagree in sign.

    A response is dropped when it has some A_k > tol and some A_k < -tol. S = sum_k A_k over the
    kept responses, whitened over the kept responses (default "trl" rescale); each kept
    response's advantage is multiplied by its group's share of kept responses (kept_g / n_g),
    which equals scaling that prompt's clipped surrogate (it is positively homogeneous in A).
    Dropped responses get 0.
    """

    config_class = GD2POConfig

    def aggregate(self, batch: RolloutBatch) -> Aggregate:
        A = self.group_advantages(batch).to(torch.float32)
        tol = self.config.sign_tol
        conflict = (A > tol).any(1) & (A < -tol).any(1)
        keep = ~conflict
        st = group_stats(keep.float().unsqueeze(1), batch.group_ids)
        share = (st.total / st.count.clamp_min(1))[st.index, 0]
        scale = torch.where(keep, share, torch.zeros_like(share))
        return Aggregate(A * keep.unsqueeze(1).float(), scale, keep)


# ---------------------------------------------------------------------------------------------- SA-MRPO


@dataclass
class SAMRPOConfig(AggregateConfig):
    """alpha: the largest discount (a saturated reward keeps weight 1 - alpha).
    low / high: per-reward ranges for the saturation; None = the batch's observed min / max."""

    alpha: float = setting(0.5, help="largest discount: a saturated reward keeps weight 1 - alpha", ge=0, le=1)
    low: tuple[float, ...] | None = setting(None, help="per-reward lower ends of the saturation; null: the batch's "
                                                       "observed min")
    high: tuple[float, ...] | None = setting(None, help="per-reward upper ends of the saturation; null: the "
                                                        "batch's observed max")

    def __post_init__(self) -> None:
        super().__post_init__()  # a constraint between fields; each field's range is declared above
        check((self.low is None) == (self.high is None), "--algo.low and --algo.high must be given together")


@ALGORITHMS.register("sa-mrpo")
class SAMRPO(Reweighter):
    """SA-MRPO (saturation-aware): discount each reward by how saturated it is in the batch.

    No public code; our definition: sat_k = clip((mean_B(r_k) - low_k) / (high_k - low_k), 0, 1)
    (0 when high_k == low_k), c_k = 1 - alpha * sat_k, S = sum_k c_k A_k, GDPO batch rescale.
    A reward most responses already earn gets less weight than one still being learnt.
    """

    config_class = SAMRPOConfig

    def reward_weights(self, batch: RolloutBatch) -> Tensor:
        r = batch.rewards.detach().to(torch.float32)
        K = r.shape[1]
        _, mean, _ = column_stats(r)
        if self.config.low is not None:
            if len(self.config.low) != K or len(self.config.high) != K:
                raise ValueError(f"low/high must have K={K} entries")
            lo = torch.tensor(self.config.low, device=r.device)
            hi = torch.tensor(self.config.high, device=r.device)
        else:
            big = torch.finfo(r.dtype).max
            hi = torch.where(torch.isnan(r), torch.full_like(r, -big), r).amax(0)
            lo = torch.where(torch.isnan(r), torch.full_like(r, big), r).amin(0)
        span = hi - lo
        sat = torch.where(span > 0, ((mean - lo) / span.clamp_min(1e-30)).clamp(0, 1), torch.zeros_like(mean))
        return 1.0 - self.config.alpha * sat

    def aggregate(self, batch: RolloutBatch) -> Aggregate:
        A = self.group_advantages(batch).to(torch.float32)
        return Aggregate(A * self.reward_weights(batch), *_ones(batch))
