"""What ``mrbench run --dry-run`` prints before the backend's own part: the cell, its record, the
steps and batch, the algorithm's beta per step, the end-of-run benchmarks, and an expected time.

The expected time is measured on the spot (:mod:`harness.dry_run_estimate`): a quarter-second
matrix-product probe at the run's thread count under the present load, scaled by the cell's work
(model shape, batch, steps, replaying steps, evaluation cases) against the main job's phases
measured on an idle two-core machine (``bench/README.md``). The dry run prints what it measured.
The run itself then re-estimates from its own timed steps after its first step and after its
first replaying step (:mod:`harness.run_estimate`). The model's shape is read from its config
without loading weights, or its size from a hub name that states it (``1.5B``, ``135M``);
otherwise no estimate is given. On a GPU the CPU figure does not apply (it says so).
"""

from __future__ import annotations

from typing import Any

from evals.generate_cases import duration


def _record_state(cfg: Any) -> tuple[str, int]:
    """(what the record directory holds, steps already done)."""
    from harness.records import read_json, read_jsonl, record_dir_for

    path = record_dir_for(cfg)
    prov_path = path / "provenance.json"
    if not prov_path.exists():
        return "new", 0
    try:
        status = read_json(prov_path).get("status")
        done = len(read_jsonl(path / "metrics.jsonl"))
    except Exception:  # noqa: BLE001  (a dry run only describes; the real run reports a bad record)
        return "unreadable (the run will say why)", 0
    if status == "finished":
        return "finished: it would not be rerun", cfg.schedule.steps
    return f"{status}: it would resume after step {done}", done


def describe(cfg: Any, plan: Any) -> str:
    """The dry run's description of the cell (the module docstring)."""
    from harness.records import record_dir_for

    s, sch = cfg.sampling, cfg.schedule
    state, done = _record_state(cfg)
    lines = [(f"cell: task {cfg.task.name}, algorithm {cfg.algo.name}, model {cfg.model.name}, seed {cfg.seed}, "
             f"backend {cfg.backend.name}"),
             f"record: {record_dir_for(cfg)} ({state})",
             (f"steps: {sch.steps}, each {s.prompts_per_step} prompts x {s.group_size} responses = "
             f"{s.prompts_per_step * s.group_size} responses of at most {s.max_new_tokens} tokens, "
             f"{cfg.optim.mini_batches} update(s) per step")]
    effective = getattr(plan.algorithm, "effective_beta", None)
    if effective is not None:
        betas = " ".join(f"{effective(n):.3g}" for n in range(min(sch.steps, 12)))
        more = " ..." if sch.steps > 12 else ""
        lines.append(f"algorithm: beta {plan.algorithm.config.beta:g}, warm-up {plan.algorithm.config.warmup_steps} "
                     f"steps; effective beta per step: {betas}{more}")
    if finished_record(state):  # nothing would run: no time to estimate either
        lines.append(f"end-of-run benchmarks: {', '.join(plan.benchmarks) or 'none'} (evaluated when it ran: "
                     f"eval.json)")
        lines.append("expected time: none: a finished record is not rerun (its summary and evaluation are "
                     "printed again)")
        return "\n".join(lines)
    missing: dict[str, str] = {}
    sizes = benchmark_sizes(plan.benchmarks, sch.eval_limit, sch.eval_max_new_tokens, missing)
    if plan.benchmarks:
        each = f"{sch.eval_limit} cases" if sch.eval_limit is not None else "all cases"
        tokens = (f"at most {sch.eval_max_new_tokens} tokens each" if sch.eval_max_new_tokens
                  else "each benchmark's own response length")
        counted = ", ".join(f"{name}: {n} cases of up to {t} tokens" for name, (n, t) in sizes.items()
                            if name not in missing)
        lines.append(f"end-of-run benchmarks: {', '.join(plan.benchmarks)} ({each}, {tokens}"
                     + (f"; {counted})" if counted else ")"))
    else:
        lines.append("end-of-run benchmarks: none")
    if missing:
        lines.append(f"warning: {missing_data_line(missing)}")
    lines.append(expected_line(cfg, plan.algorithm, done, {n: v for n, v in sizes.items() if n not in missing}))
    return "\n".join(lines)


def finished_record(state: str) -> bool:
    return state.startswith("finished")


#: how ``mrbench run`` is given the end-of-run benchmarks' data
EVAL_DATA_FLAG = "--schedule.eval_data_dir"


def missing_data_line(missing: dict[str, str]) -> str:
    """One line: which end-of-run benchmarks will not run for want of their data, and how to give it."""
    names = ", ".join(missing)
    first = next(iter(missing.values())).replace("--data-dir", EVAL_DATA_FLAG)
    return (f"end-of-run benchmark(s) {names} will not run: no data for them here ({first}); give their data "
            f"with {EVAL_DATA_FLAG} DIR (a dataset root, as mrbench eval's --data-dir), or choose others with "
            f"--schedule.eval_benchmarks")


def benchmark_sizes(benchmarks: dict[str, str | None], limit: int | None, max_new_tokens: int | None,
                    missing: dict[str, str] | None = None) -> dict[str, tuple[int, int]]:
    """name -> (cases the end-of-run evaluation generates for, their token limit), counted from the
    benchmark's data where it loads (its cases are read, no model is); a benchmark whose data is
    missing counts 0 cases and goes into ``missing`` (name -> why)."""
    from evals.registry import make_evaluator

    out = {}
    for name, data_dir in benchmarks.items():
        evaluator = make_evaluator(name)
        try:
            n = len(evaluator.cases(data_dir=data_dir))
        except (FileNotFoundError, ValueError) as exc:
            n = 0
            if missing is not None:
                missing[name] = str(exc)
        out[name] = (min(n, limit) if limit is not None else n, max_new_tokens or evaluator.max_new_tokens)
    return out


def missing_benchmark_data(benchmarks: dict[str, str | None]) -> dict[str, str]:
    """The end-of-run benchmarks whose data does not load here: name -> why."""
    missing: dict[str, str] = {}
    benchmark_sizes(benchmarks, None, None, missing)
    return missing


def expected_line(cfg: Any, algorithm: Any, done: int, sizes: dict[str, tuple[int, int]],
                  measure: Any = None) -> str:
    """The expected time of steps ``done`` .. the last and of the evaluation, with what was measured
    for it (``measure``: the speed probe, :func:`harness.dry_run_estimate.measure_speed` by default)."""
    from harness.dry_run_estimate import estimate_cell

    if cfg.backend.name != "local":
        return f"expected time: no estimate for backend {cfg.backend.name!r} before it runs"
    steps = max(cfg.schedule.steps - done, 0)
    rerun = ("; the run re-estimates from its own steps as they are timed, after its first step and its first "
             "replaying step (harness/run_estimate.py)")
    try:
        import torch

        on_gpu = cfg.model.device != "cpu" and torch.cuda.is_available()
    except ImportError:  # pragma: no cover
        on_gpu = False
    if on_gpu:
        return "expected time: the run is on a GPU, which the dry run's CPU probe does not measure" + rerun
    found = estimate_cell(cfg, algorithm, done, sizes, measure)
    if found is None:
        return f"expected time: unknown (the size of {cfg.model.name!r} is not known to mrbench)" + rerun
    times, speed = found
    cap = cfg.schedule.eval_max_minutes
    capped = bool(cap) and times.evaluation > cap * 60
    return (f"expected time: about {duration(times.training)} of training for {steps} step(s)"
            + (f" + {duration(times.evaluation)} of evaluation" if sizes else "")
            + (f" (more than schedule.eval_max_minutes {cap:g}: the run will cost it on this machine and evaluate "
               f"only the cases that fit, with a warning)" if capped else "")
            + f" at this machine's present speed (generate {duration(times.generate)}, replay "
            f"{duration(times.replay)}, update {duration(times.update)}, other {duration(times.other)}; "
            f"harness/dry_run_estimate.py)\n{speed.describe()}" + rerun)
