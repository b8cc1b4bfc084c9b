"""A task's rewards for a trainer outside mrbench (TRL, verl): the part both adapters share.

Examples travel as JSON (:func:`encode_example`): a dataset row, or verl's ``ground_truth``,
holds everything the verifiers need, so it survives shuffling, saving and worker processes.

Reward keys. A task names its rewards per example (instruction following: ``c3:punctuation:no_comma``,
constraint 3 of this prompt); a trainer wants one stable name per reward function (TRL) or
extra-info key (verl). :func:`reward_keys` names each reward of an example by the task's
``reward_family`` (instruction following: the constraint type, ``punctuation:no_comma``; the other
tasks: the reward itself) and a family's second occurrence in one prompt ``family#2`` (a prompt
may bound its word count from both sides). So each key of an example is exactly one of its
mrbench rewards, and a per-key group z-score (GDPO) is mrbench's per-reward one: a group shares
its prompt, so within a group a key is one constraint.

Scoring (:class:`CompletionScorer`) goes through ``Task.score_within`` with the budget
``mrbench score`` uses (:data:`tasks.base.DEFAULT_VERIFIER_TIMEOUT_S` per response), then:

- a reward that does not apply (the task's NaN, such as execution on a missing database), or a
  key the example does not have: None;
- a response whose verifiers ran past the budget: every reward at its failure value (the low end
  of its range, 0 for every built-in reward) with the reason ``timeout``, as ``mrbench score``
  gives it;
- a verifier that raised (a bug: verifiers never raise on model output): every reward at its
  failure value with the reason ``verifier error: ...``, and a logged warning.

A failure is the failure value, not None: a trainer leaves out a response whose rewards are all
None (TRL zeroes its advantage), so None would let a policy escape a penalty by writing what
stalls or breaks a verifier.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from mrbench_core.errors import response_text
from tasks.base import DEFAULT_VERIFIER_TIMEOUT_S, TIMEOUT_REASON, Example, Task, Verdict
from tasks.registry import make_task

log = logging.getLogger("mrbench_integrations")

#: the reason prefix of a verdict whose verifier raised
VERIFIER_ERROR = "verifier error"


def resolve_task(task: str | Task, options: Mapping[str, Any] | None = None) -> Task:
    """A task instance: ``task`` itself, or the registered task of that name built with ``options``."""
    if isinstance(task, Task):
        if options:
            raise ValueError("options are for a task given by name; this task is already built")
        return task
    return make_task(task, **dict(options or {}))


def encode_example(example: Example) -> str:
    """The example as one JSON string (what a dataset row or verl's ``ground_truth`` carries)."""
    return json.dumps(example.to_json(), ensure_ascii=False, sort_keys=True)


def decode_example(text: str) -> Example:
    """The inverse of :func:`encode_example`; a string that is not one is a clear ValueError."""
    try:
        data = json.loads(text)
        return Example(id=str(data["id"]), messages=list(data["messages"]), reward_names=list(data["reward_names"]),
                       meta=dict(data.get("meta") or {}))
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"not an mrbench example (JSON with id, messages, reward_names, meta): {exc}; "
                         f"text starts {str(text)[:80]!r}") from None


def reward_keys(task: Task, example: Example) -> list[str]:
    """The stable key of each of ``example``'s rewards, in its order (module docstring)."""
    seen: dict[str, int] = {}
    keys = []
    for name in example.reward_names:
        family = task.reward_family(name)
        seen[family] = seen.get(family, 0) + 1
        keys.append(family if seen[family] == 1 else f"{family}#{seen[family]}")
    return keys


def keys_of(task: Task, examples: Sequence[Example]) -> list[str]:
    """Every key of ``examples``, in the order each first appears."""
    out: dict[str, None] = {}
    for example in examples:
        out.update(dict.fromkeys(reward_keys(task, example)))
    return list(out)


def completion_text(completion: object) -> str:
    """A trainer's completion as text: a string as it is; a conversation's assistant turns joined
    (TRL gives ``[{"role": "assistant", "content": ...}]`` for chat prompts)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Sequence) and all(isinstance(m, Mapping) for m in completion):
        parts = []
        for message in completion:
            if message.get("role", "assistant") == "assistant":
                content = message.get("content")
                if isinstance(content, list):  # content blocks
                    content = "".join(b.get("text", "") for b in content if isinstance(b, Mapping))
                parts.append(response_text(content))
        return "".join(parts)
    return response_text(completion)


@dataclass(frozen=True)
class ScoredCompletion:
    """One completion's rewards by key (module docstring)."""

    values: dict[str, float | None]  # key -> value; None where the reward does not apply
    reasons: dict[str, str]  # key -> the verifier's reason
    failure: str | None = None  # why no verifier judged it (timeout, verifier error); None when they did
    names: dict[str, str] = field(default_factory=dict)  # key -> the task's own reward name

    def total(self) -> float:
        """The sum of the rewards that apply (mrbench's GRPO sum; 0.0 when none does)."""
        return float(sum(v for v in self.values.values() if v is not None))


class CompletionScorer:
    """A task's verifiers on one completion at a time, within ``time_budget_s`` (None: no limit)."""

    def __init__(self, task: Task, time_budget_s: float | None = DEFAULT_VERIFIER_TIMEOUT_S) -> None:
        self.task = task
        self.time_budget_s = time_budget_s

    def score(self, example: Example, completion: object) -> ScoredCompletion:
        text = completion_text(completion)
        try:
            verdicts = self.task.score_within(example, text, self.time_budget_s)
        except Exception as exc:  # noqa: BLE001  (a verifier bug must not stop a trainer)
            reason = f"{VERIFIER_ERROR}: {type(exc).__name__}: {exc}"
            log.warning("mrbench %s: example %s: %s (every reward scored as failing)", self.task.name, example.id,
                        reason)
            verdicts = [Verdict(reward=v.reward, value=v.value, reason=reason)
                        for v in self.task.timeout_verdicts(example, self.time_budget_s)]
        keys = reward_keys(self.task, example)
        if len(verdicts) != len(keys):
            raise ValueError(f"task {self.task.name!r} returned {len(verdicts)} verdicts for example {example.id!r}, "
                             f"which has {len(keys)} rewards")
        failure = _failure(verdicts)
        if failure == TIMEOUT_REASON:
            log.warning("mrbench %s: example %s: the verifiers ran past their %s s budget (every reward scored as "
                        "failing)", self.task.name, example.id, self.time_budget_s)
        return ScoredCompletion(values={k: _value(v) for k, v in zip(keys, verdicts)},
                                reasons={k: v.reason for k, v in zip(keys, verdicts)}, failure=failure,
                                names={k: v.reward for k, v in zip(keys, verdicts)})


def _value(verdict: Verdict) -> float | None:
    value = float(verdict.value)
    return None if math.isnan(value) else value


def _failure(verdicts: Sequence[Verdict]) -> str | None:
    reasons = {v.reason for v in verdicts}
    if len(reasons) == 1:
        (reason,) = reasons
        if reason == TIMEOUT_REASON or reason.startswith(VERIFIER_ERROR + ":"):
            return reason
    return None
