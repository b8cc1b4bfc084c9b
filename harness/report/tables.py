"""The content of a report, per task, independent of how it is written out.

Two tables per task: the end-of-run benchmarks (one column per benchmark number) and the final
training rewards (one column per reward family). Each row is an algorithm (and model, and the
settings that set it apart from its siblings); each cell holds the summary over seeds, whether it
is the column's best mean (higher is better for every number here), and the seed-paired comparison
with the baseline row of the same model. Then the steps-to-threshold table: per row and reward
family, the first step at which the row's median curve reaches the target (the baseline's final
value, or a fixed ``--threshold``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from harness.report.collect import ALL, Group, final_value
from harness.report.stats import Comparison, Summary, compare, summarize


@dataclass
class StatCell:
    summary: Summary
    best: bool = False
    vs: Comparison | None = None  # None on the baseline row, or without a baseline


@dataclass
class Row:
    label: str
    algo: str
    model: str
    seeds: list[int]
    cells: dict[str, StatCell]
    is_baseline: bool = False
    baseline_label: str | None = None  # the row this one is compared with


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[Row]


@dataclass
class Curve:
    steps: list[int]
    median: list[float]
    q25: list[float]
    q75: list[float]


@dataclass
class ThresholdRow:
    row: Row
    steps: dict[str, int | None]       # family -> first step at or above the target (None: not reached)
    targets: dict[str, float | None]   # family -> the target (None: no baseline curve and no --threshold)
    total_steps: int


@dataclass
class Thresholds:
    families: list[str]
    source: str
    rows: list[ThresholdRow]


@dataclass
class TaskReport:
    task: str
    baseline: str
    tables: list[Table]
    thresholds: Thresholds
    curves: dict[str, dict[str, Curve]] = field(default_factory=dict)  # family -> row label -> curve
    figures: dict[str, str] = field(default_factory=dict)              # format -> file name


def median_curve(group: Group, family: str) -> Curve | None:
    steps = sorted({s for run in group.runs for s in run.curves.get(family, {})})
    if not steps:
        return None
    med, q25, q75 = [], [], []
    for step in steps:
        values = [run.curves[family][step] for run in group.runs if step in run.curves.get(family, {})]
        lo, mid, hi = np.percentile(values, [25, 50, 75])
        med.append(float(mid))
        q25.append(float(lo))
        q75.append(float(hi))
    return Curve(steps, med, q25, q75)


def baseline_of(group: Group, groups: list[Group], baseline: str) -> Group | None:
    """The baseline row for ``group``: the baseline algorithm on the same model, most seeds first."""
    candidates = [g for g in groups if g.algo == baseline and g.model == group.model]
    return max(candidates, key=lambda g: len(g.runs)) if candidates else None


def _table(title: str, groups: list[Group], values_of, baseline: str, min_seeds: int) -> Table:
    columns = sorted({c for g in groups for run in g.runs for c in values_of(run)})
    rows = []
    for g in groups:
        base = baseline_of(g, groups, baseline)
        cells = {}
        for col in columns:
            per_seed = {run.seed: values_of(run)[col] for run in g.runs if col in values_of(run)}
            if not per_seed:
                continue
            vs = None
            if base is not None and base is not g:
                ref = {run.seed: values_of(run)[col] for run in base.runs if col in values_of(run)}
                vs = compare(per_seed, ref, min_seeds)
            cells[col] = StatCell(summarize(list(per_seed.values())), vs=vs)
        rows.append(Row(g.label, g.algo, g.model, g.seeds, cells, is_baseline=base is g,
                        baseline_label=base.label if base is not None else None))
    if len(rows) > 1:
        for col in columns:
            means = [r.cells[col].summary.mean for r in rows if col in r.cells]
            top = max(means, default=math.nan)
            for r in rows:
                if col in r.cells and r.cells[col].summary.mean >= top - 1e-9 * max(1.0, abs(top)):  # ties
                    r.cells[col].best = True
    return Table(title, columns, rows)


def _first_reaching(curve: Curve | None, target: float | None) -> int | None:
    if curve is None or target is None:
        return None
    return next((s for s, v in zip(curve.steps, curve.median) if v >= target - 1e-12), None)


def _thresholds(groups: list[Group], rows: list[Row], curves: dict[str, dict[str, Curve]], baseline: str,
                threshold: float | None) -> Thresholds:
    families = list(curves)
    if threshold is not None:
        source = f"the fixed threshold {threshold:g}"
    else:
        source = f"the final value of {baseline}'s median curve on the same model"
    out = []
    for g, row in zip(groups, rows):
        base = baseline_of(g, groups, baseline)
        targets: dict[str, float | None] = {}
        for fam in families:
            ref = curves[fam].get(base.label) if base is not None else None
            if threshold is not None:
                targets[fam] = threshold
            elif ref is not None:
                targets[fam] = final_value(dict(zip(ref.steps, ref.median)), ref.steps[-1])
            else:
                targets[fam] = None
        steps = {fam: _first_reaching(curves[fam].get(g.label), targets[fam]) for fam in families}
        out.append(ThresholdRow(row, steps, targets, max((run.steps for run in g.runs), default=0)))
    return Thresholds(families, source, out)


def task_report(task: str, groups: list[Group], baseline: str = "gdpo", threshold: float | None = None,
                min_seeds: int = 3) -> TaskReport:
    evals = _table("End-of-run benchmarks", groups, lambda run: run.evals, baseline, min_seeds)
    finals = _table("Final training rewards (mean of the last tenth of the steps)", groups,
                    lambda run: run.finals, baseline, min_seeds)
    families = sorted({f for g in groups for run in g.runs for f in run.curves}, key=lambda f: (f != ALL, f))
    curves: dict[str, dict[str, Curve]] = {}
    for fam in families:
        per_row = {g.label: c for g in groups if (c := median_curve(g, fam)) is not None}
        if per_row:
            curves[fam] = per_row
    tables = [t for t in (evals, finals) if t.columns]
    return TaskReport(task, baseline, tables, _thresholds(groups, finals.rows, curves, baseline, threshold), curves)
