"""Per-reward diagnostics of one batch (pure tensors): what each reward did to the advantages.

:func:`batch_diagnostics` returns flat ``{name: float}`` entries, one naming scheme for every
algorithm (docs/logging.md lists them all). ``<r>`` is a reward name (the task's ``reward_family``,
so a per-constraint reward of instruction following is aggregated by constraint type):

- ``reward/<r>/std``: the SAMPLE std of the reward over the batch's responses where it applies;
- ``reward/<r>/frac_groups_varying``: the share of the groups holding reward r where it takes at
  least two values (only those carry a group advantage); ``reward/<r>/frac_groups_no_signal`` = 1 - it;
- ``reward/<r>/weight``: the weight c_r in force at this step (algorithms that sum rewards);
- ``frac_groups_no_signal``: the share of groups in which no reward varies (their advantage is 0);
- ``adv/<r>/abs_mean`` and ``adv/<r>/mean``: reward r's part of the token advantage, |.| and signed,
  over the valid tokens of the responses where r applies (:func:`reward_contributions`);
- ``credit/<r>/replay_share``: the share of (response, r) pairs replayed (relevance computed);
- MRTPO family, over the replayed pairs: ``credit/<r>/q_mean`` (mean relevance q over valid
  tokens), ``credit/<r>/top80_share`` (the share of a response's tokens that hold 80% of reward r's
  Eq. 6 weight: ceil(0.8 T) / T when uniform, lower when concentrated), and where the verifier reports the
  characters it read, ``credit/<r>/read_mass`` (the share of reward r's credit mass |A_r,t| on the
  tokens it read) beside ``credit/<r>/read_tokens`` (the share of tokens read: the uniform baseline).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from algorithms.base import RolloutBatch, group_stats

TOP_MASS = 0.8


@dataclass
class Contributions:
    """Reward k's part of the token advantage, ``per_token[B,K,T]`` (0 off the valid tokens), and,
    for the MRTPO family, the Eq. 6 weights ``w[B,K,T]`` with ``has[B,K]`` (pairs weighted by
    relevance); ``weights[K]`` the c_k in force (None for methods without configured weights)."""

    per_token: Tensor
    w: Tensor | None = None
    has: Tensor | None = None
    weights: Tensor | None = None


def reward_contributions(algo: Any, batch: RolloutBatch, advantages: Any = None) -> Contributions | None:
    """How ``algo``'s token advantage splits over rewards, or None where it does not (CoRT, OPSD).
    ``advantages``: the step's :class:`~algorithms.base.Advantages` for ``batch``, whose
    ``internals`` are read instead of computing the aggregate (and MRTPO's weights) again.

    - GDPO and reweighters: a_{j,k} = C_k^{(j)} rs_j / scale on every valid token (C_k: the
      aggregate's contribution, rs: response scale, scale: the batch rescale); the parts sum to the
      advantage plus the rescale's shift, shift rs_j / scale (0 in the paper's mode).
    - MRTPO family: a_{j,k} (1 + s (w_{k,t} - 1)), s the Eq. 8 bound scale (a joint profile
      weights every reward alike); the parts sum to the token advantage (plus the same shift).
    - GRPO: c_k (r_{j,k} - mean_g(c_k r_k)) / (std_g(S) + eps) with S the weighted sum; the parts sum
      to the advantage when every reward applies to every response of the group.
    """
    from algorithms.gdpo import Reweighter
    from algorithms.grpo import GRPO, summed_rewards
    from algorithms.mrtpo import MRTPO

    mask = batch.response_mask
    m = mask.unsqueeze(1).to(torch.float32)
    internals = getattr(advantages, "internals", None)
    if isinstance(algo, MRTPO):
        out = internals if internals is not None else algo.compute(batch)
        agg = out["agg"]
        _, _shift, scale = algo.aggregator.rescaled(agg, mask)
        a = agg.contributions.to(torch.float32) * agg.response_scale.to(torch.float32).unsqueeze(1) / scale
        w = out["w"]
        per_token = a.unsqueeze(-1) * (1.0 + out["s"] * (w - 1.0)) * m
        weights = algo.aggregator.reward_weights(batch)
        if w.shape[1] != a.shape[1]:  # one joint profile
            return Contributions(per_token, weights=weights)
        return Contributions(per_token, w, out["has"] & (out["beta"] > 0), weights)
    if isinstance(algo, Reweighter):
        agg = internals["agg"] if internals is not None else algo.aggregate(batch)
        _, _shift, scale = algo.rescaled(agg, mask)
        a = agg.contributions.to(torch.float32) * agg.response_scale.to(torch.float32).unsqueeze(1) / scale
        return Contributions(a.unsqueeze(-1) * m, weights=algo.reward_weights(batch))
    if isinstance(algo, GRPO):
        c = algo.reward_weights(batch)
        r = batch.rewards.to(torch.float32) * c
        S = summed_rewards(r)
        st_s = group_stats(S.unsqueeze(1), batch.group_ids)
        present = ~torch.isnan(S)
        r_in = torch.where(present.unsqueeze(1), r, torch.full_like(r, float("nan")))
        st_r = group_stats(r_in, batch.group_ids)
        idx = st_s.index
        a = (r - st_r.mean[idx]) / (st_s.sample_std[idx] + algo.config.eps)
        ok = ~torch.isnan(r) & present.unsqueeze(1) & st_s.varying[idx]
        a = torch.where(ok, a, torch.zeros_like(a))
        return Contributions(a.unsqueeze(-1) * m, weights=c)
    return None


def name_index(names_per_response: Sequence[Sequence[str]], K: int) -> tuple[Tensor, list[str]]:
    """(ids[B,K] long, -1 where a response has no k-th reward; the sorted distinct names)."""
    names = sorted({n for row in names_per_response for n in row})
    pos = {n: i for i, n in enumerate(names)}
    ids = torch.full((len(names_per_response), K), -1, dtype=torch.long)
    for j, row in enumerate(names_per_response):
        for k, n in enumerate(row[:K]):
            ids[j, k] = pos[n]
    return ids, names


def top_mass_share(w: Tensor, mask: Tensor, mass: float = TOP_MASS) -> Tensor:
    """[B,K]: the fewest tokens holding ``mass`` of each row's weight w[B,K,T] (valid tokens only),
    as a share of the response's valid tokens."""
    valid = mask.unsqueeze(1).expand_as(w)
    v = torch.where(valid, w.to(torch.float32).clamp_min(0.0), torch.zeros_like(w, dtype=torch.float32))
    ordered = v.sort(dim=-1, descending=True).values
    total = ordered.sum(-1, keepdim=True)
    before = ordered.cumsum(-1) - ordered  # mass of the tokens ranked above each one
    needed = (before < mass * total * (1 - 1e-6)).sum(-1).to(torch.float32)
    n = mask.sum(-1, keepdim=True).to(torch.float32).expand_as(needed)
    return torch.where(n > 0, needed.minimum(n) / n.clamp_min(1), torch.zeros_like(needed))


def batch_diagnostics(batch: RolloutBatch, name_ids: Tensor, names: Sequence[str],
                      contributions: Contributions | None = None, read: Tensor | None = None,
                      read_known: Tensor | None = None) -> dict[str, float]:
    """The entries of the module docstring for one batch.

    ``name_ids[B,K]`` (-1: no reward) with ``names``; ``read[B,K,T]`` bool, the tokens the verifier
    of reward k read, meaningful where ``read_known[B,K]`` (the verifier reported spans)."""
    rewards, mask = batch.rewards.to(torch.float32), batch.response_mask
    B, K = rewards.shape
    present = ~torch.isnan(rewards) & (name_ids >= 0)
    st = group_stats(rewards, batch.group_ids)
    G = st.count.shape[0]
    has_cell = st.count > 0  # [G,K]
    cell_varying = st.varying
    # the name of each (group, column) cell: every response of a group shares its prompt's names
    cell_name = torch.full((G, K), -1, dtype=torch.long).scatter_reduce(
        0, st.index.unsqueeze(1).expand(-1, K), torch.where(present, name_ids, -1), reduce="amax")
    out: dict[str, float] = {}
    any_varying = (cell_varying & has_cell).any(dim=1)
    out["frac_groups_no_signal"] = float(1.0 - any_varying.float().mean()) if G else 1.0
    relevance = batch.relevance
    replayed = torch.zeros(B, K, dtype=torch.bool)
    if relevance is not None:
        valid = mask.unsqueeze(1).expand_as(relevance)
        replayed = (torch.isfinite(relevance) | ~valid).all(-1) & mask.any(-1, keepdim=True) & present
    tokens = mask.sum(-1).to(torch.float32)  # [B]
    c = contributions
    top = top_mass_share(c.w, mask) if c is not None and c.w is not None else None
    for i, name in enumerate(names):
        pairs = present & (name_ids == i)  # [B,K]
        cells = has_cell & (cell_name == i)
        if not bool(pairs.any()):
            continue
        vals = rewards[pairs]
        out[f"reward/{name}/std"] = float(vals.std()) if vals.numel() > 1 else 0.0
        share = float((cell_varying & cells).sum() / cells.sum().clamp_min(1))
        out[f"reward/{name}/frac_groups_varying"] = share
        out[f"reward/{name}/frac_groups_no_signal"] = 1.0 - share
        out[f"credit/{name}/replay_share"] = float(replayed[pairs].float().mean())
        if c is None:
            continue
        if c.weights is not None:
            cols = pairs.any(0)
            out[f"reward/{name}/weight"] = float(c.weights.to(torch.float32)[cols].mean())
        pt = c.per_token * pairs.unsqueeze(-1)
        n_tok = float((tokens.unsqueeze(1) * pairs).sum())
        out[f"adv/{name}/abs_mean"] = float(pt.abs().sum()) / max(n_tok, 1.0)
        out[f"adv/{name}/mean"] = float(pt.sum()) / max(n_tok, 1.0)
        if c.w is None or c.has is None:
            continue
        weighted = pairs & c.has & replayed if relevance is not None else pairs & c.has
        if not bool(weighted.any()):
            continue
        if relevance is not None:
            q = torch.where(mask.unsqueeze(1) & weighted.unsqueeze(-1), relevance.to(torch.float32),
                            torch.zeros_like(relevance, dtype=torch.float32))
            out[f"credit/{name}/q_mean"] = float(q.nan_to_num(0.0).sum() / (tokens.unsqueeze(1) * weighted).sum())
        out[f"credit/{name}/top80_share"] = float(top[weighted].mean())  # type: ignore[index]
        if read is None or read_known is None:
            continue
        known = weighted & read_known
        if not bool(known.any()):
            continue
        mass = c.per_token.abs() * known.unsqueeze(-1)
        on_read = (mass * read).sum()
        out[f"credit/{name}/read_mass"] = float(on_read / mass.sum()) if float(mass.sum()) > 0 else 0.0
        tok_read = (read & mask.unsqueeze(1) & known.unsqueeze(-1)).sum()
        out[f"credit/{name}/read_tokens"] = float(tok_read / (tokens.unsqueeze(1) * known).sum())
    return out
