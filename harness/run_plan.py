"""What ``mrbench run --dry-run`` prints before the backend's own part: the cell, its record, the
steps and batch, the algorithm's beta per step, the end-of-run benchmarks, and an expected time.

The expected time is a rule of thumb for the local backend on a two-core CPU, scaled from the main
job's measured figures (``bench/README.md``: 4 steps of 16 responses of at most 96 tokens took
about 130 s of training with SmolLM2-135M, generation, replay and update together):

    training  ~ TRAIN_S_PER_TOKEN  x (parameters / 135M) x responses per step x max_new_tokens x steps
    evaluation ~ EVAL_S_PER_TOKEN  x (parameters / 135M) x cases x eval_max_new_tokens

Responses may stop before ``max_new_tokens``, so the rule tends to overstate; a busy machine,
long prompts (text-to-SQL schemas, tool lists) or more updates per step make it understate (a
shared two-core machine took about 2.7 times as long for the main job). The run itself then
measures: after its first step, and after its first step that replays, it prints what the rest
should take at the machine's present speed (:mod:`harness.run_estimate`). The
model size is known for the embedded models and read from a hub name that states it (``1.5B``,
``135M``); otherwise no estimate is given. On a GPU the figure does not apply (it says so).
"""

from __future__ import annotations

import re
from typing import Any

from evals.generate_cases import duration

#: seconds per sampled response token of a training step (sampling, scoring, replay, update), per
#: 135M parameters, two CPU cores: the main job's ~32 s per step of 16 x 96 tokens
TRAIN_S_PER_TOKEN = 0.021
#: seconds per generated evaluation token (greedy, batches of 8, short prompts), per 135M parameters
EVAL_S_PER_TOKEN = 0.006
REFERENCE_MILLIONS = 135.0

#: parameter counts (millions) of the names the harness builds itself
KNOWN_SIZES = {"smollm2-135m": 135.0, "tiny-random": 0.1}
_SIZE_IN_NAME = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)\s*([bBmM])(?![a-zA-Z])")


def model_millions(name: str) -> float | None:
    """Parameters (millions) of a model name: the embedded ones, or a size the name states."""
    if name in KNOWN_SIZES:
        return KNOWN_SIZES[name]
    if name.startswith("tiny-random"):
        return KNOWN_SIZES["tiny-random"]
    match = _SIZE_IN_NAME.search(name.rstrip("/").split("/")[-1])
    if match is None:
        return None
    value = float(match.group(1))
    return value * 1000.0 if match.group(2).lower() == "b" else value


def expected_seconds(cfg: Any, steps: int, sizes: dict[str, tuple[int, int]]) -> tuple[float, float] | None:
    """(training, evaluation) seconds by the rule of thumb (module docstring), or None; ``sizes``:
    each benchmark's (cases, token limit)."""
    millions = model_millions(cfg.model.name)
    if millions is None:
        return None
    scale = millions / REFERENCE_MILLIONS
    s = cfg.sampling
    train = TRAIN_S_PER_TOKEN * scale * s.prompts_per_step * s.group_size * s.max_new_tokens * steps
    evaluation = EVAL_S_PER_TOKEN * scale * sum(n * tokens for n, tokens in sizes.values())
    return train, evaluation


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
    sizes = benchmark_sizes(plan.benchmarks, sch.eval_limit, sch.eval_max_new_tokens)
    if plan.benchmarks:
        each = f"{sch.eval_limit} cases" if sch.eval_limit is not None else "all cases"
        tokens = (f"at most {sch.eval_max_new_tokens} tokens each" if sch.eval_max_new_tokens
                  else "each benchmark's own response length")
        counted = ", ".join(f"{name}: {n} cases of up to {t} tokens" for name, (n, t) in sizes.items())
        lines.append(f"end-of-run benchmarks: {', '.join(plan.benchmarks)} ({each}, {tokens}; {counted})")
    else:
        lines.append("end-of-run benchmarks: none")
    lines.append(expected_line(cfg, max(sch.steps - done, 0), sizes))
    return "\n".join(lines)


def benchmark_sizes(benchmarks: dict[str, str | None], limit: int | None,
                    max_new_tokens: int | None) -> dict[str, tuple[int, int]]:
    """name -> (cases the end-of-run evaluation generates for, their token limit), counted from the
    benchmark's data where it loads (its cases are read, no model is); a benchmark whose data is
    missing counts ``limit`` cases (0 without one)."""
    from evals.registry import make_evaluator

    out = {}
    for name, data_dir in benchmarks.items():
        evaluator = make_evaluator(name)
        try:
            n = len(evaluator.cases(data_dir=data_dir))
        except (FileNotFoundError, ValueError):
            n = limit or 0
        out[name] = (min(n, limit) if limit is not None else n, max_new_tokens or evaluator.max_new_tokens)
    return out


def expected_line(cfg: Any, steps: int, sizes: dict[str, tuple[int, int]]) -> str:
    if cfg.backend.name != "local":
        return f"expected time: no rule of thumb for backend {cfg.backend.name!r}"
    estimate = expected_seconds(cfg, steps, sizes)
    if estimate is None:
        return f"expected time: unknown (the size of {cfg.model.name!r} is not known to mrbench)"
    train, evaluation = estimate
    cap = cfg.schedule.eval_max_minutes
    capped = bool(cap) and evaluation > cap * 60
    text = (f"expected time: about {duration(train)} of training for {steps} step(s)"
            + (f" + {duration(evaluation)} of evaluation" if sizes else "")
            + (f" (more than schedule.eval_max_minutes {cap:g}: the run will cost it on this machine and evaluate "
               f"only the cases that fit, with a warning)" if capped else "")
            + " on two idle CPU cores (rule of thumb in harness/run_plan.py; a GPU is much faster); the run "
            "re-estimates from its own steps as they are timed on this machine (harness/run_estimate.py)")
    try:
        import torch

        if cfg.model.device != "cpu" and torch.cuda.is_available():
            text += "; a GPU is present, so expect far less"
    except ImportError:  # pragma: no cover
        pass
    return text
