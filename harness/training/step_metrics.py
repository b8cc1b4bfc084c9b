"""What the local backend writes per step (``metrics.jsonl``, ``samples.jsonl``) and its run summary.

Per step: ``reward/<name>`` (mean over the responses where the reward applies; ``name`` is the
task's ``reward_family`` of the reward, e.g. the constraint type for instruction following), ``reward_mean``
(over every non-NaN (response, reward) pair), ``format_rate`` (the task's format reward, None when
it has none), ``response_length`` (tokens, end-of-turn included), ``truncated_rate``,
``replay_pairs`` / ``reward_pairs`` / ``replay_share`` (replayed (response, reward) pairs over all
non-NaN pairs), ``replay_sequences`` (forward passes' sequences), ``adv_abs_mean`` and
``adv_nonzero_tokens`` (token advantages over valid tokens), ``loss``, ``kl`` (mean k3 per token;
0 unless a reference is loaded), ``clip_fraction`` (tokens whose clipped term is active),
``entropy`` (when the entropy term is on), ``grad_norm`` (before clipping, max over mini-batches),
``ratio_max``, the algorithm's own metrics as ``algo/<key>``, and the seconds spent in
``time_generate``, ``time_score``, ``time_replay``, ``time_update``, ``time_credit`` (writing the
credit rows, :mod:`harness.training.credit_log`) and ``time_step``, and ``verifier_timeouts``: the
responses whose verifiers ran past ``task.verifier_timeout_s`` (every reward of such a response
has its failure value, reason ``timeout``: :meth:`tasks.base.Task.score_within`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from harness.metric_names import reward_mean_name
from tasks.base import TIMEOUT_REASON


@dataclass
class UpdateStats:
    """What one step's update reports: sums over its tokens (loss, clipped tokens, KL, entropy, the
    algorithm's own loss term), the number of tokens, the largest gradient norm and ratio."""

    loss: float = 0.0
    tokens: int = 0
    clipped: float = 0.0
    kl: float = 0.0
    entropy: float = 0.0
    grad_norm: float = 0.0
    ratio_max: float = 1.0
    extra_loss: float = 0.0
    skipped: bool = False  # no term of the loss had a gradient: no backward pass, no optimiser step


def step_row(n: int, rollouts: Sequence[Any], rewards: torch.Tensor, mask: torch.Tensor, adv: torch.Tensor,
             rep: Any, upd: UpdateStats, algo_metrics: dict[str, float], format_reward: str | None,
             with_entropy: bool, family: Callable[[str], str] | None = None) -> dict[str, Any]:
    """``family`` (the task's ``reward_family``) names the key each reward is averaged under, so that
    per-example reward names (ifollow's ``c3:punctuation:no_comma``) aggregate by type across steps."""
    family = family or (lambda name: name)
    row: dict[str, Any] = {"step": n + 1}
    per_name: dict[str, list[float]] = {}
    # responses whose verifiers ran past the time budget (their rewards were given the failure value)
    row["verifier_timeouts"] = sum(any(v.reason == TIMEOUT_REASON for v in r.verdicts) for r in rollouts)
    for r in rollouts:
        for v in r.verdicts:
            if not (isinstance(v.value, float) and math.isnan(v.value)):
                per_name.setdefault(family(v.reward), []).append(float(v.value))
    for name, vals in sorted(per_name.items()):
        row[f"reward/{name}"] = sum(vals) / len(vals)
    valid = rewards[~torch.isnan(rewards)]
    row["reward_mean"] = float(valid.mean()) if valid.numel() else float("nan")
    row["format_rate"] = row.get(f"reward/{format_reward}") if format_reward else None
    lengths = [len(r.response_ids) for r in rollouts]
    row["response_length"] = sum(lengths) / len(lengths)
    row["truncated_rate"] = sum(r.truncated for r in rollouts) / len(rollouts)
    row["replay_pairs"] = rep.pairs_replayed
    row["reward_pairs"] = rep.pairs_total
    row["replay_share"] = rep.pairs_replayed / rep.pairs_total if rep.pairs_total else 0.0
    row["replay_sequences"] = rep.sequences
    tokens = max(int(upd.tokens), 1)
    row["adv_abs_mean"] = float(adv[mask].abs().mean()) if bool(mask.any()) else 0.0
    row["adv_nonzero_tokens"] = int((adv[mask] != 0).sum())
    row.update(loss=upd.loss, kl=upd.kl / tokens, clip_fraction=upd.clipped / tokens,
               entropy=upd.entropy / tokens if with_entropy else None,
               grad_norm=upd.grad_norm, ratio_max=upd.ratio_max, update_skipped=int(upd.skipped))
    if upd.extra_loss:
        row["opsd_loss"] = upd.extra_loss
    for key, value in algo_metrics.items():
        row[f"algo/{key}"] = value
    return row


def sample_rows(n: int, rollouts: Sequence[Any], count: int) -> list[dict[str, Any]]:
    out = []
    for r in rollouts[:count]:
        out.append({"step": n + 1, "example": r.example.id, "group": r.group, "response": r.text,
                    "tokens": len(r.response_ids), "truncated": r.truncated,
                    "rewards": {v.reward: (None if math.isnan(v.value) else v.value) for v in r.verdicts}})
    return out


def token_credit_line(metrics: list[dict[str, Any]]) -> str:
    """How the run's token credit differed from uniform, in one line, from the metrics rows alone:
    the mean of every ``credit/<r>/read_mass`` (the share of reward r's credit on the tokens its
    verifier read) over the mean of the matching ``credit/<r>/read_tokens`` (what that share is
    under uniform credit), over all the (step, reward) entries that have both; the paper's Table 4
    ratio of the training's credit. GDPO, which gives every token of a response the same credit,
    logs neither and is 1.0 by construction."""
    mass, tokens = [], []
    for row in metrics:
        for key, value in row.items():
            if key.startswith("credit/") and key.endswith("/read_mass"):
                read = row.get(key[:-len("read_mass")] + "read_tokens")
                if isinstance(value, (int, float)) and isinstance(read, (int, float)) and read > 0:
                    mass.append(float(value))
                    tokens.append(float(read))
    if not mass:
        return ("not measured: no step logged credit/<r>/read_mass (only credit that follows a token signal, "
                "where a verifier reports what it read, is; uniform credit, as GDPO's, is 1.0x)")
    ratio = (sum(mass) / len(mass)) / (sum(tokens) / len(tokens))
    return (f"credit on the tokens the verifiers read: {ratio:.2f}x uniform (GDPO: 1.0), mean over "
            f"{len(mass)} (step, reward) entries")


def run_summary(metrics: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    """Final reward means, mean replay share, last-step advantage size, mean phase times, per step
    the effective beta (``beta_per_step``, algorithms with a warm-up) and the replay share
    (``replay_share_per_step``; ``steps_replayed`` counts the steps that replayed anything), and
    how the token credit differed from uniform (``token_credit``: :func:`token_credit_line`)."""
    last = metrics[-1] if metrics else {}
    shares = [m.get("replay_share", 0.0) for m in metrics]
    summary: dict[str, Any] = {"steps": len(metrics), "train_seconds": round(seconds, 1),
                               "final_rewards": {reward_mean_name(k): v for k, v in last.items() if reward_mean_name(k)},
                               "final_reward_mean": last.get("reward_mean"),
                               "replay_share_mean": sum(shares) / len(shares) if shares else 0.0,
                               "adv_abs_mean": last.get("adv_abs_mean")}
    betas = [m.get("algo/beta_eff") for m in metrics]
    if any(b is not None for b in betas):  # an algorithm with a beta warm-up (MRTPO family)
        summary["beta_per_step"] = [round(float(b), 4) if b is not None else None for b in betas]
    summary["replay_share_per_step"] = [round(float(x), 3) for x in shares]
    summary["steps_replayed"] = f"{sum(1 for x in shares if x > 0)} of {len(shares)}"
    summary["token_credit"] = token_credit_line(metrics)
    for key in ("time_generate", "time_score", "time_replay", "time_update", "time_credit", "time_step"):
        vals = [m[key] for m in metrics if key in m]
        summary[f"mean_{key}"] = round(sum(vals) / len(vals), 2) if vals else None
    return summary
