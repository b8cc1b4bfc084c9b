"""The verdict a report opens with, generated from its own tables (never written by hand).

Per task: a lead sentence (the gain over the base model, whether anything differs from the
baseline) and the points under it.

:func:`verdict_facts` sorts every comparison of a task's tables: what differs (a verdict word
from the exact test, Holm-corrected), what the intervals rule out (the end-of-run benchmarks'
differences from the baseline), the gains over the base model, and what is too noisy to resolve
the chosen effect with the seeds there are (with the smallest effect those seeds detect). :func:`verdict_paragraphs`
writes them as one paragraph per task; the Markdown and the HTML page both print those.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from harness.report.numbers import rules_out_text
from harness.report.stats import Comparison
from harness.report.tables import Table, TaskReport


@dataclass
class Facts:
    task: str
    baseline: str
    differs: list[str] = field(default_factory=list)     # "mrtpo − gdpo on X: higher, +0.05 [+0.03, +0.07]"
    ruled_out: list[str] = field(default_factory=list)   # "mrtpo − gdpo on X rules out gains above ..."
    gains: dict[str, list[tuple[str, Comparison]]] = field(default_factory=dict)  # column -> [(row, gain)]
    noisy: list[str] = field(default_factory=list)       # "mrtpo − gdpo on X (smallest effect detectable ...)"
    resolution: list[str] = field(default_factory=list)  # "mrtpo − gdpo on X (4 seeds): beyond ±0.027"
    intervals: str = "95% paired t intervals over a fixed number of seeds"  # or the adaptive sweep's method
    test: str = "exact sign-flip test"                   # what the verdicts come from, before Holm
    compared: int = 0                                    # comparisons with the baseline that had a test
    undecidable: list[tuple[int, float]] = field(default_factory=list)  # (seeds, smallest exact p) of those


def _num(x: float) -> str:
    return f"{x:+.3f}"


def _interval(c: Comparison) -> str:
    if math.isfinite(c.lo) and math.isfinite(c.hi):
        return f"{_num(c.diff)} [{_num(c.lo)}, {_num(c.hi)}]"
    return _num(c.diff)


def _rules_out(c: Comparison) -> str:
    return rules_out_text(c)


def _resolved(c: Comparison) -> bool:
    """Whether the interval is inside ±2 effects: it settles differences of the effect's size."""
    return math.isfinite(c.lo) and math.isfinite(c.hi) and max(abs(c.lo), abs(c.hi)) <= 2 * c.effect


def _sort(facts: Facts, table: Table, headline: bool) -> None:
    for row in table.rows:
        for col in table.columns:
            cell = row.cells.get(col)
            if cell is None:
                continue
            c = cell.vs
            if c is not None and c.n > 0 and row.baseline_label:
                what = f"{row.label} − {row.baseline_label} on {col}"
                if math.isfinite(c.p_holm):
                    facts.compared += 1
                    if c.word is None and c.p_min > 0.05 / max(1, c.family):
                        facts.undecidable.append((c.n, c.p_min))
                if c.word:
                    facts.differs.append(f"{what}: {c.word}, {_interval(c)}")
                elif headline and _rules_out(c):
                    facts.ruled_out.append(f"{what}, {_interval(c)}, {_rules_out(c)}")
                if headline and math.isfinite(c.lo) and math.isfinite(c.hi):
                    facts.resolution.append(f"{what} ({c.n} seeds): ±{max(abs(c.lo), abs(c.hi)):.3f}")
                if c.word is None and not _resolved(c) and c.seeds_needed is not None and c.seeds_needed > c.n:
                    detectable = f"±{c.detectable:.3f}" if c.detectable is not None else "not estimated"
                    facts.noisy.append(f"{what} (about {c.seeds_needed} seeds expected to resolve ±{c.effect:g})"
                                       if c.method == "cs" else
                                       f"{what} (smallest effect detectable with {c.n} seeds: {detectable})")
            g = cell.vs_base
            if g is not None and g.n > 0:
                facts.gains.setdefault(col, []).append((row.label, g))


def verdict_facts(report: TaskReport) -> Facts:
    facts = Facts(report.task, report.baseline)
    if report.design is not None:
        facts.intervals = report.design.statement
        facts.test = "anytime-valid p-values of the confidence sequences"
    for i, table in enumerate(report.tables):
        _sort(facts, table, headline=i == 0 and "benchmark" in table.title.lower())
    return facts


def _list(items: list[str], most: int = 6) -> str:
    shown = "; ".join(items[:most])
    return shown + (f"; and {len(items) - most} more" if len(items) > most else "")


def lead(f: Facts) -> str:
    """One sentence: the gain over the base model on the first benchmark number, and whether any
    difference from the baseline reaches a verdict (or why none can)."""
    parts = []
    if f.gains:
        col, items = next(iter(f.gains.items()))
        lo, hi = min(g.diff for _, g in items), max(g.diff for _, g in items)
        span = f"{lo:+.3f}" if lo == hi else f"{lo:+.3f} to {hi:+.3f}"
        parts.append(f"training gains {span} over the untrained base model on {col}")
    if f.differs:
        parts.append(f"{len(f.differs)} of {f.compared} differences from {f.baseline} reach a verdict")
    elif f.compared:
        why = ""
        if f.undecidable and len(f.undecidable) == f.compared:
            n, p = min(f.undecidable)
            why = f"; with {n} seeds the exact test cannot go below p = {p:.3g}"
        parts.append(f"no difference from {f.baseline} reaches a verdict ({f.compared} compared{why})")
    if not parts:
        return f"{f.task}: no comparison to draw (one row, or no {f.baseline} row and no base row)."
    return f"{f.task}: " + "; ".join(parts) + "."


def points(f: Facts) -> list[str]:
    """What differs, the gains over base, what is ruled out, what is too noisy: one line each."""
    out = []
    if f.differs:
        out.append(f"Differs from {f.baseline} ({f.test}, Holm-corrected): {_list(f.differs)}.")
    if f.gains:
        per_column = [f"on {col}, " + ", ".join(f"{label} {_interval(g)}" + (f" ({g.word})" if g.word else "")
                                                for label, g in items) for col, items in f.gains.items()]
        out.append(f"Gain over the base model (95% intervals over seeds): {'; '.join(per_column)}.")
    if f.ruled_out:
        out.append(f"Ruled out (95% intervals, end-of-run benchmarks): {_list(f.ruled_out)}.")
    if f.resolution:
        out.append(f"Smallest effect ruled out in both directions ({f.intervals}): {_list(f.resolution)}.")
    if f.noisy:
        out.append(f"Too noisy to resolve at these seeds: {_list(f.noisy, 4)}.")
    return out


def paragraph(f: Facts) -> str:
    return " ".join([lead(f), *points(f)])


def verdict_paragraphs(reports: list[TaskReport]) -> list[str]:
    """One paragraph per task (the JSON's ``verdict``)."""
    return [paragraph(verdict_facts(rep)) for rep in reports]


def verdict_parts(reports: list[TaskReport]) -> list[tuple[str, list[str]]]:
    """Per task: the lead sentence and the points under it (the page and the Markdown)."""
    return [(lead(f), points(f)) for f in map(verdict_facts, reports)]
