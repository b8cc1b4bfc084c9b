"""Finished run records, read for a report and grouped into rows across seeds.

From each record:

- ``evals``: every benchmark's headline numbers in ``eval.json`` (top-level numeric summary
  entries, e.g. ``ifollow-heldout/prompt_level``; counts left out);
- ``curves``: per reward family and step, the mean of that family's ``reward/<name>`` values in
  ``metrics.jsonl``. A reward's family is its name up to the first ``:`` (ifollow's
  ``keywords:existence`` is in ``keywords``); ``all`` is the step's ``reward_mean``;
- ``finals``: per family, the mean of its curve over the last tenth of the steps (at least one
  step), a steadier "final reward" than the last step alone.

Records are grouped by their configuration less the seed, the output place and execution-only
fields: one group is one row (algorithm, model and, where rows of the same algorithm and model
differ, the differing settings, e.g. ``mrtpo (beta=0.25)``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.metric_names import reward_mean_name
from harness.records import EXECUTION_FIELDS, RecordError, find_records, load_record

ALL = "all"
FINAL_SHARE = 0.1


@dataclass
class Run:
    path: str
    seed: int
    config: dict[str, Any]
    evals: dict[str, float]
    finals: dict[str, float]
    curves: dict[str, dict[int, float]]  # family -> step -> value
    steps: int


@dataclass
class Group:
    """One row: the runs (one per seed) of one configuration."""

    task: str
    algo: str
    model: str
    settings: dict[str, Any]   # the flattened config less seed, output and execution fields
    runs: list[Run] = field(default_factory=list)
    label: str = ""

    @property
    def seeds(self) -> list[int]:
        return sorted(r.seed for r in self.runs)


def family_of(reward: str) -> str:
    return reward.split(":", 1)[0]


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return None if math.isnan(value) else value


def eval_numbers(eval_json: dict[str, Any] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for bench, res in ((eval_json or {}).get("benchmarks") or {}).items():
        for key, value in ((res or {}).get("summary") or {}).items():
            number = _number(value)
            if number is not None and "count" not in key and not key.startswith("n_"):
                out[f"{bench}/{key}"] = number
    return out


def reward_curves(metrics: list[dict[str, Any]]) -> dict[str, dict[int, float]]:
    curves: dict[str, dict[int, float]] = defaultdict(dict)
    for row in metrics:
        step = int(row["step"])
        by_family: dict[str, list[float]] = defaultdict(list)
        for key, value in row.items():
            number = _number(value)
            if reward_mean_name(key) is not None and number is not None:
                by_family[family_of(reward_mean_name(key))].append(number)
        mean = _number(row.get("reward_mean"))
        if mean is not None:
            curves[ALL][step] = mean
        for fam, values in by_family.items():
            curves[fam][step] = sum(values) / len(values)
    return dict(curves)


def final_value(curve: dict[int, float], last_step: int) -> float | None:
    """Mean over the last :data:`FINAL_SHARE` of ``last_step`` steps; else the curve's last value."""
    if not curve:
        return None
    window = max(1, math.ceil(FINAL_SHARE * last_step))
    tail = [v for s, v in curve.items() if s > last_step - window]
    return sum(tail) / len(tail) if tail else curve[max(curve)]


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):  # an empty mapping (no algorithm parameters) adds nothing
            out.update(flatten(value, f"{path}."))
        else:
            out[path] = value
    return out


def settings_of(config: dict[str, Any]) -> dict[str, Any]:
    skip = {".".join(p) for p in EXECUTION_FIELDS} | {"seed"}
    return {k: v for k, v in flatten(config).items() if k not in skip and not k.startswith("output.")}


def read_run(path: Path, rec: dict[str, Any]) -> Run:
    metrics = rec["metrics"]
    last = int(metrics[-1]["step"]) if metrics else 0
    curves = reward_curves(metrics)
    finals = {fam: v for fam, c in curves.items() if (v := final_value(c, last)) is not None}
    return Run(path=str(path), seed=int(rec["config"].get("seed", 0)), config=rec["config"],
               evals=eval_numbers(rec.get("eval")), finals=finals, curves=curves, steps=last)


def collect(root: str | Path) -> tuple[list[Run], list[str]]:
    """Finished runs under ``root``, and a line for each record left out (unfinished or unreadable)."""
    from tqdm.auto import tqdm

    runs, problems = [], []
    paths = find_records(Path(root))
    for path in tqdm(paths, desc="records", unit="rec", disable=len(paths) < 50):
        try:
            rec = load_record(path)
            status = rec["provenance"].get("status")
            if status != "finished":
                problems.append(f"{path}: not finished (status {status!r})")
                continue
            runs.append(read_run(path, rec))
        except (RecordError, KeyError, ValueError, TypeError) as exc:
            problems.append(f"{path}: {exc}")
    return runs, problems


def _short(key: str) -> str:
    return key.removeprefix("algo.params.")


def group_runs(runs: list[Run]) -> tuple[dict[str, list[Group]], list[str]]:
    """task -> rows (groups of seeds), ordered by model then algorithm then label; and a line for
    each run left out (a second record of a seed already in its row)."""
    groups: dict[str, Group] = {}
    problems: list[str] = []
    for run in runs:
        settings = settings_of(run.config)
        key = repr(sorted(settings.items(), key=lambda kv: kv[0]))
        if key not in groups:
            cfg = run.config
            groups[key] = Group(cfg["task"]["name"], cfg["algo"]["name"], cfg["model"]["name"], settings)
        group = groups[key]
        if run.seed in group.seeds:
            other = next(r.path for r in group.runs if r.seed == run.seed)
            problems.append(f"{run.path}: left out: a second record of seed {run.seed} of the same configuration "
                            f"(kept: {other})")
            continue
        group.runs.append(run)
    siblings: dict[tuple[str, str, str], list[Group]] = defaultdict(list)
    for g in groups.values():
        siblings[(g.task, g.algo, g.model)].append(g)
    for same in siblings.values():
        keys = sorted({k for g in same for k in g.settings})
        differing = [k for k in keys if len({repr(g.settings.get(k)) for g in same}) > 1]
        for g in same:
            extra = ", ".join(f"{_short(k)}={g.settings.get(k, 'default')}" for k in differing)
            g.label = f"{g.algo} ({extra})" if extra else g.algo
    by_task: dict[str, list[Group]] = defaultdict(list)
    for g in sorted(groups.values(), key=lambda g: (g.task, g.model, g.algo, g.label)):
        by_task[g.task].append(g)
    return dict(by_task), problems
