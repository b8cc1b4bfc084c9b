"""``mrbench score``: run a task's verifiers over a JSONL file of responses.

Each input row is one of the task's example rows plus a ``response`` field. Each output row has
``id`` (the row's ``id`` or ``key``, else its 1-based line number), ``reward_names`` (in the
example's order), ``rewards`` (name -> value; null where the reward does not apply), ``blocks``
(name -> verifier block text or null) and ``details`` (name -> reason, spans read, detail).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from mrbench_core.jsonio import atomic_write_text, iter_jsonl
from tasks.base import DataError, Task
from tasks.registry import make_task


def row_id(row: dict[str, Any], lineno: int) -> str:
    for key in ("id", "key", "question_id"):
        if row.get(key) is not None:
            return str(row[key])
    return str(lineno)


def score_row(task: Task, row: dict[str, Any], *, where: str, lineno: int, data_dir: str | None) -> dict[str, Any]:
    if "response" not in row:
        raise DataError("row has no 'response' field", path=where, row=lineno)
    response = row["response"]
    if response is None:
        response = ""
    if not isinstance(response, str):
        raise DataError(f"'response' must be a string, got {type(response).__name__}", path=where, row=lineno)
    example = task.example_from_row(row, where=f"{where}, row {lineno}", data_dir=data_dir)
    verdicts = task.score(example, response)
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


def score_file(task_name: str, data: str, out: str, *, data_dir: str | None = None) -> int:
    task = make_task(task_name)
    lines = []
    for lineno, row in iter_jsonl(data):
        scored = score_row(task, row, where=str(data), lineno=lineno, data_dir=data_dir)
        lines.append(json.dumps(scored, ensure_ascii=False, default=str))
    atomic_write_text(Path(out), "".join(line + "\n" for line in lines))
    return len(lines)
