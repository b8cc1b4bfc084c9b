"""``mrbench score``: run a task's verifiers over a JSONL file of responses.

Each input row is one of the task's example rows plus a ``response`` field. Each output row has
``id`` (the row's ``id`` or ``key``, else its 1-based line number), ``reward_names`` (in the
example's order), ``rewards`` (name -> value; null where the reward does not apply), ``blocks``
(name -> verifier block text or null) and ``details`` (name -> reason, spans read, detail).

A file with no rows, or none that could be scored (a null response, or a reward that could not
be computed, such as execution on a missing database), is a DataError after the output is
written; when only some rows are like that, :meth:`ScoredFile.warnings` says how many.
:meth:`ScoredFile.table` gives each reward's mean over the rows it applies to (rewards named per
example, like instruction following's constraints, averaged by the task's ``reward_family``). Each
response is scored within a time budget of CPU seconds (``time_budget_s``, default
:data:`tasks.base.DEFAULT_VERIFIER_TIMEOUT_S`; :mod:`tasks.verifier_budget`: the verdicts do not
depend on how busy the machine is); past it on both of its tries (:data:`OFFLINE_RETRIES`) its
rewards get their failure values with the reason ``timeout``, and the warnings count those rows.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mrbench_core.jsonio import atomic_write_text, iter_jsonl
from tasks.base import DEFAULT_VERIFIER_TIMEOUT_S, TIMEOUT_REASON, DataError, Task
from tasks.registry import make_task

#: more tries of a response past its budget before it is scored as timed out: offline, a second
#: try costs only time (training gives one, so that a stalled verifier costs one budget per step)
OFFLINE_RETRIES = 1


def row_id(row: dict[str, Any], lineno: int) -> str:
    for key in ("id", "key", "question_id"):
        if row.get(key) is not None:
            return str(row[key])
    return str(lineno)


def score_row(task: Task, row: dict[str, Any], *, where: str, lineno: int, data_dir: str | None,
              time_budget_s: float | None = DEFAULT_VERIFIER_TIMEOUT_S) -> dict[str, Any]:
    if "response" not in row:
        raise DataError("row has no 'response' field", path=where, row=lineno)
    response = row["response"]
    if response is None:
        response = ""
    if not isinstance(response, str):
        raise DataError(f"'response' must be a string, got {type(response).__name__}", path=where, row=lineno)
    example = task.example_from_row(row, where=f"{where}, row {lineno}", data_dir=data_dir)
    verdicts = task.score_within(example, response, time_budget_s, retries=OFFLINE_RETRIES)
    names = [v.reward for v in verdicts]
    return {
        "id": row_id(row, lineno),
        "reward_names": names,
        "rewards": {v.reward: (None if isinstance(v.value, float) and math.isnan(v.value) else v.value)
                    for v in verdicts},
        "blocks": {v.reward: v.block for v in verdicts},
        "details": {v.reward: {"reason": v.reason, "spans": [list(s) for s in v.spans], "detail": v.detail}
                    for v in verdicts},
    }


@dataclass
class ScoredFile:
    """What :func:`score_file` scored: how many rows, and which could not be (fully) scored."""

    rows: int = 0
    usable: int = 0
    no_response: list[str] = field(default_factory=list)  # "row 3" per row whose response is null
    unscored: list[str] = field(default_factory=list)  # "row 3: execution: <reason>" per reward not computed
    timeouts: list[str] = field(default_factory=list)  # "row 3" per row whose verifiers ran past the budget
    sums: dict[str, list[float]] = field(default_factory=dict)  # reward (family) -> [sum, rows]

    def add(self, name: str, value: float | None) -> None:
        if value is not None:
            entry = self.sums.setdefault(name, [0.0, 0])
            entry[0] += float(value)
            entry[1] += 1

    def means(self) -> dict[str, tuple[float, int]]:
        """Reward (family) -> (mean over the rows where it applies, how many rows)."""
        return {name: (total / n, int(n)) for name, (total, n) in sorted(self.sums.items()) if n}

    def table(self) -> str:
        """The per-reward means as a Markdown table."""
        means = self.means()
        if not means:
            return ""
        width = max(len("reward"), *(len(n) for n in means))
        lines = [f"| {'reward'.ljust(width)} |   mean | rows |", f"|{'-' * (width + 2)}|-------:|-----:|"]
        lines += [f"| {name.ljust(width)} | {mean:6.3f} | {n:4d} |" for name, (mean, n) in means.items()]
        return "\n".join(lines)

    def warnings(self) -> list[str]:
        out = []
        if self.no_response:
            out.append(f"{len(self.no_response)} of {self.rows} rows have a null response, scored as empty "
                       f"(first: {self.no_response[0]})")
        if self.unscored:
            out.append(f"{len(self.unscored)} of {self.rows} rows have a reward that could not be computed "
                       f"(first: {self.unscored[0]})")
        if self.timeouts:
            out.append(f"{len(self.timeouts)} of {self.rows} rows ran past the verifiers' time budget and were "
                       f"scored as failing (reason 'timeout'; first: {self.timeouts[0]})")
        return out


def json_line(obj: Any) -> str:
    """``obj`` as one JSON line in UTF-8; where a string holds a lone surrogate (a response may: JSON
    escapes carry them), which UTF-8 cannot encode, every non-ASCII character is written escaped."""
    text = json.dumps(obj, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, default=str)
    return text


def _reward_not_computed(scored: dict[str, Any]) -> str | None:
    for name in scored["reward_names"]:
        if scored["rewards"][name] is None:
            return f"{name}: {scored['details'][name]['reason']}"
    return None


def score_file(task_name: str, data: str, out: str, *, data_dir: str | None = None,
               time_budget_s: float | None = DEFAULT_VERIFIER_TIMEOUT_S) -> ScoredFile:
    task = make_task(task_name)
    family = getattr(task, "reward_family", None) or (lambda name: name)
    lines = []
    result = ScoredFile()
    for lineno, row in iter_jsonl(data):
        scored = score_row(task, row, where=str(data), lineno=lineno, data_dir=data_dir, time_budget_s=time_budget_s)
        if any(d["reason"] == TIMEOUT_REASON for d in scored["details"].values()):
            result.timeouts.append(f"row {lineno}")
        lines.append(json_line(scored))
        result.rows += 1
        for name in scored["reward_names"]:
            result.add(family(name), scored["rewards"][name])
        why = _reward_not_computed(scored)
        if row.get("response") is None:
            result.no_response.append(f"row {lineno}")
        elif why is not None:
            result.unscored.append(f"row {lineno}: {why}")
        else:
            result.usable += 1
    if not result.rows:
        raise DataError("no rows to score (one JSON object per line: the task's example fields plus 'response')",
                        path=str(data))
    atomic_write_text(Path(out), "".join(line + "\n" for line in lines))
    if not result.usable:
        raise DataError(f"none of the {result.rows} rows could be scored: {'; '.join(result.warnings())} "
                        f"(per-row details in {out})", path=str(data))
    return result
