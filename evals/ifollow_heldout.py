"""``ifollow-heldout``: held-out generated multi-constraint prompts, scored by the task's own checkers.

Needs no data files, so the main job can evaluate on a fresh machine. Cases are the ``test``
split of :class:`tasks.ifollow.task.InstructionFollowingTask` (a stream disjoint from the training
prompts, deterministic). Figures, strict checking as in training:

- ``prompt_level``: share of prompts whose every constraint is satisfied;
- ``instruction_level``: share of all constraints satisfied (micro over constraints);
- ``by_type``: per constraint type, the share satisfied.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from evals.base import EvalCase, EvalReport, Evaluator
from evals.registry import EVALUATORS
from tasks.data_source import load_examples

DEFAULT_CASES = 200


@EVALUATORS.register("ifollow-heldout")
class IFollowHeldoutEvaluator(Evaluator):
    """Held-out generated multi-constraint prompts (no data files needed; the main job's evaluation)."""

    task = "ifollow"
    max_new_tokens = 256

    def __init__(self, size: int = DEFAULT_CASES):
        from tasks.ifollow.task import InstructionFollowingTask

        self._task = InstructionFollowingTask()
        self.size = size

    def cases(self, data_dir: str | None = None, categories: Sequence[str] | None = None) -> list[EvalCase]:
        examples = load_examples(self._task, "test", data_dir, limit=self.size)
        return [EvalCase(ex.id, ex.messages, "generated", {"example": ex, "prompt": ex.meta.get("prompt")})
                for ex in examples]

    def score(self, cases: Sequence[EvalCase], responses: dict[str, str]) -> EvalReport:
        rows: list[dict[str, Any]] = []
        per_type: dict[str, list[float]] = defaultdict(list)
        for case in cases:
            example = case.meta["example"]
            verdicts = self._task.score_within(example, responses.get(case.id, ""), self.verifier_timeout_s,
                                               retries=self.budget_tries - 1)
            oks = [v.value == 1.0 for v in verdicts]
            for (cid, _), ok in zip(example.meta["constraints"], oks):
                per_type[cid].append(float(ok))
            rows.append({"id": case.id, "category": case.category, "valid": all(oks),
                         "constraints": [cid for cid, _ in example.meta["constraints"]], "satisfied": oks,
                         "missing_response": case.id not in responses})
        n_inst = sum(len(r["satisfied"]) for r in rows)
        summary = {
            "prompt_level": sum(r["valid"] for r in rows) / len(rows) if rows else float("nan"),
            "instruction_level": sum(sum(r["satisfied"]) for r in rows) / n_inst if n_inst else float("nan"),
            "n_prompts": len(rows),
            "n_instructions": n_inst,
            "by_type": {t: sum(v) / len(v) for t, v in sorted(per_type.items())},
        }
        table = ("| benchmark | prompt-level | instruction-level | prompts |\n|---|---|---|---|\n"
                 f"| {self.name} | {summary['prompt_level']:.4f} | {summary['instruction_level']:.4f} | {len(rows)} |")
        return EvalReport(rows=rows, summary=summary, table=table)
