"""Execution-accuracy evaluators for Spider dev/test, Spider-Syn, Spider-Realistic, Spider-DK, BIRD dev.

Each benchmark question becomes an :class:`EvalCase` whose messages are the text-to-SQL task's own
prompt (:class:`tasks.text2sql.task.Text2SQLTask`), so a model trained on the task is evaluated in
its training format. Scoring follows the official evaluators, not the training rewards:

- the SQL is read leniently from raw model text (:func:`tasks.text2sql.extract.extract_sql_lenient`);
- both queries get Spider's text normalisation (first statement, DISTINCT removed, ``> =``
  repaired) and are run in the sandbox; a failing prediction is wrong;
- results are compared with Spider test-suite semantics (Spider family) or BIRD's set equality;
- a question whose database is absent, or whose reference fails, is listed in
  ``EvalReport.skipped`` with the reason and is never counted right or wrong; a question with no
  response is counted wrong and reported (``missing_response``).

Execution accuracy = correct / scored, where scored = cases - skipped.
:func:`paper_average` gives the paper's Table 1 average over the benchmarks present.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from evals.base import EvalCase, EvalReport, Evaluator
from evals.registry import EVALUATORS
from tasks.text2sql.data import load_records, resolve_layout
from tasks.text2sql.extract import extract_sql_lenient
from tasks.text2sql.match import results_match
from tasks.text2sql.prompt import record_messages, record_meta
from tasks.text2sql.refcache import ReferenceCache
from tasks.text2sql.sandbox import SandboxLimits
from tasks.text2sql.sqltext import normalize_for_match, order_matters
from tasks.text2sql.worker import WorkerSandbox

#: Table 1 columns, in the paper's order; the paper's average is over these six.
PAPER_BENCHMARKS = ("spider-dev", "spider-test", "spider-syn", "spider-realistic", "spider-dk", "bird-dev")


class Text2SQLEvaluator(Evaluator):
    """Execution accuracy on one text-to-SQL benchmark (see the module docstring)."""

    task = "text2sql"
    max_new_tokens = 2048
    #: mrbench rows (ids the project's or the row index), Spider's one query per line, BIRD's predict_dev.json
    prediction_formats = ("jsonl", "sql-lines", "bird-json")

    def __init__(self, benchmark: str, limits: SandboxLimits | None = None,
                 sample_rows: int = 0, cache_dir: str | None = None) -> None:
        layout = resolve_layout(benchmark)
        self.name = layout.name
        self.benchmark = layout.name
        self.semantics = "bird" if layout.name.startswith("bird") else "spider"
        self.sandbox = WorkerSandbox(limits or SandboxLimits(timeout_s=30.0))
        self.reference_cache = ReferenceCache(self.sandbox, disk_dir=cache_dir)
        self.sample_rows = sample_rows

    # -- cases ------------------------------------------------------------------------------
    def cases(self, data_dir: str | None = None, categories: Sequence[str] | None = None) -> list[EvalCase]:
        records = load_records(self.benchmark, data_dir)
        if categories:
            known = sorted({r.category for r in records})
            unknown = [c for c in categories if str(c) not in known]
            if unknown:
                raise ValueError(f"{self.name}: unknown categories {unknown}; known: {known}")
            records = [r for r in records if r.category in {str(c) for c in categories}]
        # the training task's prompts and verifier fields, rendered without a sandbox
        return [EvalCase(id=rec.id, messages=record_messages(rec, self.sample_rows), category=rec.category,
                         meta={**record_meta(rec), "match": self.semantics}) for rec in records]

    # -- scoring ----------------------------------------------------------------------------
    def score_case(self, case: EvalCase, response: str | None) -> dict[str, Any]:
        """One row: ``correct`` (bool) or ``skipped`` with ``reason``. Never raises on ``response``."""
        meta = case.meta
        row: dict[str, Any] = {"id": case.id, "category": case.category, "db_id": meta.get("db_id")}
        if meta.get("skip_reason") or not meta.get("db_path"):
            return {**row, "skipped": True, "reason": meta.get("skip_reason") or "no database"}
        db_path = str(meta["db_path"])
        reference = str(meta["query"])
        ref = self.reference_cache.get(db_path, normalize_for_match(reference))
        if not ref.ok:
            return {**row, "skipped": True, "reason": f"reference query failed: {ref.error}"}
        if response is None:
            return {**row, "correct": False, "valid": False, "reason": "missing_response", "sql": None}
        found = extract_sql_lenient(response)
        if found is None:
            return {**row, "correct": False, "valid": False, "reason": "no_sql", "sql": None}
        pred = self.sandbox.run(db_path, normalize_for_match(found.statement))
        row.update({"sql": found.statement, "extraction": found.rule, "elapsed_s": round(pred.elapsed_s, 6)})
        if not pred.ok:
            return {**row, "correct": False, "valid": False, "reason": pred.error_kind, "error": pred.error}
        same = results_match(ref.rows, pred.rows, ordered=order_matters(reference), semantics=self.semantics)
        return {**row, "correct": same, "valid": True, "reason": "match" if same else "mismatch",
                "rows": len(pred.rows), "reference_rows": len(ref.rows)}

    def score(self, cases: Sequence[EvalCase], responses: dict[str, str]) -> EvalReport:
        rows: list[dict[str, Any]] = []
        skipped: list[dict[str, Any]] = []
        for case in cases:
            result = self.score_case(case, responses.get(case.id))
            if result.get("skipped"):
                skipped.append({"id": case.id, "reason": result["reason"]})
            rows.append(result)
        summary = summarize(self.name, rows, skipped)
        return EvalReport(rows=rows, summary=summary, table=markdown_table(self.name, summary), skipped=skipped)


def summarize(name: str, rows: Sequence[Mapping[str, Any]], skipped: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    scored = [r for r in rows if not r.get("skipped")]
    correct = sum(1 for r in scored if r.get("correct"))
    by_cat: dict[str, list[int]] = {}
    for r in scored:
        by_cat.setdefault(str(r.get("category", "")), [0, 0])
        by_cat[str(r.get("category", ""))][0] += 1
        by_cat[str(r.get("category", ""))][1] += int(bool(r.get("correct")))
    summary: dict[str, Any] = {
        "benchmark": name,
        "execution_accuracy": correct / len(scored) if scored else float("nan"),
        "n_cases": len(rows), "n_scored": len(scored), "n_correct": correct, "n_skipped": len(skipped),
        "n_missing_response": sum(1 for r in scored if r.get("reason") == "missing_response"),
        "n_no_sql": sum(1 for r in scored if r.get("reason") == "no_sql"),
        "n_failed": sum(1 for r in scored if r.get("valid") is False and r.get("reason") not in
                        ("missing_response", "no_sql")),
    }
    if len(by_cat) > 1 or (by_cat and "" not in by_cat):
        summary["categories"] = {c: {"n": n, "execution_accuracy": k / n} for c, (n, k) in sorted(by_cat.items())}
    return summary


def markdown_table(name: str, summary: Mapping[str, Any]) -> str:
    acc = summary["execution_accuracy"]
    acc_text = "n/a" if math.isnan(acc) else f"{100 * acc:.2f}"
    lines = ["| benchmark | execution accuracy (%) | scored | correct | skipped |", "|---|---|---|---|---|",
             f"| {name} | {acc_text} | {summary['n_scored']} | {summary['n_correct']} | {summary['n_skipped']} |"]
    for cat, c in (summary.get("categories") or {}).items():
        lines.append(f"| {name} / {cat} | {100 * c['execution_accuracy']:.2f} | {c['n']} | | |")
    return "\n".join(lines)


def paper_average(accuracies: Mapping[str, float]) -> dict[str, Any]:
    """Table 1's average: the mean execution accuracy over the paper's six benchmarks that are present
    (not NaN) in ``accuracies``; the others are listed as missing, never counted as 0."""
    present = [b for b in PAPER_BENCHMARKS if b in accuracies and not math.isnan(accuracies[b])]
    missing = [b for b in PAPER_BENCHMARKS if b not in present]
    avg = sum(accuracies[b] for b in present) / len(present) if present else float("nan")
    return {"average": avg, "benchmarks": present, "missing": missing, "complete": not missing}


@EVALUATORS.register("spider-dev")
def spider_dev() -> Text2SQLEvaluator:
    """Spider 1.0 dev execution accuracy."""
    return Text2SQLEvaluator("spider-dev")


@EVALUATORS.register("spider-test")
def spider_test() -> Text2SQLEvaluator:
    """Spider 1.0 test execution accuracy (needs test.json, test_database/)."""
    return Text2SQLEvaluator("spider-test")


@EVALUATORS.register("spider-syn")
def spider_syn() -> Text2SQLEvaluator:
    """Spider-Syn dev execution accuracy."""
    return Text2SQLEvaluator("spider-syn")


@EVALUATORS.register("spider-realistic")
def spider_realistic() -> Text2SQLEvaluator:
    """Spider-Realistic execution accuracy."""
    return Text2SQLEvaluator("spider-realistic")


@EVALUATORS.register("spider-dk")
def spider_dk() -> Text2SQLEvaluator:
    """Spider-DK execution accuracy."""
    return Text2SQLEvaluator("spider-dk")


@EVALUATORS.register("bird-dev")
def bird_dev() -> Text2SQLEvaluator:
    """BIRD dev execution accuracy (needs dev_databases/)."""
    return Text2SQLEvaluator("bird-dev")
