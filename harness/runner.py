"""Run one cell: open its record, train with the configured backend, evaluate, finish, summarise."""

from __future__ import annotations

import math
import shutil
import sys
import time
from typing import Any

from harness.config import RunConfig
from harness.records import RecordError, RunRecord


def evaluate_after_training(backend: Any, cfg: RunConfig) -> dict[str, Any]:
    """Greedy end-of-run evaluation on ``cfg.schedule.eval_benchmarks`` with the trained policy."""
    from evals.runner import make_evaluator

    results: dict[str, Any] = {}
    for name in cfg.schedule.eval_benchmarks:
        evaluator = make_evaluator(name)
        try:
            cases = evaluator.cases(data_dir=cfg.schedule.eval_data_dir)
        except (FileNotFoundError, ValueError) as exc:
            results[name] = {"error": str(exc)}
            continue
        if cfg.schedule.eval_limit is not None:
            cases = cases[: cfg.schedule.eval_limit]
        todo = [c for c in cases if not c.meta.get("skip_reason")]
        max_new = cfg.schedule.eval_max_new_tokens or evaluator.max_new_tokens
        texts = backend.generate([c.messages for c in todo], max_new_tokens=max_new)
        report = evaluator.score(cases, {c.id: t for c, t in zip(todo, texts)})
        results[name] = {"summary": report.summary, "table": report.table, "cases": len(cases),
                         "skipped": len(report.skipped)}
    from evals.runner import suite_averages

    averages = suite_averages({n: r["summary"] for n, r in results.items() if "summary" in r})
    for key, value in averages.items():
        results[key] = {"summary": value, "table": f"{key}: {value}", "cases": 0, "skipped": 0}
    return results


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def print_summary(rec: RunRecord, summary: dict[str, Any], eval_results: dict[str, Any] | None = None) -> None:
    print(f"\nrecord: {rec.path}")
    for key, value in summary.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k}={_fmt(v)}" for k, v in value.items())
            print(f"  {key}: {inner}")
        else:
            print(f"  {key}: {_fmt(value)}")
    for name, res in (eval_results or {}).items():
        if "error" in res:
            print(f"  eval {name}: not run ({res['error']})")
        else:
            print(f"  eval {name} ({res['cases']} cases):")
            print("    " + res["table"].replace("\n", "\n    "))


def run(cfg: RunConfig) -> int:
    from harness.catalog import BACKENDS

    try:
        rec = RunRecord.open(cfg)
    except RecordError as exc:
        print(f"mrbench run: {exc}", file=sys.stderr)
        return 2
    try:
        if rec.finished:
            print(f"{rec.path}: this run already finished; not rerunning (remove the directory to start over)")
            print_summary(rec, rec.provenance().get("summary", {}))
            return 0
        backend = BACKENDS.get(cfg.backend.name)(cfg)
        t0 = time.time()
        summary = backend.train(rec)
        eval_results = evaluate_after_training(backend, cfg) if cfg.schedule.eval_benchmarks else {}
        rec.write_eval({"benchmarks": eval_results, "eval_limit": cfg.schedule.eval_limit})
        summary = dict(summary)
        summary["wall_seconds"] = round(time.time() - t0, 1)
        rec.finish(summary)
        if not cfg.output.keep_checkpoint and rec.checkpoint_dir.exists():
            shutil.rmtree(rec.checkpoint_dir)  # the record is complete; resume state is no longer needed
        print_summary(rec, summary, eval_results)
        return 0
    finally:
        rec.unlock()
