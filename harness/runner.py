"""Run one cell: pre-flight, open its record, train with the configured backend, evaluate, finish, summarise."""

from __future__ import annotations

import math
import shutil
import sys
import time
from typing import Any

from evals.runner import benchmark_results
from harness import disk_full
from harness.backends.export import remove_stale_exports
from harness.config import RunConfig
from harness.loggers import open_loggers
from harness.preflight import PreflightError, preflight
from harness.records import RecordError, RunRecord, read_json
from harness.resolved import resolved_task_options
from harness.run_plan import EVAL_DATA_FLAG, missing_benchmark_data, missing_data_line

#: a per-step list longer than this prints its first and last few values only
LIST_SHOWN = 12


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return "nan" if math.isnan(value) else f"{value:.4g}"
    if isinstance(value, dict):
        return "(" + " ".join(f"{k}={_fmt(v)}" for k, v in value.items()) + ")"
    if isinstance(value, list):
        shown = [_fmt(v) for v in value]
        if len(shown) > LIST_SHOWN:
            half = LIST_SHOWN // 2
            shown = shown[:half] + [f"... ({len(value) - 2 * half} more)"] + shown[-half:]
        return " ".join(shown)
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
            for note in res.get("capped", []):
                print(f"    capped: {note}")


def finished_eval(rec: RunRecord) -> dict[str, Any]:
    """The end-of-run benchmark results a finished record holds (``eval.json``), or none."""
    path = rec.path / "eval.json"
    if not path.exists():
        return {}
    try:
        return read_json(path).get("benchmarks", {})
    except RecordError:
        return {}


def record_what_runs(cfg: RunConfig, plan: Any) -> None:
    """Write the algorithm's resolved parameters and the task's resolved options (every default filled
    in) into ``cfg``, so that ``config.json`` says what ran and an explicit default is the same
    configuration as an omitted one."""
    cfg.algo.params = plan.algorithm.config_dict()
    cfg.task.options = resolved_task_options(cfg.task.name, cfg.task.options)


def dry_run(cfg: RunConfig) -> int:
    """Pre-flight without the machine check, then print what would run (:mod:`harness.run_plan`: steps,
    batch, beta per step, benchmarks, an expected time) and what the backend would launch; trains
    nothing, opens no record."""
    try:
        plan = preflight(cfg, environment=False)
    except PreflightError as exc:
        print(f"mrbench run: {exc}", file=sys.stderr)
        return 2
    record_what_runs(cfg, plan)
    if plan.note():
        print(f"mrbench run: note: {plan.note()}", file=sys.stderr)
    from harness.run_plan import describe

    print(describe(cfg, plan))
    print(plan.backend_class(cfg, plan.task, plan.algorithm).dry_run())
    return 0


def end_of_run_eval(plan: Any, generate: Any, cfg: RunConfig) -> dict[str, Any]:
    """``eval.json``'s content: the run's benchmarks (``plan.benchmarks``) with ``generate``, limited and
    decoded as ``cfg.schedule`` says, and how it decoded (``decoding``: precision, attention,
    threads). The one evaluation path of a trained run and of its base model
    (:mod:`harness.base_model`), so that both are scored alike."""
    from evals.generate_cases import decoding_info

    s = cfg.schedule
    results = benchmark_results(plan.benchmarks, generate, limit=s.eval_limit, max_new_tokens=s.eval_max_new_tokens,
                                verifier_timeout_s=cfg.task.verifier_timeout_s, max_minutes=s.eval_max_minutes)
    for res in results.values():  # a benchmark without its data: the hint names the run's own setting
        if isinstance(res, dict) and "error" in res:
            res["error"] = str(res["error"]).replace("--data-dir", EVAL_DATA_FLAG)
    return {"benchmarks": results, "eval_limit": s.eval_limit, "eval_max_new_tokens": s.eval_max_new_tokens,
            "decoding": decoding_info(generate)}


def _stopped_on_full_disk(rec: RunRecord, loggers: Any, full: disk_full.DiskFull) -> int:
    """Mark the record failed (or say it could not be), close the loggers, print one line: exit 2.
    Also for a folder that refuses writes (:class:`harness.disk_full.NotWritable`)."""
    recorded = disk_full.record_failure(rec, f"{type(full).__name__}: {full}")
    if loggers:
        loggers.close(None)
    print(f"mrbench run: {full}" + ("" if recorded else
          " (the record could not be marked failed either: provenance.json still says 'running'; "
          "the next run of this command says so)"), file=sys.stderr)
    return 2


def run(cfg: RunConfig) -> int:
    """Pre-flight, open the record, train, evaluate, finish. A run that stops on an error leaves
    its record marked ``failed`` with the reason; one stopped by Ctrl-C or SIGTERM leaves it
    ``interrupted`` and re-raises the KeyboardInterrupt (the command prints one line; a sweep stops).
    Rerunning the command resumes either. A full disk is one line and exit code 2 (:mod:`harness.disk_full`),
    the record ``failed``. A finished record is not rerun: its summary and
    evaluation are printed again."""
    try:
        plan = preflight(cfg)
    except PreflightError as exc:
        print(f"mrbench run: {exc}", file=sys.stderr)
        return 2
    record_what_runs(cfg, plan)
    if plan.note():
        print(f"mrbench run: note: {plan.note()}", file=sys.stderr)
    try:
        rec = RunRecord.open(cfg)
    except RecordError as exc:
        print(f"mrbench run: {exc}", file=sys.stderr)
        return 2
    if plan.not_run:
        rec.start_fields["not_run"] = list(plan.not_run)
    try:
        remove_stale_exports(rec.path)  # .model.tmp-*/ of a killed export (the lock keeps writers out)
        if rec.finished:
            print(f"{rec.path}: this run already finished; not rerunning (remove the directory to start over)")
            print_summary(rec, rec.provenance().get("summary", {}), finished_eval(rec))
            return 0
        note = disk_full.note_previous(rec)
        if note:
            print(f"mrbench run: note: {note}", file=sys.stderr)
        missing = missing_benchmark_data(plan.benchmarks)
        if missing:  # said before training, not found out after it
            print(f"mrbench run: warning: {missing_data_line(missing)}", file=sys.stderr)
        t0 = time.time()
        loggers = open_loggers(cfg, rec)  # --output.loggers: every metrics row, benchmarks at the end
        try:
            backend = plan.backend_class(cfg, plan.task, plan.algorithm)
            summary = backend.train(rec)
            evaluation = end_of_run_eval(plan, backend.generate, cfg)
        except RecordError as exc:  # a damaged record or checkpoint: one line naming the file and what to do
            rec.fail(f"{type(exc).__name__}: {exc}")
            if loggers:
                loggers.close(None)
            print(f"mrbench run: {exc}", file=sys.stderr)
            return 2
        except BaseException as exc:
            full = disk_full.find(exc, rec.path)
            if full is not None:  # one line naming the path and the room needed; the last checkpoint stays
                return _stopped_on_full_disk(rec, loggers, full)
            if isinstance(exc, KeyboardInterrupt):  # Ctrl-C or SIGTERM (the backend checkpointed where it could)
                rec.interrupt(str(exc) or "KeyboardInterrupt")
            else:
                rec.fail(f"{type(exc).__name__}: {exc}")
            if loggers:
                loggers.close(None)
            from harness.backends.base import BackendRunError

            if isinstance(exc, BackendRunError):  # a training process that ended early: its cause, one line
                print(f"mrbench run: {exc}", file=sys.stderr)
                return 1
            raise
        eval_results = evaluation["benchmarks"]
        summary = dict(summary)
        summary["wall_seconds"] = round(time.time() - t0, 1)
        try:
            rec.write_eval(evaluation)
            rec.finish(summary)
        except OSError as exc:
            full = disk_full.find(exc, rec.path)
            if full is None:
                raise
            return _stopped_on_full_disk(rec, loggers, full)
        if loggers:
            loggers.catch_up(rec.metrics())
            loggers.benchmarks(eval_results)
            loggers.close(summary)
        if not cfg.output.keep_checkpoint and rec.checkpoint_dir.exists():
            shutil.rmtree(rec.checkpoint_dir)  # the record is complete; resume state is no longer needed
        print_summary(rec, summary, eval_results)
        return 0
    finally:
        rec.unlock()
