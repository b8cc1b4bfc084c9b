"""The per-reward diagnostics of one training step, from its rollouts (glue for
:mod:`algorithms.diagnostics`, which does the tensor work).

The backend builds the step's :class:`~algorithms.RolloutBatch` with :func:`column_names` (for
weights by reward name) and adds :func:`step_diagnostics` to the step's metrics row. The split of
the advantage by reward is the algorithm's own (``Algorithm.contributions``). Reward names
are the task's ``reward_family`` names, as in ``reward/<name>``. Where the split carries per-reward
token credit that follows a signal (the MRTPO family, the token-credit methods) the tokens
each verifier read (its ``Verdict.spans``) are aligned to the response tokens with
:mod:`harness.token_align`, the same join the credit explorer uses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from algorithms.diagnostics import batch_diagnostics, name_index, reward_contributions
from harness.token_align import align, touched


def column_names(rollouts: Sequence[Any]) -> tuple[str, ...] | None:
    """The reward names of the batch's columns when every response has the same ones, else None."""
    first = tuple(rollouts[0].example.reward_names) if rollouts else None
    if first is None or any(tuple(r.example.reward_names) != first for r in rollouts):
        return None
    return first


def read_masks(rollouts: Sequence[Any], tokenizer: Any, K: int, T: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(read[B,K,T] bool: the tokens touching reward k's read spans; known[B,K]: spans reported)."""
    read = torch.zeros(len(rollouts), K, T, dtype=torch.bool)
    known = torch.zeros(len(rollouts), K, dtype=torch.bool)
    for j, r in enumerate(rollouts):
        if not any(v.spans for v in r.verdicts):
            continue
        alignment = align(tokenizer, r.response_ids, r.text)
        for k, v in enumerate(r.verdicts[:K]):
            if v.spans:
                flags = touched(alignment, v.spans)[:T]
                read[j, k, :len(flags)] = torch.tensor(flags, dtype=torch.bool)
                known[j, k] = True
    return read, known


def step_diagnostics(algo: Any, batch: Any, rollouts: Sequence[Any], tokenizer: Any,
                     family: Callable[[str], str] | None = None, advantages: Any = None) -> dict[str, float]:
    """``reward/<r>/...``, ``adv/<r>/...``, ``credit/<r>/...`` and ``frac_groups_no_signal`` for the step
    (``advantages``: the step's result for ``batch``, so that nothing is computed again)."""
    family = family or (lambda name: name)
    K, T = batch.rewards.shape[1], batch.response_mask.shape[1]
    ids, names = name_index([[family(n) for n in r.example.reward_names] for r in rollouts], K)
    contributions = reward_contributions(algo, batch, advantages)
    read = known = None
    followed = contributions.relevance_weighted if contributions is not None else None
    if tokenizer is not None and followed is not None and bool(followed.any()):
        read, known = read_masks(rollouts, tokenizer, K, T)  # only where some credit follows a token signal
    return batch_diagnostics(batch, ids, names, contributions, read, known)
