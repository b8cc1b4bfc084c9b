"""mrbench's verifiers as a verl reward source: :func:`compute_score`, which verl's reward managers call.

verl calls ``compute_score(data_source=..., solution_str=..., ground_truth=..., extra_info=...)``
once per response, with the row's ``data_source`` and ``reward_model.ground_truth`` as
``python -m mrbench_integrations.verl_parquet`` wrote them (docs/trl-and-verl.md):

- ``data_source``: ``mrbench/<task>``; any other source goes to verl's own
  ``default_compute_score``, so one function serves a mixed dataset;
- ``ground_truth``: JSON holding the task's name and options, the example (what its verifiers
  read) and the reward keys of the whole dataset (:func:`encode_ground_truth`).

It returns ``{"score": S, key: value, ...}``: ``S`` the sum of the rewards that apply (what
mrbench's GRPO sums; verl trains on it), and one entry per reward key of the dataset
(:mod:`mrbench_integrations.task_rewards`), which verl keeps as the batch's reward extra info,
logs, and reads by name for GDPO (``algorithm.gdpo_reward_keys``). verl stacks each key into one
float array per batch, so every response has every key of the dataset, and a reward that does
not apply to a response (mrbench's NaN, mrbench score's null) is 0.0 here: a group shares its
prompt, so such a key is 0.0 across its group, and its group z-score, like mrbench's for NaN, is 0.
A failed verifier (time budget, error) is the failure value 0 with a logged warning.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from mrbench_integrations.task_rewards import CompletionScorer, decode_example, encode_example, resolve_task
from tasks.base import DEFAULT_VERIFIER_TIMEOUT_S, Example, Task

#: the prefix of every data_source mrbench writes
SOURCE_PREFIX = "mrbench/"

_SCORERS: dict[tuple[str, str], CompletionScorer] = {}
_SCORERS_LOCK = threading.Lock()


def source_name(task: Task) -> str:
    """The ``data_source`` of a task's rows: ``mrbench/<task>``."""
    return SOURCE_PREFIX + task.name


def encode_ground_truth(task: Task, example: Example, keys: Sequence[str],
                        options: Mapping[str, Any] | None = None) -> str:
    """What :func:`compute_score` reads: the task, its options, the example and the dataset's keys."""
    return json.dumps({"task": task.name, "options": dict(options or {}), "example": encode_example(example),
                       "keys": list(keys)}, ensure_ascii=False, sort_keys=True)


def _scorer(name: str, options: Mapping[str, Any]) -> CompletionScorer:
    cache_key = (name, json.dumps(options, sort_keys=True))
    with _SCORERS_LOCK:
        scorer = _SCORERS.get(cache_key)
        if scorer is None:
            scorer = _SCORERS[cache_key] = CompletionScorer(resolve_task(name, options), DEFAULT_VERIFIER_TIMEOUT_S)
    return scorer


def compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: Mapping[str, Any] | None = None,
                  **kwargs: Any) -> dict[str, float] | Any:
    """One response's rewards for verl (module docstring)."""
    if not str(data_source).startswith(SOURCE_PREFIX):
        from verl.utils.reward_score import default_compute_score

        return default_compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)
    try:
        truth = json.loads(ground_truth)
        name, options, keys = truth["task"], truth.get("options") or {}, list(truth["keys"])
        example = decode_example(truth["example"])
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{data_source}: ground_truth is not what mrbench_integrations.verl_parquet writes "
                         f"({exc}); rewrite the parquet files with it") from None
    if f"{SOURCE_PREFIX}{name}" != data_source:
        raise ValueError(f"data_source {data_source!r} but the ground truth is task {name!r}'s")
    scored = _scorer(name, options).score(example, solution_str)
    missing = sorted(set(scored.values) - set(keys))
    if missing:
        raise ValueError(f"{data_source}, example {example.id}: rewards {missing} are not among the dataset's keys "
                         f"{keys}; write the parquet files with mrbench_integrations.verl_parquet")
    out = {"score": scored.total()}
    for key in keys:
        value = scored.values.get(key)
        out[key] = 0.0 if value is None else value
    return out
