"""AdvancedIF-style rubric grading through a pluggable judge.

A judge (:class:`Judge`) reads the conversation, the response and the rubric items and returns
one :class:`RubricVerdict` per item. Judges live in the registry :data:`JUDGES` (entry-point
group ``mrbench.judges``, or :func:`register_judge` in code). The evaluator takes its judge from
its constructor argument, else from the environment variable ``MRBENCH_JUDGE`` (a registered
name). With none configured, :meth:`AdvancedIFEvaluator.score` raises :class:`JudgeNotConfigured`
explaining how to configure one: rubric grading is never silently zero.

Data (``advancedif/*.jsonl``, or a file given directly): one row per case with ``id`` (or
``key``), the conversation in ``messages``/``conversations`` (or a single ``prompt``) and the
rubric as a list of strings in ``rubrics`` (or ``rubric``/``criteria``).

Figures: prompt-level accuracy (every rubric item satisfied) and item-level accuracy (pooled).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from evals.base import EvalCase, EvalReport, Evaluator
from evals.registry import EVALUATORS
from mrbench_core.jsonio import iter_jsonl
from mrbench_core.registry import Registry
from tasks.base import DataError

JUDGE_ENV = "MRBENCH_JUDGE"


@dataclass
class RubricVerdict:
    satisfied: bool
    reason: str = ""


@runtime_checkable
class Judge(Protocol):
    """Grades one response against rubric items; one verdict per item, in order."""

    name: str

    def grade(self, messages: list[dict[str, str]], response: str, rubric: list[str]) -> list[RubricVerdict]:
        ...


JUDGES = Registry("judge", "mrbench.judges")


def register_judge(name: str, factory: Any, description: str = "") -> None:
    """Register a judge: ``factory`` is a zero-argument callable returning a :class:`Judge`."""
    JUDGES.add(name, factory, description)


class JudgeNotConfigured(RuntimeError):
    """AdvancedIF needs a judge and none was configured."""


HOW_TO_CONFIGURE = (
    "AdvancedIF grades rubric items with an LLM judge, and none is configured. Configure one by "
    "(1) registering a judge factory: evals.ifollow_judge.register_judge('my-judge', MyJudge) in code, or an "
    "entry point in the 'mrbench.judges' group of your package; then (2) selecting it: set "
    f"{JUDGE_ENV}=my-judge, or construct AdvancedIFEvaluator(judge='my-judge') / AdvancedIFEvaluator(judge=obj). "
    "A judge implements grade(messages, response, rubric) -> [RubricVerdict(satisfied, reason), ...]."
)


@EVALUATORS.register("advancedif")
class AdvancedIFEvaluator(Evaluator):
    """AdvancedIF-style rubric grading through a configured judge."""

    task = "ifollow"
    max_new_tokens = 1280

    def __init__(self, judge: str | Judge | None = None):
        self._judge_spec = judge

    def judge(self) -> Judge:
        spec = self._judge_spec if self._judge_spec is not None else os.environ.get(JUDGE_ENV) or None
        if spec is None:
            raise JudgeNotConfigured(HOW_TO_CONFIGURE)
        if isinstance(spec, str):
            if spec not in JUDGES:
                known = ", ".join(JUDGES.names()) or "none registered"
                raise JudgeNotConfigured(f"judge {spec!r} is not registered (known: {known}). {HOW_TO_CONFIGURE}")
            return JUDGES.get(spec)()
        return spec

    def cases(self, data_dir: str | None = None, categories: Sequence[str] | None = None) -> list[EvalCase]:
        if data_dir is None:
            raise DataError("advancedif: pass --data-dir with advancedif/*.jsonl (rows: id, messages or prompt, "
                            "rubrics)")
        root = Path(data_dir)
        files = [root] if root.is_file() else sorted((root / "advancedif").glob("*.jsonl")) or sorted(root.glob("*.jsonl"))
        if not files:
            raise DataError(f"advancedif: no *.jsonl under {root} or {root / 'advancedif'}")
        out = []
        for path in files:
            for lineno, row in iter_jsonl(path, objects=False):
                out.append(self._case(row, path, lineno))
        wanted = set(categories or [])
        return [c for c in out if not wanted or c.category in wanted]

    @staticmethod
    def _case(row: Any, path: Path, lineno: int) -> EvalCase:
        if not isinstance(row, dict):
            raise DataError("each line must be a JSON object", path=str(path), row=lineno)
        turns = row.get("messages", row.get("conversations"))
        if isinstance(turns, list) and turns:
            messages = [{"role": str(t.get("role")), "content": str(t.get("content", ""))} for t in turns
                        if isinstance(t, dict)]
        elif isinstance(row.get("prompt"), str):
            messages = [{"role": "user", "content": row["prompt"]}]
        else:
            raise DataError("row needs 'messages'/'conversations' or 'prompt'", path=str(path), row=lineno)
        rubric = row.get("rubrics", row.get("rubric", row.get("criteria")))
        if isinstance(rubric, str):
            rubric = [rubric]
        if not isinstance(rubric, list) or not rubric or not all(isinstance(r, str) for r in rubric):
            raise DataError("row needs a non-empty list of rubric strings ('rubrics')", path=str(path), row=lineno)
        rid = str(row.get("id", row.get("key", f"{path.name}:{lineno}")))
        return EvalCase(id=rid, messages=messages, category=str(row.get("category", "")), meta={"rubric": rubric})

    def score(self, cases: Sequence[EvalCase], responses: dict[str, str]) -> EvalReport:
        judge = self.judge()  # raises JudgeNotConfigured before any case is graded
        rows, skipped = [], []
        n_items = ok_items = ok_prompts = 0
        for case in cases:
            rubric = case.meta["rubric"]
            response = responses.get(case.id)
            try:
                verdicts = judge.grade(case.messages, response or "", rubric)
            except Exception as exc:  # noqa: BLE001 - a judge failure skips the case, reported
                skipped.append({"id": case.id, "reason": f"judge failed: {type(exc).__name__}: {exc}"})
                continue
            if len(verdicts) != len(rubric):
                skipped.append({"id": case.id, "reason": f"judge returned {len(verdicts)} verdicts for "
                                                         f"{len(rubric)} rubric items"})
                continue
            flags = [bool(v.satisfied) for v in verdicts]
            n_items += len(flags)
            ok_items += sum(flags)
            ok_prompts += all(flags)
            rows.append({"id": case.id, "category": case.category, "results": flags,
                         "reasons": [v.reason for v in verdicts], "correct": all(flags),
                         "missing": response is None})
        graded = len(rows)
        summary = {"prompt_level_acc": ok_prompts / graded if graded else 0.0,
                   "item_level_acc": ok_items / n_items if n_items else 0.0,
                   "n_graded": graded, "n_items": n_items, "judge": getattr(judge, "name", type(judge).__name__)}
        table = "\n".join(["| advancedif | value |", "|---|---|",
                           f"| prompt_level_acc | {summary['prompt_level_acc']:.4f} |",
                           f"| item_level_acc | {summary['item_level_acc']:.4f} |",
                           f"| n_graded | {graded} |", f"| judge | {summary['judge']} |"])
        return EvalReport(rows=rows, summary=summary, table=table, skipped=skipped)
