"""The training hook: credit rows for a few groups of every step, appended to ``credit.jsonl``.

``output.credit_groups`` groups are logged per step (0 turns logging off): the first groups of the
step's batch, whose prompts are already a seeded random draw from the data. For each of their
responses the row (:mod:`harness.training.credit_rows`) keeps the relevance q the replay computed (null for
pairs not replayed: rewards that did not vary in the group, or steps without replay), the
per-reward weights w of an MRTPO-family algorithm (``Advantages.reward_weights``, from the step's
one call of ``advantages``; null for other algorithms) and the token advantages the update used; a
group's first row also keeps its prompt.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from harness.token_align import align
from harness.training.credit_rows import credit_row, prompt_text
from harness.training.credit_store import append_rows, drop_after


class CreditLog:
    """Writes ``credit.jsonl`` into a run record directory."""

    def __init__(self, groups: int, directory: str | Path, tokenizer: Any, task: Any):
        if groups < 0:
            raise ValueError(f"output.credit_groups must be >= 0 (0 turns per-token credit records off), got {groups}")
        self.groups, self.directory, self.tokenizer, self.task = int(groups), Path(directory), tokenizer, task

    def resume(self, last_step: int) -> None:
        """Drop the rows of steps after the checkpoint a run resumes from."""
        drop_after(self.directory, last_step)

    def log(self, n: int, rollouts: Sequence[Any], advantages: Any, relevance: torch.Tensor | None) -> float:
        """Append the rows of step ``n`` (0-based; rows say ``step = n + 1``) from the step's
        :class:`algorithms.Advantages` and the replay's relevance; the seconds it took."""
        if not self.groups:
            return 0.0
        t0 = time.perf_counter()
        chosen: list[int] = []
        for r in rollouts:
            if r.group not in chosen and len(chosen) < self.groups:
                chosen.append(r.group)
        w, adv = advantages.reward_weights, advantages.tokens
        rows = []
        prompted: set[int] = set()
        for j, r in enumerate(rollouts):
            if r.group not in chosen:
                continue
            prompt = None if r.group in prompted else prompt_text(r.example.messages)
            prompted.add(r.group)
            T = len(r.response_ids)
            K = len(r.verdicts)
            q = [relevance[j, k, :T].tolist() for k in range(K)] if relevance is not None else None
            wj = [w[j, k, :T].tolist() for k in range(K)] if w is not None else None
            rows.append(credit_row(step=n + 1, example=r.example.id, group=int(r.group), index=j,
                                   alignment=align(self.tokenizer, r.response_ids, r.text), verdicts=r.verdicts,
                                   task=self.task, q=q, w=wj, advantage=adv[j, :T].tolist(), prompt=prompt))
        append_rows(self.directory, rows)
        return time.perf_counter() - t0
