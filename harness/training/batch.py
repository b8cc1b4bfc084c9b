"""The step's data: a :class:`Rollout` is one sampled response, and the helpers that turn a
step's rollouts into the batch's tensors.

A rollout holds its example, its prompt group, the prompt token ids (chat template with the
assistant cue), the sampled response ids up to and including the first end-of-turn token (or all
``max_new_tokens`` when the model never stopped: ``truncated``), the decoded text the verifiers
read (special tokens dropped, :func:`decode_response`), and later the verifiers' verdicts. The
token ids are the ones the sampler drew; the text is derived from them, never re-tokenised.
Rollouts ``g*G ... g*G+G-1`` form group ``g``.

- :func:`batch_tensors`: scored rollouts -> the rewards ``[B, K]``, group ids, response mask and T;
- :func:`reward_lows`: each reward column's declared lower bound over the batch;
- :func:`fit_prompts`: the examples whose chat prompt fits ``sampling.max_prompt_tokens``, counted
  as sampling counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.models import chat_prompt_ids
from tasks.base import Example, Verdict


@dataclass
class Rollout:
    example: Example
    group: int
    prompt_ids: list[int]
    response_ids: list[int]
    text: str
    truncated: bool
    verdicts: list[Verdict] = field(default_factory=list)
    #: final hidden states [T, H] that predicted the response tokens during sampling (the old
    #: policy's pass over prompt + response, kept for the replay's P_all when asked for)
    hidden: torch.Tensor | None = None
    #: the LM head's outputs [T, V] (model dtype, before any soft-cap) at those positions: the
    #: sampling distributions themselves, kept when they fit the replay's memory budget
    logits: torch.Tensor | None = None
    #: the entropy [T] (float32, nats, at the sampling temperature) of each of those distributions,
    #: computed from the sampling pass's logits when the algorithm asks for it (``entropy`` request)
    entropy: torch.Tensor | None = None


def decode_response(tokenizer: Any, ids: Sequence[int]) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=True)


def fit_prompts(examples: Sequence[Example], tokenizer: Any, max_prompt_tokens: int | None
                ) -> tuple[list[Example], int]:
    """(the examples whose chat prompt fits in ``max_prompt_tokens`` tokens of ``tokenizer``, how many
    were dropped): counted exactly as sampling counts them, so no kept prompt fails mid-run."""
    if not max_prompt_tokens:
        return list(examples), 0
    kept = [ex for ex in examples if len(chat_prompt_ids(tokenizer, ex.messages)) <= max_prompt_tokens]
    return kept, len(examples) - len(kept)


def reward_lows(rollouts: Sequence[Rollout], task: Any, K: int) -> torch.Tensor:
    """[K]: the lowest declared lower bound (``Task.reward_range``) of each reward column over the
    batch's examples; NaN where the task declares no range."""
    lows = torch.full((K,), float("nan"))
    for r in rollouts:
        for k, name in enumerate(r.example.reward_names):
            declared = task.reward_range(name)
            if declared is not None and not declared[0] >= float(lows[k]):  # NaN compares False
                lows[k] = float(declared[0])
    return lows


def batch_tensors(rollouts: Sequence[Rollout]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """Scored rollouts -> (rewards[B,K] NaN-padded, group_ids[B] long, response_mask[B,T] bool, T)."""
    B, K = len(rollouts), max(len(r.example.reward_names) for r in rollouts)
    T = max(1, max(len(r.response_ids) for r in rollouts))
    rewards = torch.full((B, K), float("nan"))
    mask = torch.zeros((B, T), dtype=torch.bool)
    for j, r in enumerate(rollouts):
        for k, v in enumerate(r.verdicts):
            rewards[j, k] = float(v.value)
        mask[j, :len(r.response_ids)] = True
    group_ids = torch.tensor([r.group for r in rollouts], dtype=torch.long)
    return rewards, group_ids, mask, T
