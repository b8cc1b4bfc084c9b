"""The content of a report, per task, independent of how it is written out.

Two tables per task: the end-of-run benchmarks (one column per benchmark number) and the final
training rewards (one column per reward family). Each row is an algorithm (and model, and the
settings that set it apart from its siblings); each cell holds the summary over seeds, whether it
is the column's best mean (higher is better for every number here), the seed-paired comparison
with the baseline row of the same model and, in the benchmarks table, the gain over the base
model's row (the untrained model evaluated the same way, :mod:`harness.base_model`). A row is
compared only with the baseline and base rows of its own numerics (``Group.pool_key``: the
same fingerprint, or for records without one the same commit and versions; any, when pooled
across versions). One Holm family (:func:`harness.report.stats.decide`, :class:`Family`) is every
row's comparison with the baseline in every column of one table: the comparisons that table draws
verdicts from; the gains over the base model in one table are another.
Then the steps-to-threshold table: per row and reward family, the first step at which the row's
median curve reaches the target (the baseline's final value, or a fixed ``--threshold``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.base_model import matches
from harness.report.collect import ALL, Group, final_value
from harness.report.pooling import mixes
from harness.report.stats import Comparison, Summary, aggregate_iqm, column_scale_point, compare, decide, summarize


@dataclass
class StatCell:
    summary: Summary
    best: bool = False
    vs: Comparison | None = None       # None on the baseline row, or without a baseline
    vs_base: Comparison | None = None  # gain over the base model's row (benchmarks table)
    left_out: list[str] = field(default_factory=list)  # "seed 1: NaN": values not in the summary


@dataclass
class Row:
    label: str
    algo: str
    model: str
    seeds: list[int]
    cells: dict[str, StatCell]
    is_baseline: bool = False
    baseline_label: str | None = None  # the row this one is compared with
    is_base: bool = False              # the untrained model's row
    base_label: str | None = None      # the base row this one's gains are over
    iqm: tuple[float, float, float] | None = None  # IQM over seeds x columns [stratified bootstrap]
    numerics: str = ""                 # its records' numerics (fingerprints, commits, device, versions)


@dataclass(frozen=True)
class Family:
    """The comparisons one Holm correction runs over: every comparison of one kind in one table that
    has a test (enough paired seeds)."""

    what: str      # "comparisons with gdpo" / "gains over the base model"
    size: int
    rows: int      # the rows and columns those comparisons come from
    columns: int

    def text(self, table: str) -> str:
        """``the 4 comparisons with gdpo in the end-of-run benchmarks (2 rows × 2 columns)``."""
        rows = f"{self.rows} row" + ("s" if self.rows != 1 else "")
        columns = f"{self.columns} column" + ("s" if self.columns != 1 else "")
        what = f"the {self.size} {self.what}" if self.size != 1 else "the one " + self.what.replace(
            "comparisons", "comparison").replace("gains", "gain")
        return f"{what} in the {table} ({rows} × {columns})"


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[Row]
    effects: dict[str, float] = field(default_factory=dict)  # column -> the effect seeds-needed is for
    families: dict[str, Family] = field(default_factory=dict)  # "vs" / "vs_base" -> its Holm family
    short: str = ""  # the table's name in a sentence ("end-of-run benchmarks")

    @property
    def has_base(self) -> bool:
        return any(r.base_label is not None for r in self.rows)


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
    design: Any = None  # an adaptive sweep's (harness.report.sequential.Design): its intervals are confidence sequences
    min_seeds: int = 3  # fewer paired seeds: too few to tell
    pooled: list[Group] = field(default_factory=list)  # pooled across versions, where the rows mix numerics: all
    split: list[list[Group]] = field(default_factory=list)  # rows of one configuration kept apart by numerics
    pool_across_versions: bool = False  # rows are configurations, whatever their records' numerics


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
    """The baseline row for ``group``: the baseline algorithm on the same model and numerics, most seeds first."""
    candidates = [g for g in groups if g.algo == baseline and g.model == group.model and not g.is_base
                  and g.pool_key == group.pool_key]
    return max(candidates, key=lambda g: len(g.runs)) if candidates else None


def base_of(group: Group, groups: list[Group]) -> Group | None:
    """The base row whose evaluation is this row's: same task, model, benchmarks and their settings, and numerics."""
    if group.is_base or not group.runs:
        return None
    return next((g for g in groups if g.is_base and g.pool_key == group.pool_key
                 and matches(g.runs[0].config, group.runs[0].config)), None)


def _aggregate(row_values: dict[str, dict[int, float]], columns: list[str]) -> tuple[float, float, float] | None:
    """IQM over the row's seeds x columns (``all`` left out: it repeats the families), on the seeds
    every column has."""
    cols = [c for c in columns if c != ALL and c in row_values]
    if not cols:
        return None
    seeds = sorted(set.intersection(*(set(row_values[c]) for c in cols)))
    if not seeds:
        return None
    return aggregate_iqm(np.asarray([[row_values[c][s] for c in cols] for s in seeds], dtype=float))


def _table(title: str, short: str, groups: list[Group], values_of, bad_of, baseline: str, min_seeds: int,
           effect: float | None, with_base: bool, design=None) -> Table:
    """``values_of(run)``: column -> finite value; ``bad_of(run)``: column -> the non-finite value left out."""
    columns = sorted({c for g in groups for run in g.runs for c in (*values_of(run), *bad_of(run))})
    effects = {c: effect if effect is not None else
               column_scale_point([v for g in groups for run in g.runs for k, v in values_of(run).items() if k == c])
               for c in columns}
    built = []
    for g in groups:
        base = None if g.is_base else baseline_of(g, groups, baseline)  # the base row is compared with nothing
        base_row = base_of(g, groups) if with_base else None
        cells: dict[str, StatCell] = {}
        per_column: dict[str, dict[int, float]] = {}
        for col in columns:
            per_seed = {run.seed: values_of(run)[col] for run in g.runs if col in values_of(run)}
            left_out = [f"seed {run.seed}: {bad_of(run)[col]}" for run in g.runs if col in bad_of(run)]
            if not per_seed and not left_out:
                continue
            per_column[col] = per_seed
            vs = vs_base = None
            if per_seed and base is not None and base is not g:
                ref = {run.seed: values_of(run)[col] for run in base.runs if col in values_of(run)}
                vs = compare(per_seed, ref, effects[col], min_seeds, design)
            if per_seed and base_row is not None:
                ref_values = [values_of(run)[col] for run in base_row.runs if col in values_of(run)]
                if ref_values:
                    vs_base = compare(per_seed, float(np.mean(ref_values)), effects[col], min_seeds, design)
            cells[col] = StatCell(summarize(list(per_seed.values())), vs=vs, vs_base=vs_base, left_out=left_out)
        built.append((g, base, base_row, cells, per_column))
    families = {}
    for attr, what in (("vs", f"comparisons with {baseline}"), ("vs_base", "gains over the base model")):
        family = {(i, c): getattr(cell, attr) for i, (*_, cells, _) in enumerate(built)
                  for c, cell in cells.items() if getattr(cell, attr) is not None}
        decided = decide(family, min_seeds, f"{what} in this table")
        for (i, c), comp in decided.items():
            setattr(built[i][3][c], attr, comp)
        tested = [key for key, comp in decided.items() if math.isfinite(comp.p_holm)]
        if tested:
            families[attr] = Family(what, len(tested), len({i for i, _ in tested}), len({c for _, c in tested}))
    rows = [Row(g.label, g.algo, g.model, g.seeds, cells, is_baseline=base is g,
                baseline_label=base.label if base is not None else None, is_base=g.is_base,
                base_label=base_row.label if base_row is not None else None, iqm=_aggregate(per_column, columns),
                numerics=g.numerics_text)
            for g, base, base_row, cells, per_column in built]
    if len(rows) > 1:
        for col in columns:
            means = [r.cells[col].summary.mean for r in rows if col in r.cells and r.cells[col].summary.n]
            top = max(means, default=math.nan)
            for r in rows:
                if col in r.cells and r.cells[col].summary.n and \
                        r.cells[col].summary.mean >= top - 1e-9 * max(1.0, abs(top)):  # ties
                    r.cells[col].best = True
    return Table(title, columns, rows, effects, families, short)


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
                min_seeds: int = 3, effect: float | None = None, design=None,
                pool_across_versions: bool = False) -> TaskReport:
    evals = _table("End-of-run benchmarks", "end-of-run benchmarks", groups, lambda run: run.evals,
                   lambda run: run.bad_evals, baseline, min_seeds, effect, True, design)
    pooled = groups if pool_across_versions and mixes([n for g in groups for n in g.numerics]) else []
    same: dict[tuple, list[Group]] = {}
    for g in groups:
        same.setdefault((g.algo, g.model, repr(sorted(g.settings.items()))), []).append(g)
    split = [gs for gs in same.values() if len(gs) > 1]
    groups = [g for g in groups if not g.is_base]  # the base model has no training rewards
    finals = _table("Final training rewards (mean of the last tenth of the steps)", "final training rewards", groups,
                    lambda run: run.finals, lambda run: run.bad_finals, baseline, min_seeds, effect, False, design)
    families = sorted({f for g in groups for run in g.runs for f in run.curves}, key=lambda f: (f != ALL, f))
    curves: dict[str, dict[str, Curve]] = {}
    for fam in families:
        per_row = {g.label: c for g in groups if (c := median_curve(g, fam)) is not None}
        if per_row:
            curves[fam] = per_row
    tables = [t for t in (evals, finals) if t.columns]
    return TaskReport(task, baseline, tables, _thresholds(groups, finals.rows, curves, baseline, threshold), curves,
                      design=design, min_seeds=min_seeds, pooled=pooled, split=split,
                      pool_across_versions=pool_across_versions)
