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
  over the valid tokens of the responses where r applies, for an algorithm whose
  :meth:`~algorithms.base.Algorithm.contributions` splits it by reward (:func:`reward_contributions`);
- ``credit/<r>/replay_share``: the share of (response, r) pairs replayed (relevance computed);
- an algorithm whose split marks the pairs whose credit follows a token signal (the MRTPO family,
  forking tokens, GTPO, KTAE), over those pairs (and, with a relevance, over the replayed ones):
  ``credit/<r>/q_mean`` (mean relevance q over valid tokens, where the batch has a relevance),
  ``credit/<r>/top80_share`` (where the split has per-reward token weights: the share of a
  response's tokens that hold 80% of reward r's weight: ceil(0.8 T) / T when uniform, lower when
  concentrated), and where the verifier reports the characters it read, ``credit/<r>/read_mass``
  (the share of reward r's credit mass |A_r,t| on the tokens it read) beside
  ``credit/<r>/read_tokens`` (the share of tokens read: the uniform baseline).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from algorithms.base import Advantages, Algorithm, Contributions, RolloutBatch, group_stats

__all__ = ["Contributions", "batch_diagnostics", "name_index", "reward_contributions", "top_mass_share"]

TOP_MASS = 0.8


def reward_contributions(algo: Algorithm, batch: RolloutBatch,
                         advantages: Advantages | None = None) -> Contributions | None:
    """``algo``'s :meth:`~algorithms.base.Algorithm.contributions` on ``batch``: how its token advantage
    splits over the rewards, or None where it does not (CoRT, OPSD). ``advantages``: the step's
    :class:`~algorithms.base.Advantages` for ``batch``, which the split reads instead of computing
    the advantages again; computed here when not given. Each family's formula is its method's."""
    result = advantages if advantages is not None else Advantages.of(algo.advantages(batch))
    return algo.contributions(batch, result)


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
    top = top_mass_share(c.token_weights, mask) if c is not None and c.token_weights is not None else None
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
        if c.reward_weights is not None:
            cols = pairs.any(0)
            out[f"reward/{name}/weight"] = float(c.reward_weights.to(torch.float32)[cols].mean())
        pt = c.per_token * pairs.unsqueeze(-1)
        n_tok = float((tokens.unsqueeze(1) * pairs).sum())
        out[f"adv/{name}/abs_mean"] = float(pt.abs().sum()) / max(n_tok, 1.0)
        out[f"adv/{name}/mean"] = float(pt.sum()) / max(n_tok, 1.0)
        if c.relevance_weighted is None:
            continue
        weighted = pairs & c.relevance_weighted & replayed if relevance is not None else pairs & c.relevance_weighted
        if not bool(weighted.any()):
            continue
        if relevance is not None:
            q = torch.where(mask.unsqueeze(1) & weighted.unsqueeze(-1), relevance.to(torch.float32),
                            torch.zeros_like(relevance, dtype=torch.float32))
            out[f"credit/{name}/q_mean"] = float(q.nan_to_num(0.0).sum() / (tokens.unsqueeze(1) * weighted).sum())
        if top is not None:
            out[f"credit/{name}/top80_share"] = float(top[weighted].mean())
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
