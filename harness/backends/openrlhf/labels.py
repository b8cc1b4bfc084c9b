"""The label codec: what travels beside OpenRLHF's scalar reward.

OpenRLHF carries one scalar reward per sample from the rollout workers to the experience maker,
but it also carries the dataset's label string, untouched, into ``Experience.labels``. mrbench
uses that string: the prompt file's label holds the task, the example (everything the verifiers
read) and how to sample it; the rollout worker returns it with the K verdicts added (values, and
the verifiers' information blocks that the leave-one-out replay removes), the decoded response
and whether it was truncated. The experience maker rebuilds the K rewards and the replay
contexts from it.

A label is compact JSON with a version field; NaN rewards travel as null.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from tasks.base import Example, Verdict

LABEL_VERSION = 1


class LabelError(ValueError):
    """A label that is not an mrbench label (the message says what is wrong)."""


@dataclass
class Label:
    task: str
    task_options: dict[str, Any]
    example: Example
    #: end-of-turn token ids that stop sampling
    stop: list[int]
    max_new_tokens: int
    #: ``task.verifier_timeout_s``: the verifiers' budget per response (0 or None: no limit)
    verifier_timeout_s: float | None = None
    #: filled by the rollout worker
    verdicts: list[Verdict] | None = None
    text: str | None = None
    truncated: bool | None = None
    score_seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def scored(self) -> bool:
        return self.verdicts is not None

    def rewards(self) -> list[float]:
        """The K reward values in the example's reward order (NaN where a reward does not apply)."""
        if self.verdicts is None:
            raise LabelError(f"example {self.example.id!r}: the label carries no verdicts (not scored)")
        return [float(v.value) for v in self.verdicts]

    def with_verdicts(self, verdicts: list[Verdict], text: str, truncated: bool, seconds: float = 0.0) -> Label:
        return dataclasses.replace(self, verdicts=list(verdicts), text=text, truncated=bool(truncated),
                                   score_seconds=float(seconds))


def _verdict(data: dict[str, Any]) -> Verdict:
    value = data.get("value")
    return Verdict(reward=data["reward"], value=float("nan") if value is None else float(value),
                   reason=data.get("reason", ""), block=data.get("block"),
                   spans=[(int(a), int(b)) for a, b in data.get("spans", [])], detail=data.get("detail") or {})


def encode_label(label: Label) -> str:
    data: dict[str, Any] = {"v": LABEL_VERSION, "task": label.task, "task_options": label.task_options,
                            "example": label.example.to_json(), "stop": [int(s) for s in label.stop],
                            "max_new_tokens": int(label.max_new_tokens)}
    if label.verifier_timeout_s is not None:
        data["verifier_timeout_s"] = float(label.verifier_timeout_s)
    if label.verdicts is not None:
        data.update(verdicts=[v.to_json() for v in label.verdicts], text=label.text, truncated=label.truncated,
                    score_seconds=label.score_seconds)
    if label.extra:
        data["extra"] = label.extra
    return json.dumps(data, separators=(",", ":"), sort_keys=True, default=_not_json)


def _not_json(value: Any) -> Any:
    raise TypeError(f"a label holds JSON values only, not {type(value).__name__}")


def decode_label(text: str) -> Label:
    try:
        data = json.loads(text)
    except (TypeError, json.JSONDecodeError) as exc:
        raise LabelError(f"not an mrbench label (not JSON: {exc}); the prompt file must come from "
                         f"`mrbench run --backend openrlhf`") from exc
    if not isinstance(data, dict) or data.get("v") != LABEL_VERSION:
        raise LabelError(f"not an mrbench label of version {LABEL_VERSION}: {str(text)[:80]!r}")
    try:
        ex = data["example"]
        example = Example(id=ex["id"], messages=ex["messages"], reward_names=ex["reward_names"],
                          meta=ex.get("meta") or {})
        verdicts = [_verdict(v) for v in data["verdicts"]] if "verdicts" in data else None
        return Label(task=data["task"], task_options=data.get("task_options") or {}, example=example,
                     stop=[int(s) for s in data["stop"]], max_new_tokens=int(data["max_new_tokens"]),
                     verifier_timeout_s=(None if data.get("verifier_timeout_s") is None
                                         else float(data["verifier_timeout_s"])),
                     verdicts=verdicts, text=data.get("text"), truncated=data.get("truncated"),
                     score_seconds=float(data.get("score_seconds", 0.0)), extra=data.get("extra") or {})
    except (KeyError, TypeError, ValueError) as exc:
        raise LabelError(f"mrbench label with a missing or malformed field ({exc!r}): {str(text)[:80]!r}") from exc


def scalar_reward(values: list[float]) -> float:
    """OpenRLHF's per-sample scalar (its logs and sanity prints): the mean of the rewards that apply,
    0 when none does. mrbench's advantages never read it."""
    valid = [v for v in values if not math.isnan(v)]
    return sum(valid) / len(valid) if valid else 0.0
