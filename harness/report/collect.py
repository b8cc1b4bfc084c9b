"""Finished run records, read for a report and grouped into rows across seeds.

From each record:

- ``evals``: every benchmark's headline numbers in ``eval.json`` (top-level numeric summary
  entries, e.g. ``ifollow-heldout/prompt_level``; counts left out);
- ``curves``: per reward family and step, the mean of that family's ``reward/<name>`` values in
  ``metrics.jsonl``. The task says which family a logged name belongs to
  (``Task.report_group``: ifollow's ``keywords:existence`` is in ``keywords``; other tasks keep
  each name); ``all`` is the step's ``reward_mean``;
- ``finals``: per family, the mean of its curve over the last tenth of the steps (at least one
  step), a steadier "final reward" than the last step alone.

Records are grouped by their configuration (the algorithm's parameters resolved, so records
written before ``config.json`` stored resolved ones group with newer ones) less the seed, the output place and execution-only
fields, and by their numerics (:mod:`harness.report.pooling`: the fingerprint, or for a record
without one its commit and versions): one group is one row (algorithm, model and, where rows of
the same algorithm and model differ, the differing settings, e.g. ``mrtpo (beta=0.25)``, and
what sets apart the numerics of one configuration's rows, e.g. ``gdpo (commit 311470f,
fingerprint unknown)``). ``--pool-across-versions`` groups by configuration alone. A base record
(:mod:`harness.base_model`) is a group of its own, ``base``.

A value that is not a finite number (NaN, Infinity) is kept out of every mean, interval and curve,
and named: ``Run.notes`` says which record, file, key (and step) and what it was, and
``Run.bad_evals`` / ``bad_finals`` mark the column, so that its cell says a value was left out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.base_model import BASE, is_base
from harness.metric_names import reward_mean_name
from harness.records import EXECUTION_FIELDS, RecordError, config_identity, find_records, load_record
from harness.report.pooling import Numerics, apart, describe, disagreement, read_numerics, split_labels
from harness.resolved import resolved_config

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
    bad_evals: dict[str, str] = field(default_factory=dict)   # column -> "NaN" / "inf" / "-inf", left out
    bad_finals: dict[str, str] = field(default_factory=dict)  # family -> "NaN", left out
    notes: list[str] = field(default_factory=list)           # each value left out, and why
    numerics: Numerics | None = None  # what decides its numbers beyond its configuration (harness.report.pooling)

    @property
    def is_base(self) -> bool:
        return is_base(self.config)

    @property
    def values(self) -> dict[str, float]:
        """Every number the run gives: its benchmark numbers and final training rewards (``train/<family>``)."""
        return {**self.evals, **{f"train/{fam}": v for fam, v in self.finals.items()}}


@dataclass
class Group:
    """One row: the runs (one per seed) of one configuration."""

    task: str
    algo: str
    model: str
    settings: dict[str, Any]   # the flattened config less seed, output and execution fields
    runs: list[Run] = field(default_factory=list)
    label: str = ""
    pool_key: tuple | None = None  # its records' numerics key; None: pooled across versions on purpose

    @property
    def seeds(self) -> list[int]:
        return sorted(r.seed for r in self.runs)

    @property
    def numerics(self) -> list[Numerics]:
        return [r.numerics for r in sorted(self.runs, key=lambda r: r.seed) if r.numerics is not None]

    @property
    def numerics_text(self) -> str:
        """Its records' numerics in full (fingerprints, commits, device, versions)."""
        return describe(self.numerics) if self.numerics else "not recorded"

    @property
    def is_base(self) -> bool:
        return bool(self.runs) and self.runs[0].is_base


def family_rule(task: str) -> Callable[[str], str]:
    """Task ``task``'s ``report_group`` (no task is built); each name its own family where the
    task is not installed here."""
    from mrbench_core.registry import RegistryError
    from tasks.registry import TASKS

    try:
        return TASKS.get(task).report_group
    except (LookupError, RegistryError, ImportError, AttributeError):
        return lambda name: name


def _number(value: Any) -> float | None:
    """A float for any number (NaN and infinities included); None for anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def nonfinite_name(value: float) -> str:
    return "NaN" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def eval_numbers(eval_json: dict[str, Any] | None, notes: list[str] | None = None,
                 nonfinite: dict[str, str] | None = None) -> dict[str, float]:
    """Finite headline numbers; a non-finite one goes to ``nonfinite`` and ``notes`` instead."""
    out: dict[str, float] = {}
    for bench, res in ((eval_json or {}).get("benchmarks") or {}).items():
        if isinstance(res, dict) and "error" in res and "summary" not in res:
            if notes is not None:
                notes.append(f"eval.json {bench} was not evaluated ({res['error']}): no column")
            continue
        for key, value in ((res or {}).get("summary") or {}).items():
            if "count" in key or key.startswith("n_"):
                continue
            number = _number(value)
            column = f"{bench}/{key}"
            if number is None and value is None:  # a strict writer's null for an undefined number
                number = math.nan
            if number is None:
                continue
            if math.isfinite(number):
                out[column] = number
            else:
                what = "null" if value is None else nonfinite_name(number)
                if nonfinite is not None:
                    nonfinite[column] = what
                if notes is not None:
                    notes.append(f"eval.json {column} is {what}: left out of its column")
    return out


def reward_curves(metrics: list[dict[str, Any]], notes: list[str] | None = None,
                  family_of: Callable[[str], str] = lambda name: name) -> dict[str, dict[int, float]]:
    curves: dict[str, dict[int, float]] = defaultdict(dict)
    for row in metrics:
        step = int(row["step"])
        by_family: dict[str, list[float]] = defaultdict(list)
        for key, value in row.items():
            name = "reward_mean" if key == "reward_mean" else reward_mean_name(key)  # not diagnostics
            if name is None:
                continue
            number = math.nan if value is None else _number(value)
            if number is None:
                continue
            if not math.isfinite(number):
                if notes is not None:
                    what = "null" if value is None else nonfinite_name(number)
                    notes.append(f"metrics.jsonl step {step} {key} is {what}: left out of the curve and the final "
                                 f"value")
                continue
            if key == "reward_mean":
                curves[ALL][step] = number
            else:
                by_family[family_of(name)].append(number)
        for fam, values in by_family.items():
            curves[fam][step] = sum(values) / len(values)
    return dict(curves)


def dropped_families(metrics: list[dict[str, Any]], family_of: Callable[[str], str] = lambda name: name) -> set[str]:
    """Families with a non-finite value somewhere in ``metrics``."""
    out = set()
    for row in metrics:
        for key, value in row.items():
            number = math.nan if value is None else _number(value)
            if number is not None and not math.isfinite(number):
                if key == "reward_mean":
                    out.add(ALL)
                elif reward_mean_name(key) is not None:
                    out.add(family_of(reward_mean_name(key)))
    return out


def final_value(curve: dict[int, float], last_step: int) -> float | None:
    """Mean over the last :data:`FINAL_SHARE` of ``last_step`` steps; else the curve's last value (a family
    the last steps' prompts did not ask for); None for an empty curve."""
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
    """What a row compares: the config with every field it lacks at its default (a record written
    before a field existed took that field's default: ``schedule.no_signal_steps`` missing and
    ``2`` are one row, as a resume compares them, :func:`harness.records.config_identity`) and its
    algorithm's parameters resolved (an explicit default and an omitted one are one row), less the
    seed, the output place and execution fields."""
    skip = {".".join(p) for p in EXECUTION_FIELDS} | {"seed"}
    return {k: v for k, v in flatten(resolved_config(config_identity(config))).items()
            if k not in skip and not k.startswith("output.")}


def read_run(path: Path, rec: dict[str, Any]) -> Run:
    metrics = rec["metrics"]
    last = int(metrics[-1]["step"]) if metrics else 0
    notes: list[str] = []
    bad_finals: dict[str, str] = {}
    bad_evals: dict[str, str] = {}
    family_of = family_rule(str(rec["config"].get("task", {}).get("name", "")))
    curves = reward_curves(metrics, notes, family_of)
    finals = {fam: v for fam, c in curves.items() if (v := final_value(c, last)) is not None}
    for fam in dropped_families(metrics, family_of) - set(finals):  # every value of the family was non-finite
        bad_finals[fam] = "NaN"
    evals = eval_numbers(rec.get("eval"), notes, bad_evals)
    seed = rec["config"].get("seed")
    return Run(path=str(path), seed=int(seed) if seed is not None else 0, config=rec["config"], evals=evals,
               finals=finals, curves=curves, steps=last, bad_evals=bad_evals, bad_finals=bad_finals,
               notes=[f"{path}: {n}" for n in notes], numerics=read_numerics(path, rec["provenance"]))


def collect(root: str | Path) -> tuple[list[Run], list[str]]:
    """Finished runs under ``root``, and a line for each record left out (unfinished or unreadable)
    and for each value left out of a record (not a finite number)."""
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
            run = read_run(path, rec)
            runs.append(run)
            problems += run.notes
        except (RecordError, KeyError, ValueError, TypeError) as exc:
            problems.append(f"{path}: {exc}")
    return runs, problems


def short_names(keys: list[str]) -> dict[str, str]:
    """Each dotted key by its shortest trailing part that no other of ``keys`` ends with
    (``schedule.eval_limit`` -> ``eval_limit``; ``a.x`` and ``b.x`` stay whole)."""
    out = {}
    for key in keys:
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            tail = ".".join(parts[-n:])
            if not any(other != key and (other == tail or other.endswith("." + tail)) for other in keys):
                break
        out[key] = tail
    return out


def _left_out(run: Run, kept: Run, pooled: bool) -> str:
    """Why a second record of a seed is left out, whether it agrees with the one kept, and (pooled
    across versions) what sets their numerics apart."""
    same = "configuration" if pooled else "configuration and numerics"
    text = f"{run.path}: left out: a second record of seed {run.seed} of the same {same} (kept: {kept.path}); "
    text += disagreement(run.values, kept.values)
    if pooled and run.numerics is not None and kept.numerics is not None and run.numerics.key != kept.numerics.key:
        text += f"; their numerics differ (this one against the one kept: {apart(run.numerics, kept.numerics)})"
    return text


def _label(groups: list[Group]) -> None:
    """Each row's label: its algorithm, then the settings that set it apart from the rows of its task,
    algorithm and model, then, for rows of one configuration kept apart by their numerics, what
    differs (commit, device, versions) and the fingerprint."""
    keys = sorted({k for g in groups for k in g.settings})
    differing = [k for k in keys if len({repr(g.settings.get(k)) for g in groups}) > 1]
    names = short_names(differing)
    parts = {id(g): [", ".join(f"{names[k]}={g.settings.get(k, 'unset')}" for k in differing)] for g in groups}
    same: dict[str, list[Group]] = defaultdict(list)
    for g in groups:
        same[repr(sorted(g.settings.items()))].append(g)
    for split in same.values():
        if len(split) > 1:
            for g, text in zip(split, split_labels([g.numerics for g in split])):
                parts[id(g)].append(text)
    for g in groups:
        extra = "; ".join(p for p in parts[id(g)] if p)
        g.label = f"{g.algo} ({extra})" if extra else g.algo


def group_runs(runs: list[Run], pool_across_versions: bool = False) -> tuple[dict[str, list[Group]], list[str]]:
    """task -> rows (groups of seeds), ordered by model then algorithm then label; and a line for
    each run left out (a second record of a seed already in its row, and whether the two agree).

    A row is one configuration (:func:`settings_of`) and one numerics key
    (:mod:`harness.report.pooling`): records of one configuration whose numerics may differ are
    separate rows, labelled by what differs. ``pool_across_versions``: one row per configuration,
    whatever its records' numerics (``Group.pool_key`` None)."""
    groups: dict[str, Group] = {}
    problems: list[str] = []
    for run in runs:
        settings = settings_of(run.config)
        pool_key = None if pool_across_versions or run.numerics is None else run.numerics.key
        key = repr((sorted(settings.items(), key=lambda kv: kv[0]), pool_key))
        if key not in groups:
            cfg = run.config
            algo = BASE if run.is_base else cfg["algo"]["name"]
            groups[key] = Group(cfg["task"]["name"], algo, cfg["model"]["name"], settings, pool_key=pool_key)
        group = groups[key]
        if run.seed in group.seeds:
            kept = next(r for r in group.runs if r.seed == run.seed)
            problems.append(_left_out(run, kept, pool_across_versions))
            continue
        group.runs.append(run)
    siblings: dict[tuple[str, str, str], list[Group]] = defaultdict(list)
    for g in groups.values():
        siblings[(g.task, g.algo, g.model)].append(g)
    for same in siblings.values():
        _label(same)
    by_task: dict[str, list[Group]] = defaultdict(list)
    for g in sorted(groups.values(), key=lambda g: (g.task, g.model, not g.is_base, g.algo, g.label)):
        by_task[g.task].append(g)
    return dict(by_task), problems
