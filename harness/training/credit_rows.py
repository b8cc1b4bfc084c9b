"""The compact per-response credit record (one JSON object per response).

A row holds, for one response of a step:

- ``step``, ``example``, ``group``, ``index`` (the response's position in the step's batch);
- ``prompt``: the group's prompt as text (:func:`prompt_text`), on the first row of each group of
  a step only (the group's other rows omit it; files written before prompts were kept have none);
- ``tokens``: the text piece of every response token (:mod:`harness.token_align`; ``""`` for a
  token holding part of a character, or a special token);
- ``advantage``: the final per-token advantage the update used (null when there was none, as for
  responses replayed outside training), rounded to 4 decimals;
- ``rewards``: per reward, in the example's order, ``name``, ``family`` (the task's
  ``reward_family``), ``value`` (null: does not apply), ``satisfied``, ``reason``, ``read`` (the
  tokens its checker read, as ``[first, end)`` index ranges), ``q`` (the relevance of Eq. 5 per
  token, rounded to 4 decimals; null when the pair was not replayed) and ``w`` (the weight of
  Eq. 6 per token, rounded to 3 decimals; null when the algorithm has none).

Nothing vocabulary-sized is kept: a row is O(tokens x rewards) numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from harness.token_align import Alignment, as_ranges, from_ranges, touched
from tasks.base import Verdict

Q_DIGITS, W_DIGITS, ADV_DIGITS = 4, 3, 4


def rounded(values: Sequence[float] | None, digits: int) -> list[float] | None:
    """Values rounded for the record; None when absent or not finite everywhere (not computed)."""
    if values is None:
        return None
    out = [float(v) for v in values]
    if not out or not all(math.isfinite(v) for v in out):
        return None
    return [round(v, digits) for v in out]


def satisfied(task: Any, name: str, value: float) -> bool:
    """A reward is satisfied at the top of its declared range (a constraint met, a fully correct
    call); a reward without a declared range, when positive."""
    if isinstance(value, float) and math.isnan(value):
        return False
    declared = task.reward_range(name) if task is not None else None
    return float(value) >= declared[1] if declared else float(value) > 0.0


def prompt_text(messages: Sequence[dict[str, Any]]) -> str:
    """A chat prompt as one text: each turn's content, blank-line separated, every turn but a lone
    user turn labelled with its role (``system: ...``)."""
    turns = [m for m in messages if isinstance(m, dict)]
    if len(turns) == 1 and turns[0].get("role") == "user":
        return str(turns[0].get("content", ""))
    return "\n\n".join(f"{m.get('role', '?')}: {m.get('content', '')}" for m in turns)


def credit_row(*, step: int | None, example: str, group: int, index: int, alignment: Alignment,
               verdicts: Sequence[Verdict], task: Any, q: Sequence[Sequence[float] | None] | None = None,
               w: Sequence[Sequence[float] | None] | None = None,
               advantage: Sequence[float] | None = None, prompt: str | None = None) -> dict[str, Any]:
    """One row (see the module docstring); ``q[k]`` and ``w[k]`` per reward, each over the tokens;
    ``prompt`` only for a group's first row."""
    family: Callable[[str], str] = getattr(task, "reward_family", None) or (lambda name: name)
    n = len(alignment)
    rewards = []
    for k, v in enumerate(verdicts):
        value = None if isinstance(v.value, float) and math.isnan(v.value) else float(v.value)
        qk = q[k] if q is not None and k < len(q) else None
        wk = w[k] if w is not None and k < len(w) else None
        rewards.append({
            "name": v.reward, "family": family(v.reward), "value": value,
            "satisfied": value is not None and satisfied(task, v.reward, value), "reason": v.reason,
            "read": as_ranges(touched(alignment, v.spans)),
            "q": rounded(list(qk)[:n], Q_DIGITS) if qk is not None else None,
            "w": rounded(list(wk)[:n], W_DIGITS) if wk is not None else None,
        })
    head = {"prompt": prompt} if prompt is not None else {}
    return {"step": step, "example": example, "group": group, "index": index, **head, "tokens": list(alignment.pieces),
            "advantage": rounded(list(advantage)[:n], ADV_DIGITS) if advantage is not None else None,
            "rewards": rewards}


def read_flags(entry: dict[str, Any], n: int) -> list[bool]:
    """The read flags of a reward entry over a row's ``n`` tokens."""
    return from_ranges(entry.get("read") or [], n)
