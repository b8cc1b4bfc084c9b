"""``mrbench eval``: score raw model outputs (or generate them first) on one benchmark.

Writes into ``--out``: ``results.jsonl`` (one row per case), ``summary.json``, ``summary.md``
(the table), ``skipped.jsonl`` (cases that could not be scored, with the reason) and, when a
model generated the responses, ``predictions.jsonl``.

Predictions are mrbench's JSONL rows ``{id, response}`` or a file in the format the benchmark's
official evaluator reads (Spider's one query per line, BIRD's ``predict_dev.json``, IFEval's
prompt/response rows, BFCL result files): see :mod:`evals.prediction_formats`. The format is
detected (or named with ``predictions_format``) and recorded in the summary. A file none of whose
predictions matches a case is refused (:mod:`evals.prediction_match`); otherwise a case with no
prediction is scored as the evaluator scores a missing response, and the summary counts those
cases and the predictions that matched no case (``prediction_warnings`` says which).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evals.base import EvalCase, Evaluator
from evals.prediction_formats import FORMATS, read_prediction_file
from evals.prediction_match import MatchResult, match_predictions, match_warnings, require_a_match
from evals.registry import make_evaluator
from mrbench_core.jsonio import atomic_write_json, atomic_write_text

#: how responses are generated for ``--model``: (chat messages per case, max new tokens) -> texts,
#: greedy; the harness builds one from the configured backend
Generate = Callable[[list[list[dict[str, str]]], int], list[str]]


def read_predictions(path: str | Path, cases: Sequence[EvalCase], evaluator: Evaluator,
                     predictions_format: str | None = None) -> tuple[str, MatchResult]:
    """(format used, predictions matched to ``cases``); raises when the evaluator does not read that
    format or when no prediction matches a case. Tells the evaluator the format."""
    file = read_prediction_file(path, predictions_format)
    formats = evaluator.prediction_formats
    if file.format not in formats:
        how = "detected in" if file.detected else "named for"
        raise ValueError(f"{evaluator.name} does not read {file.format} predictions ({how} {path}); it reads "
                         + "; ".join(f"{f}: {FORMATS[f]}" for f in formats))
    matched = match_predictions(file, cases)
    require_a_match(file, matched, cases, evaluator.name, formats)
    evaluator.read_responses_as(file.format)
    return file.format, matched


def generate_for_cases(generate: Generate, cases: Sequence[EvalCase], max_new_tokens: int) -> dict[str, str]:
    """Responses for the cases that can be scored (a case with ``meta['skip_reason']``, e.g. a
    question on a missing database, is not generated for: it will be reported as skipped)."""
    todo = [c for c in cases if not c.meta.get("skip_reason")]
    texts = generate([c.messages for c in todo], max_new_tokens)
    return {c.id: t for c, t in zip(todo, texts)}


def benchmark_results(benchmarks: Mapping[str, str | None], generate: Generate, *, limit: int | None = None,
                      max_new_tokens: int | None = None) -> dict[str, Any]:
    """Evaluate one policy on several benchmarks (name -> data directory; the end of
    ``mrbench run``): per benchmark ``{summary, table, cases, skipped}``, or ``{error}`` when its
    data cannot be loaded, plus the cross-benchmark averages of :func:`suite_averages`."""
    results: dict[str, Any] = {}
    for name, data_dir in benchmarks.items():
        evaluator = make_evaluator(name)
        try:
            cases = evaluator.cases(data_dir=data_dir)
        except (FileNotFoundError, ValueError) as exc:
            results[name] = {"error": str(exc)}
            continue
        cases = cases[:limit] if limit is not None else cases
        responses = generate_for_cases(generate, cases, max_new_tokens or evaluator.max_new_tokens)
        report = evaluator.score(cases, responses)
        results[name] = {"summary": report.summary, "table": report.table, "cases": len(cases),
                         "skipped": len(report.skipped)}
    averages = suite_averages({n: r["summary"] for n, r in results.items() if "summary" in r})
    for key, value in averages.items():
        results[key] = {"summary": value, "table": f"{key}: {value}", "cases": 0, "skipped": 0}
    return results


def run_eval(name: str, *, out_dir: str | Path, predictions: str | None = None, generate: Generate | None = None,
             model: str | None = None, data_dir: str | None = None, categories: Sequence[str] | None = None,
             limit: int | None = None, max_new_tokens: int | None = None,
             predictions_format: str | None = None) -> dict[str, Any]:
    """One benchmark from a predictions file, or from ``generate`` (``model`` names it in the summary)."""
    evaluator = make_evaluator(name)
    cases = evaluator.cases(data_dir=data_dir, categories=categories)
    if limit is not None:
        cases = cases[:limit]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    matched = MatchResult()
    used_format = None
    t0 = time.time()
    if predictions is not None:
        used_format, matched = read_predictions(predictions, cases, evaluator, predictions_format)
        responses = matched.responses
    else:
        if generate is None:
            raise ValueError("run_eval needs a predictions file or a generate function")
        responses = generate_for_cases(generate, cases, max_new_tokens or evaluator.max_new_tokens)
        atomic_write_text(out / "predictions.jsonl", "".join(
            json.dumps({"id": cid, "response": text}, ensure_ascii=False) + "\n" for cid, text in responses.items()))
    t_gen = time.time() - t0
    missing = [c.id for c in cases if c.id not in responses and not c.meta.get("skip_reason")]
    warnings = match_warnings(matched, len(cases)) if predictions is not None else []
    report = evaluator.score(cases, responses)
    t_score = time.time() - t0 - t_gen
    atomic_write_text(out / "results.jsonl", "".join(
        json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in report.rows))
    atomic_write_text(out / "skipped.jsonl", "".join(
        json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in report.skipped))
    summary = dict(report.summary)
    summary.update({
        "benchmark": name,
        "cases": len(cases),
        "missing_predictions": len(missing),
        "unmatched_predictions": len(matched.unmatched),
        "skipped": len(report.skipped),
        "source": "predictions:" + str(predictions) if predictions is not None else f"model:{model}",
        "predictions_format": used_format,
        "prediction_warnings": warnings,
        "seconds_generate": round(t_gen, 3),
        "seconds_score": round(t_score, 3),
    })
    atomic_write_json(out / "summary.json", summary)
    atomic_write_text(out / "summary.md", report.table + "\n")
    summary["table"] = report.table
    return summary


def suite_averages(summaries: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Cross-benchmark figures derived from per-benchmark summaries: for text-to-SQL, the paper's
    Table 1 average of execution accuracy over the benchmarks present (missing ones listed)."""
    from evals.text2sql import PAPER_BENCHMARKS, paper_average

    out: dict[str, Any] = {}
    sql = {n: s["execution_accuracy"] for n, s in summaries.items()
           if n in PAPER_BENCHMARKS and isinstance(s.get("execution_accuracy"), (int, float))}
    if sql:
        out["text2sql_paper_average"] = paper_average(sql)
    return out


def run_suite(names: Sequence[str], *, out_dir: str | Path, generate: Generate, **kwargs: Any) -> dict[str, Any]:
    """Several benchmarks with one model: each into ``out_dir/<name>/``, plus ``suite.json`` with
    every summary and the cross-benchmark averages."""
    summaries = {name: run_eval(name, out_dir=Path(out_dir) / name, generate=generate, **kwargs) for name in names}
    suite = {"benchmarks": {n: {k: v for k, v in s.items() if k != "table"} for n, s in summaries.items()},
             **suite_averages(summaries)}
    atomic_write_json(Path(out_dir) / "suite.json", suite)
    tables = [summaries[n]["table"] for n in names]
    if "text2sql_paper_average" in suite:
        avg = suite["text2sql_paper_average"]
        tables.append(f"text-to-SQL paper average over {', '.join(avg['benchmarks'])}: {avg['average']:.4f}"
                      + (f" (missing: {', '.join(avg['missing'])})" if avg["missing"] else ""))
    suite["table"] = "\n\n".join(tables)
    return suite
