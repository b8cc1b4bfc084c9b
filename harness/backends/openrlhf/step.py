"""One training step as the experience maker sees it, in mrbench's terms.

From OpenRLHF's rollout samples (one single-row ``Experience`` per response, groups of G
consecutive samples per prompt, as OpenRLHF itself assumes) it rebuilds the harness's
:class:`~harness.backends.rollout.Rollout` s from the token ids and the scored labels, so that the
rewards ``[B, K]``, the response mask ``[B, T]``, the replay and the algorithm's token advantages
are computed exactly as the local backend computes them; writes those advantages into the
experiences' frame; and builds the step's metrics row with the local backend's keys from the
batch and OpenRLHF's training status.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from torch import Tensor

from harness.backends.openrlhf.frame import scatter_rows, split_sequence
from harness.backends.openrlhf.labels import decode_label
from harness.backends.rollout import Rollout, batch_tensors, reward_lows
from harness.backends.step_metrics import UpdateStats, step_row
from harness.replay_builders import ReplayResult
from harness.step import StepPlan, step_advantages


class StepError(ValueError):
    """Rollout samples that do not form the batch mrbench sent (the message says how)."""


@dataclass
class StepBatch:
    rollouts: list[Rollout]
    rewards: Tensor  # [B, K], NaN where a reward does not apply
    group_ids: Tensor  # [B]
    mask: Tensor  # [B, T]
    T: int
    reward_low: Tensor  # [K]
    score_seconds: float = 0.0
    plan: StepPlan | None = None  # what the algorithm asked of this step (the maker decides it once)
    rep: ReplayResult | None = None
    adv: Tensor | None = None
    algo_metrics: dict[str, float] = field(default_factory=dict)
    time_replay: float = 0.0
    diagnostics: dict[str, float] = field(default_factory=dict)  # harness.step_diagnostics


def rollouts_from_samples(samples: Sequence[Any], group_size: int) -> tuple[list[Rollout], float]:
    """The batch's rollouts (group g = samples ``g*G ... g*G+G-1``) and the verifiers' seconds."""
    if len(samples) % group_size:
        raise StepError(f"{len(samples)} rollout samples are not whole groups of {group_size}")
    out: list[Rollout] = []
    seconds = 0.0
    for i, sample in enumerate(samples):
        if sample.sequences.shape[0] != 1:
            raise StepError(f"rollout sample {i} holds {sample.sequences.shape[0]} rows, expected 1")
        label = decode_label(sample.labels[0])
        if not label.scored:
            raise StepError(f"rollout sample {i} (example {label.example.id!r}) came back unscored: the vLLM "
                            f"engines did not run mrbench's agent executor")
        g = i // group_size
        if out and g == out[-1].group and out[-1].example.id != label.example.id:
            raise StepError(f"group {g} mixes examples {out[-1].example.id!r} and {label.example.id!r}: "
                            f"rollout samples are not in groups of {group_size} consecutive responses")
        attention = sample.attention_mask[0] if sample.attention_mask is not None else None
        prompt_ids, response_ids = split_sequence(sample.sequences[0], sample.action_mask[0], attention)
        out.append(Rollout(label.example, g, prompt_ids, response_ids, label.text or "", bool(label.truncated),
                           verdicts=list(label.verdicts or [])))
        seconds += label.score_seconds
    return out, seconds


def step_batch(samples: Sequence[Any], group_size: int, task: Any) -> StepBatch:
    rollouts, seconds = rollouts_from_samples(samples, group_size)
    rewards, group_ids, mask, T = batch_tensors(rollouts)
    return StepBatch(rollouts, rewards, group_ids, mask, T, reward_lows(rollouts, task, rewards.shape[1]), seconds)


def compute_advantages(algorithm: Any, batch: StepBatch, step: int, total_steps: int | None = None,
                       tokenizer: Any = None) -> Tensor:
    """The algorithm's token advantages ``[B, T]`` for the batch (and its metrics and per-reward
    diagnostics, kept on it; the credit mass on read tokens needs the ``tokenizer``), from the same
    batch builder and advantages call as the local backend's step (:mod:`harness.backends.algo_step`)."""
    from harness.step_diagnostics import column_names, step_diagnostics

    rep = batch.rep or ReplayResult.nothing_replayed(batch.rewards)
    rb = rep.to_batch(batch.rewards, batch.group_ids, batch.mask, step, batch.reward_low,
                      reward_names=column_names(batch.rollouts), total_steps=total_steps)
    result = step_advantages(algorithm, rb)
    batch.adv, batch.algo_metrics, batch.rep = result.tokens, dict(result.metrics), rep
    batch.diagnostics = step_diagnostics(algorithm, rb, batch.rollouts, tokenizer, advantages=result)
    return batch.adv


def write_advantages(experiences: Sequence[Any], adv: Tensor) -> None:
    """Each experience's ``advantages`` (and ``returns``, which only a critic reads) from ``adv[B, T]``
    through its rows' sample indices; OpenRLHF's per-token KL penalty is not added (``kl = None``);
    ``info`` keeps the per-sample tensors only (OpenRLHF averages every entry into its logs)."""
    for exp in experiences:
        frame = scatter_rows(adv, exp.index, exp.action_mask)
        exp.advantages = frame
        exp.returns = frame.clone()
        exp.kl = None
        b = exp.action_mask.shape[0]
        exp.info = {k: v for k, v in exp.info.items() if isinstance(v, Tensor) and v.dim() >= 1 and v.shape[0] == b}


def update_stats(status: dict[str, Any]) -> UpdateStats:
    """OpenRLHF's training status as the update statistics :func:`step_row` reads: the policy loss,
    the KL (OpenRLHF's per-token mean), the clipped share, the entropy and the gradient norm. The
    largest ratio is not reported by OpenRLHF (NaN)."""
    def num(key: str, default: float = 0.0) -> float:
        value = status.get(key, default)
        return float(value) if isinstance(value, (int, float)) else default

    return UpdateStats(tokens=1, loss=num("policy_loss"), kl=num("kl"), clipped=num("ppo_clip_ratio"),
                       entropy=num("entropy_loss"), grad_norm=num("actor_grad_norm", math.nan), ratio_max=math.nan)


def metrics_row(n: int, batch: StepBatch, status: dict[str, Any], task: Any, with_entropy: bool) -> dict[str, Any]:
    """The metrics row of step ``n`` (0-based): the local backend's keys (:mod:`harness.backends.step_metrics`).
    Times: ``time_generate`` is OpenRLHF's generation (the verifiers run inside it, in the rollout
    workers; ``time_score`` is their summed seconds), ``time_replay`` the replay on the actors,
    ``time_update`` the PPO update plus the weight broadcast to vLLM, ``time_step`` OpenRLHF's total."""
    assert batch.adv is not None and batch.rep is not None, "compute_advantages first"
    row = step_row(n, batch.rollouts, batch.rewards, batch.mask, batch.adv, batch.rep, update_stats(status),
                   batch.algo_metrics, getattr(task, "format_reward", None), with_entropy,
                   family=getattr(task, "reward_family", None))
    row.update(batch.diagnostics)
    timing = {k: float(v) for k, v in status.items() if k.startswith("timing/") and isinstance(v, (int, float))}
    row.update(time_generate=timing.get("timing/generation", 0.0), time_score=batch.score_seconds,
               time_replay=batch.time_replay,
               time_update=timing.get("timing/ppo_train", 0.0) + timing.get("timing/broadcast", 0.0),
               time_step=timing.get("timing/step_total", sum(timing.values())))
    return row
