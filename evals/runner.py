"""``mrbench eval``: score raw model outputs (or generate them first) on one benchmark.

Writes into ``--out``: ``results.jsonl`` (one row per case), ``summary.json``, ``summary.md``
(the table), ``skipped.jsonl`` (cases that could not be scored, with the reason) and, when a
model generated the responses, ``predictions.jsonl``. The JSON is strict: an undefined figure
(accuracy over no scorable case) is ``null``, never ``NaN``.

Predictions are mrbench's JSONL rows ``{id, response}`` or a file in the format the benchmark's
official evaluator reads (Spider's one query per line, BIRD's ``predict_dev.json``, IFEval's
prompt/response rows, BFCL result files): see :mod:`evals.prediction_formats`. The format is
detected (or named with ``predictions_format``) and recorded in the summary. A file none of whose
predictions matches a case is refused (:mod:`evals.prediction_match`); otherwise a case with no
prediction is scored as the evaluator scores a missing response, and the summary counts those
cases and the predictions that matched no case (``prediction_warnings`` says which).

With a model, generation is batched with a progress bar per case (:mod:`evals.generate_cases`),
and ``max_minutes`` refuses, before anything is generated, a benchmark whose generation is
estimated on this machine to take longer; several benchmarks are all costed before the first
starts, and each one's result is reported as it finishes (``run_suite(on_result=...)``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from evals.base import EvalCase, Evaluator
from evals.generate_cases import Estimate, Generate, decoding_info, estimate, generate_for_cases
from evals.prediction_formats import FORMATS, stream_prediction_file
from evals.prediction_match import MatchResult, match_predictions, match_warnings, require_a_match
from evals.registry import make_evaluator
from mrbench_core.jsonio import atomic_write_json, atomic_write_text, strict_json_line


def read_predictions(path: str | Path, cases: Sequence[EvalCase], evaluator: Evaluator,
                     predictions_format: str | None = None) -> tuple[str, MatchResult]:
    """(format used, predictions matched to ``cases``); raises when the evaluator does not read that
    format or when no prediction matches a case. Tells the evaluator the format."""
    file = stream_prediction_file(path, predictions_format)  # read once, while matching
    formats = evaluator.prediction_formats
    if file.format not in formats:
        how = "detected in" if file.detected else "named for"
        raise ValueError(f"{evaluator.name} does not read {file.format} predictions ({how} {path}); it reads "
                         + "; ".join(f"{f}: {FORMATS[f]}" for f in formats))
    matched = match_predictions(file, cases)
    require_a_match(file, matched, cases, evaluator.name, formats)
    evaluator.read_responses_as(file.format)
    return file.format, matched


class OverBudget(ValueError):
    """A benchmark whose estimated generation time exceeds ``max_minutes``; nothing was started."""


def load_cases(name: str, *, data_dir: str | None = None, categories: Sequence[str] | None = None,
               limit: int | None = None) -> tuple[Evaluator, list[EvalCase]]:
    evaluator = make_evaluator(name)
    cases = evaluator.cases(data_dir=data_dir, categories=categories)
    return evaluator, (cases[:limit] if limit is not None else cases)


def check_budget(planned: Sequence[tuple[str, Evaluator, list[EvalCase]]], generate: Generate,
                 max_new_tokens: int | None, max_minutes: float | None,
                 say: Callable[[str], None] | None = print) -> list[Estimate]:
    """Estimate each benchmark's generation time on this machine (:func:`evals.generate_cases.estimate`),
    say it, and raise :class:`OverBudget` naming every benchmark above ``max_minutes`` (None or 0:
    no bound, no estimate). First, whatever ``max_minutes``, the cases whose prompts cannot fit in
    memory are left out of each benchmark's list, with a warning (:func:`evals.eval_budget.fit_memory`),
    so that neither the probes nor the generation meet them; a benchmark left with none is refused."""
    from evals.eval_budget import fit_memory

    for name, ev, cases in planned:
        kept, notes = fit_memory(name, generate, cases, max_new_tokens or ev.max_new_tokens)
        for note in notes:
            if say is not None:
                say(f"mrbench eval: warning: {note}")
        if notes and not kept:
            raise OverBudget(notes[0])
        cases[:] = kept
    if not max_minutes:
        return []
    found = [estimate(name, generate, cases, max_new_tokens or ev.max_new_tokens, generate_cases=generate_for_cases)
             for name, ev, cases in planned]
    for e in found:
        if say is not None:
            say(f"estimate: {e.describe()}")
    over = [e for e in found if e.seconds > max_minutes * 60]
    if over:
        raise OverBudget("; ".join(e.describe() for e in over) + f": more than --max-minutes {max_minutes:g}; raise "
                         f"--max-minutes, or evaluate fewer cases (--limit N) or shorter responses "
                         f"(--max-new-tokens N)")
    return found


def benchmark_results(benchmarks: Mapping[str, str | None], generate: Generate, *, limit: int | None = None,
                      max_new_tokens: int | None = None, verifier_timeout_s: float | None = None,
                      max_minutes: float | None = None, say: Callable[[str], None] | None = print) -> dict[str, Any]:
    """Evaluate one policy on several benchmarks (name -> data directory; the end of
    ``mrbench run``): per benchmark ``{summary, table, cases, skipped}`` (and ``capped``: the
    warnings of :func:`evals.eval_budget.fit_cases`, which fits each benchmark to this machine's
    memory and ``max_minutes`` before it starts), or ``{error}`` when its data cannot be loaded or
    no case fits, plus the cross-benchmark averages of :func:`suite_averages`."""
    from evals.eval_budget import fit_cases

    results: dict[str, Any] = {}
    for name, data_dir in benchmarks.items():
        evaluator = make_evaluator(name)
        if verifier_timeout_s is not None:  # the run's task.verifier_timeout_s
            evaluator.verifier_timeout_s = verifier_timeout_s
        try:
            cases = evaluator.cases(data_dir=data_dir)
        except (FileNotFoundError, ValueError) as exc:
            results[name] = {"error": str(exc)}
            continue
        cases = cases[:limit] if limit is not None else cases
        tokens = max_new_tokens or evaluator.max_new_tokens
        cases, capped = fit_cases(name, generate, cases, tokens, max_minutes)
        for warning in capped:
            if say is not None:
                say(f"mrbench: warning: {warning}")
        if not cases:
            results[name] = {"error": "; ".join(capped) or "no case to evaluate", "capped": capped}
            continue
        responses = generate_for_cases(generate, cases, tokens, desc=name)
        report = evaluator.score(cases, responses)
        results[name] = {"summary": report.summary, "table": report.table, "cases": len(cases),
                         "skipped": len(report.skipped), **({"capped": capped} if capped else {})}
    averages = suite_averages({n: r["summary"] for n, r in results.items() if "summary" in r})
    for key, value in averages.items():
        results[key] = {"summary": value, "table": f"{key}: {value}", "cases": 0, "skipped": 0}
    return results


def run_eval(name: str, *, out_dir: str | Path, predictions: str | None = None, generate: Generate | None = None,
             model: str | None = None, data_dir: str | None = None, categories: Sequence[str] | None = None,
             limit: int | None = None, max_new_tokens: int | None = None,
             predictions_format: str | None = None, max_minutes: float | None = None,
             loaded: tuple[Evaluator, list[EvalCase]] | None = None) -> dict[str, Any]:
    """One benchmark from a predictions file, or from ``generate`` (``model`` names it in the summary;
    ``max_minutes``: refuse, before generating, a benchmark estimated to take longer; ``loaded``:
    the evaluator and cases when already loaded)."""
    evaluator, cases = loaded or load_cases(name, data_dir=data_dir, categories=categories, limit=limit)
    if predictions is None and generate is not None and loaded is None:
        check_budget([(name, evaluator, cases)], generate, max_new_tokens, max_minutes)
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
        responses = generate_for_cases(generate, cases, max_new_tokens or evaluator.max_new_tokens, desc=name)
        atomic_write_text(out / "predictions.jsonl", "".join(
            json.dumps({"id": cid, "response": text}, ensure_ascii=False) + "\n" for cid, text in responses.items()))
    t_gen = time.time() - t0
    missing = [c.id for c in cases if c.id not in responses and not c.meta.get("skip_reason")]
    warnings = match_warnings(matched, len(cases)) if predictions is not None else []
    report = evaluator.score(cases, responses)
    t_score = time.time() - t0 - t_gen
    # strict JSON (an undefined figure, e.g. accuracy over no scorable case, is null, not NaN)
    atomic_write_text(out / "results.jsonl", "".join(map(strict_json_line, report.rows)))
    atomic_write_text(out / "skipped.jsonl", "".join(map(strict_json_line, report.skipped)))
    summary = dict(report.summary)
    summary.update({
        "benchmark": name,
        "cases": len(cases),
        "missing_predictions": len(missing),
        "unmatched_predictions": matched.unmatched_count,
        "skipped": len(report.skipped),
        "source": "predictions:" + str(predictions) if predictions is not None else f"model:{model}",
        "predictions_format": used_format,
        "prediction_warnings": warnings,
        "decoding": decoding_info(generate) if predictions is None and generate is not None else None,
        "max_new_tokens": (max_new_tokens or evaluator.max_new_tokens) if predictions is None else None,
        "seconds_generate": round(t_gen, 3),
        "seconds_score": round(t_score, 3),
    })
    atomic_write_json(out / "summary.json", summary, strict=True)
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


def run_suite(names: Sequence[str], *, out_dir: str | Path, generate: Generate,
              on_result: Callable[[str, dict[str, Any]], None] | None = None, max_minutes: float | None = None,
              data_dir: str | None = None, categories: Sequence[str] | None = None, limit: int | None = None,
              max_new_tokens: int | None = None, **kwargs: Any) -> dict[str, Any]:
    """Several benchmarks with one model: each into ``out_dir/<name>/``, plus ``suite.json`` with
    every summary and the cross-benchmark averages. Every benchmark is loaded and costed
    (``max_minutes``) before the first starts; ``on_result(name, summary)`` is called as each ends."""
    planned = [(name, *load_cases(name, data_dir=data_dir, categories=categories, limit=limit)) for name in names]
    check_budget(planned, generate, max_new_tokens, max_minutes)
    summaries: dict[str, dict[str, Any]] = {}
    for i, (name, evaluator, cases) in enumerate(planned, start=1):
        print(f"benchmark {i}/{len(planned)}: {name} ({len(cases)} cases)")
        summaries[name] = run_eval(name, out_dir=Path(out_dir) / name, generate=generate, data_dir=data_dir,
                                   categories=categories, limit=limit, max_new_tokens=max_new_tokens,
                                   loaded=(evaluator, cases), **kwargs)
        if on_result is not None:
            on_result(name, summaries[name])
    suite = {"benchmarks": {n: {k: v for k, v in s.items() if k != "table"} for n, s in summaries.items()},
             **suite_averages(summaries)}
    atomic_write_json(Path(out_dir) / "suite.json", suite, strict=True)
    tables = [summaries[n]["table"] for n in names]
    average = ""
    if "text2sql_paper_average" in suite:
        avg = suite["text2sql_paper_average"]
        average = (f"text-to-SQL paper average over {', '.join(avg['benchmarks'])}: {avg['average']:.4f}"
                   + (f" (missing: {', '.join(avg['missing'])})" if avg["missing"] else ""))
        tables.append(average)
    suite["table"] = "\n\n".join(tables)
    suite["average_table"] = average
    return suite
