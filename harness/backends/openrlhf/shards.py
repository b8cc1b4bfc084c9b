"""The replay split across the policy actors, and the replay each actor runs.

The replay (MRTPO's leave-one-out relevance, the joint ablation, CoRT's rubric log-probabilities)
needs full-vocabulary distributions of the old policy, so it runs on the DeepSpeed policy actors,
which hold the old policy while the experience is made (vLLM returns top-k log-probabilities
only). Each actor gets one shard; a shard holds whole prompt groups, because which (response,
reward) pairs are replayed depends on how the reward varies within the group. Groups are dealt
out by estimated cost (tokens times the contexts replayed), most expensive first, to the least
loaded shard, so that the actors finish together. A shard may be empty.

:func:`run_shard` is the body of the actors' ``mr_replay`` method: the harness's own replay
builders (:mod:`harness.replay_builders`) on a :class:`harness.replay.ReplayEngine` over the
actor's model, at the rollout temperature. :func:`merge_shards` puts the shards' statistics back
into one :class:`~harness.replay_builders.ReplayResult` for the whole batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor

from harness.config import ReplayConfig
from harness.replay_builders import ReplayResult


def plan_shards(costs: Sequence[float], n: int) -> list[list[int]]:
    """Group indices per shard: ``n`` shards, each group in exactly one, loads balanced greedily
    (largest cost first, to the least loaded shard; ties to the lower index). Within a shard the
    groups keep their batch order."""
    if n < 1:
        raise ValueError(f"need at least one shard, got {n}")
    shards: list[list[int]] = [[] for _ in range(n)]
    load = [0.0] * n
    for g in sorted(range(len(costs)), key=lambda g: (-float(costs[g]), g)):
        s = min(range(n), key=lambda i: (load[i], i))
        shards[s].append(g)
        load[s] += float(costs[g])
    return [sorted(s) for s in shards]


@dataclass
class ReplayShard:
    """One actor's part of the replay: whole groups of the step's batch."""

    request: str
    task: str
    task_options: dict[str, Any]
    replay: ReplayConfig  # the run's replay section
    temperature: float  # the rollout temperature
    rows: list[int]  # the batch rows (sample indices) of this shard, in batch order
    rollouts: list[Any]  # harness.training.batch.Rollout of those rows (no hidden states)
    rewards: Tensor  # [len(rows), K]
    group_ids: Tensor  # [len(rows)]
    T: int


@dataclass
class ShardResult:
    rows: list[int]
    relevance: Tensor | None = None  # [len(rows), K, T]
    joint_relevance: Tensor | None = None  # [len(rows), T]
    logprob_delta: Tensor | None = None  # [len(rows), T]
    pairs_replayed: int = 0
    pairs_total: int = 0
    sequences: int = 0
    forward_tokens: int = 0
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def group_costs(rollouts: Sequence[Any], rewards: Tensor, group_ids: Tensor) -> dict[int, float]:
    """Estimated replay cost per group: (prompt + response tokens) x (1 + replayed rewards), summed."""
    from algorithms.base import rewards_varying_in_group

    varying = rewards_varying_in_group(rewards, group_ids).sum(1)
    out: dict[int, float] = {}
    for j, r in enumerate(rollouts):
        g = int(group_ids[j])
        out[g] = out.get(g, 0.0) + (len(r.prompt_ids) + len(r.response_ids)) * (1 + int(varying[j]))
    return out


def make_shards(request: str, task: str, task_options: dict[str, Any], replay: ReplayConfig, temperature: float,
                rollouts: Sequence[Any], rewards: Tensor, group_ids: Tensor, T: int, n: int) -> list[ReplayShard]:
    """``n`` shards of whole groups (see :func:`plan_shards`)."""
    costs = group_costs(rollouts, rewards, group_ids)
    groups = list(costs)
    out = []
    for chosen in plan_shards([costs[g] for g in groups], n):
        members = {groups[i] for i in chosen}
        rows = [j for j in range(len(rollouts)) if int(group_ids[j]) in members]
        out.append(ReplayShard(request, task, task_options, replay, temperature, rows, [rollouts[j] for j in rows],
                               rewards[rows], group_ids[rows], T))
    return out


_TASKS: dict[str, Any] = {}


def cached_task(name: str, options: dict[str, Any]) -> Any:
    """The task ``name`` with ``options``, built once per process (rollout workers and actors score
    and replay many batches with it)."""
    import json

    from tasks.registry import make_task

    key = json.dumps([name, options], sort_keys=True)
    if key not in _TASKS:
        _TASKS[key] = make_task(name, **options)
    return _TASKS[key]


def run_shard(shard: ReplayShard, model: Any, tokenizer: Any, pad_id: int) -> ShardResult:
    """The replay of one shard with ``model`` (the old policy, in eval mode)."""
    import time

    from harness.replay import ReplayEngine
    from harness.replay_builders import replay_for

    t0 = time.time()
    if not shard.rows:
        return ShardResult(rows=[])
    engine = ReplayEngine.from_config(model, shard.replay, pad_id, shard.temperature)
    with torch.no_grad():
        rep = replay_for(shard.request, engine, cached_task(shard.task, shard.task_options), tokenizer, shard.rollouts,
                         shard.rewards, shard.group_ids, shard.T)
    return ShardResult(rows=list(shard.rows), relevance=rep.relevance, joint_relevance=rep.joint_relevance,
                       logprob_delta=rep.logprob_delta, pairs_replayed=rep.pairs_replayed,
                       pairs_total=rep.pairs_total, sequences=rep.sequences, forward_tokens=engine.forward_tokens,
                       seconds=time.time() - t0)


def merge_shards(results: Sequence[ShardResult], rewards: Tensor, T: int) -> ReplayResult:
    """The whole batch's :class:`ReplayResult` from its shards (NaN where nothing was replayed)."""
    B, K = rewards.shape
    out = ReplayResult(pairs_total=int((~torch.isnan(rewards)).sum()))
    seen: set[int] = set()
    for res in results:
        if seen & set(res.rows):
            raise ValueError("two replay shards hold the same batch row")
        seen |= set(res.rows)
        for name, shape in (("relevance", (B, K, T)), ("joint_relevance", (B, T)), ("logprob_delta", (B, T))):
            part = getattr(res, name)
            if part is None:
                continue
            if getattr(out, name) is None:
                setattr(out, name, torch.full(shape, float("nan")))
            getattr(out, name)[res.rows] = part.to(torch.float32).cpu()
        out.pairs_replayed += res.pairs_replayed
        out.sequences += res.sequences
    return out
