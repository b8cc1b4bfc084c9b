"""OpenRLHF's side of the shared step (:class:`harness.training.step.Step`), in mrbench's terms.

From OpenRLHF's rollout samples (one single-row ``Experience`` per response, groups of G
consecutive samples per prompt, as OpenRLHF itself assumes) it rebuilds the harness's
:class:`~harness.training.batch.Rollout` s from the token ids and the scored labels, which the
Step takes as the step's rollouts (so the rewards ``[B, K]``, the response mask ``[B, T]``, the
replay and the token advantages are the local backend's); writes the Step's advantages into the
experiences' frame; and turns OpenRLHF's training status into the update statistics and the
phase times of the Step's metrics row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from torch import Tensor

from harness.backends.openrlhf.frame import scatter_rows, split_sequence
from harness.backends.openrlhf.labels import decode_label
from harness.training.batch import Rollout
from harness.training.step_metrics import UpdateStats


class StepError(ValueError):
    """Rollout samples that do not form the batch mrbench sent (the message says how)."""


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


def step_times(status: dict[str, Any], seconds: dict[str, float]) -> dict[str, float]:
    """The phase times of the step's metrics row, from OpenRLHF's ``timing/*`` status and the Step's
    own ``seconds`` (:class:`harness.training.phases.PhaseTimes`): ``time_generate`` is OpenRLHF's
    generation (the verifiers run inside it, in the rollout workers; ``time_score`` is their summed
    seconds), ``time_replay`` the replay on the actors, ``time_credit`` the credit rows,
    ``time_update`` the PPO update plus the weight broadcast to vLLM, ``time_step`` OpenRLHF's total."""
    timing = {k: float(v) for k, v in status.items() if k.startswith("timing/") and isinstance(v, (int, float))}
    return {"time_generate": timing.get("timing/generation", 0.0), "time_score": seconds.get("score", 0.0),
            "time_replay": seconds.get("replay", 0.0), "time_credit": seconds.get("credit", 0.0),
            "time_update": timing.get("timing/ppo_train", 0.0) + timing.get("timing/broadcast", 0.0),
            "time_step": timing.get("timing/step_total", sum(timing.values()))}
