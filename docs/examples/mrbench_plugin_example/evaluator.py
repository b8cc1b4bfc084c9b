"""The ``example-echo-bench`` benchmark: echo accuracy on the ``example-echo`` task's test words.

Cases come from the task's built-in test split, or from ``DATA_DIR/echo_bench.jsonl`` (rows
``{"id": ..., "word": ..., "category": ...}``). A case is right when the response contains its
word; the summary holds the accuracy overall and per category. Predictions are mrbench's JSONL
rows ``{"id": ..., "response": ...}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from evals.base import EvalCase, EvalReport, Evaluator
from mrbench_core.jsonio import iter_jsonl
from mrbench_plugin_example.task import WORDS, echo_prompt

FILE = "echo_bench.jsonl"


class EchoBenchmark(Evaluator):
    """Echo accuracy: the share of prompts whose response contains the requested word."""

    name = "example-echo-bench"
    task = "example-echo"  # the task whose prompts it uses: `mrbench run --task example-echo` evaluates it
    max_new_tokens = 16
    prediction_formats = ("jsonl",)

    def cases(self, data_dir: str | None = None, categories: Sequence[str] | None = None) -> list[EvalCase]:
        if data_dir is None:
            rows = [{"id": f"test-{i}", "word": w, "category": "built-in"} for i, w in enumerate(WORDS["test"])]
        else:
            path = Path(data_dir) / FILE
            if not path.is_file():
                raise FileNotFoundError(f"{self.name}: expected {path} with rows {{id, word, category}}")
            rows = [row for _, row in iter_jsonl(path)]
        cases = [EvalCase(str(r["id"]), echo_prompt(r["word"]), r.get("category", ""), {"word": r["word"]})
                 for r in rows]
        return [c for c in cases if not categories or c.category in categories]

    def score(self, cases: Sequence[EvalCase], responses: dict[str, str]) -> EvalReport:
        rows = []
        for case in cases:
            response = responses.get(case.id)  # a missing prediction is a wrong answer
            right = isinstance(response, str) and case.meta["word"].lower() in response.lower()
            rows.append({"id": case.id, "category": case.category, "valid": right})
        summary: dict[str, float | int] = {"accuracy": sum(r["valid"] for r in rows) / max(len(rows), 1)}
        for category in sorted({r["category"] for r in rows}):
            mine = [r["valid"] for r in rows if r["category"] == category]
            summary[f"accuracy/{category}"] = sum(mine) / len(mine)
        table = "| metric | value |\n|---|---|\n" + "\n".join(f"| {k} | {v:.3f} |" for k, v in summary.items())
        return EvalReport(rows, summary, table)
