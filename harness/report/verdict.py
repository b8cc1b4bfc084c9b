"""The verdict a report opens with, generated from its own tables (never written by hand).

Per task: a lead sentence and the points under it. The lead says first what the seeds can and
cannot support where they limit every comparison ("too few seeds to tell"), then the change over
the base model (a gain only where every row gains) and whether anything differs from the baseline.

:func:`verdict_facts` sorts every comparison of a task's tables: what the seeds are too few to
tell, which rows are pooled across versions or kept apart by their numerics, what differs (a
verdict word from the exact test or, in an adaptive sweep's report, the confidence sequences'
anytime-valid p-values, Holm-corrected over the family the verdict names: every comparison with
the baseline in one table), what the intervals rule out (the end-of-run benchmarks' differences
from the baseline), the gains over the base model, and what is too noisy to resolve the chosen
effect with the seeds there are (with the smallest effect those seeds detect).
:func:`verdict_paragraphs` writes them as one paragraph per task; the Markdown and the HTML page
both print those.
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
    interval_kind: str = "95% t intervals"               # the intervals' short name
    compared: int = 0                                    # comparisons with the baseline that had a test
    undecidable: list[tuple[int, float]] = field(default_factory=list)  # (seeds, smallest exact p) of those
    gains_tested: int = 0                                # gains over the base model that had a test
    gains_undecidable: list[tuple[int, float]] = field(default_factory=list)
    too_few: list[str] = field(default_factory=list)     # "mrtpo − gdpo on X: +0.167 (1 paired seed)"
    most_pairs: int = 0                                  # the most paired seeds any comparison has
    min_seeds: int = 3
    families: list[str] = field(default_factory=list)       # the Holm families of the differences, named
    gain_families: list[str] = field(default_factory=list)  # and of the gains over the base model
    numerics: list[str] = field(default_factory=list)    # what the rows pool or keep apart by numerics


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


def _seeds(n: int, paired: bool = True) -> str:
    return f"{n} {'paired ' if paired else ''}seed" + ("s" if n != 1 else "")


def _count(facts: Facts, c: Comparison, gain: bool) -> None:
    """Count a comparison into what the seeds support: tested (and whether it could reach a verdict) or too few."""
    facts.most_pairs = max(facts.most_pairs, c.n)
    if not math.isfinite(c.p_holm):
        return
    if gain:
        facts.gains_tested += 1
    else:
        facts.compared += 1
    if c.word is None and c.p_min > 0.05 / max(1, c.family):
        (facts.gains_undecidable if gain else facts.undecidable).append((c.n, c.p_min))


def _sort(facts: Facts, table: Table, headline: bool) -> None:
    for row in table.rows:
        for col in table.columns:
            cell = row.cells.get(col)
            if cell is None:
                continue
            c = cell.vs
            if c is not None and c.n > 0 and row.baseline_label:
                what = f"{row.label} − {row.baseline_label} on {col}"
                _count(facts, c, gain=False)
                if c.n < facts.min_seeds:
                    facts.too_few.append(f"{what}: {_num(c.diff)} ({_seeds(c.n)})")
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
                _count(facts, g, gain=True)
                facts.gains.setdefault(col, []).append((row.label, g))
    if "vs" in table.families:
        facts.families.append(table.families["vs"].text(table.short or table.title))
    if "vs_base" in table.families:
        facts.gain_families.append(table.families["vs_base"].text(table.short or table.title))


def _numerics(report: TaskReport) -> list[str]:
    """What the report's rows pool across numerics on purpose, or keep apart, in words."""
    out = []
    if report.pooled:
        same: dict[str, list[str]] = {}
        for g in report.pooled:
            same.setdefault(g.numerics_text, []).append(g.label)
        rows = "; ".join(f"{' and '.join(labels)}: {text}" for text, labels in same.items())
        out.append(f"Pooled across versions on purpose (--pool-across-versions): the rows, and the comparisons "
                   f"between them, mix records whose numerics may differ, so they are not shown to be one "
                   f"experiment: {rows}")
    if report.split:
        rows = "; ".join(" and ".join(g.label for g in gs) for gs in report.split)
        out.append(f"Kept apart by their numerics (one configuration, records not shown to compute the same "
                   f"numbers; each row is compared only with the {report.baseline} and base rows of its own "
                   f"numerics; --pool-across-versions merges them): {rows}")
    return out


def verdict_facts(report: TaskReport) -> Facts:
    facts = Facts(report.task, report.baseline, min_seeds=report.min_seeds)
    if report.design is not None:
        facts.intervals = report.design.statement
        facts.test = "anytime-valid p-values of the confidence sequences"
        facts.interval_kind = "95% anytime-valid confidence sequences"
    for i, table in enumerate(report.tables):
        _sort(facts, table, headline=i == 0 and "benchmark" in table.title.lower())
    facts.numerics = _numerics(report)
    return facts


def _list(items: list[str], most: int = 6) -> str:
    shown = "; ".join(items[:most])
    return shown + (f"; and {len(items) - most} more" if len(items) > most else "")


def _families(texts: list[str]) -> str:
    return " and ".join(texts) + ("; each table is its own family" if len(texts) > 1 else "")


def support(f: Facts) -> str:
    """What the seeds can and cannot support, where they limit every comparison (else empty)."""
    tested = f.compared + f.gains_tested
    if not tested and f.most_pairs:
        return (f"too few seeds to tell: no comparison rests on more than {_seeds(f.most_pairs, paired=False)}, "
                f"and a verdict needs at least {f.min_seeds} paired seeds; the differences below are observations, "
                f"not results")
    undecidable = f.undecidable + f.gains_undecidable
    if tested and len(undecidable) == tested:
        n, p = min(undecidable)
        return (f"with {_seeds(n, paired=False)} no comparison here can reach a verdict (the exact test cannot "
                f"go below p = {p:.3g})")
    return ""


def change(f: Facts) -> str:
    """The first benchmark number's change from the base model, called a gain only where every row gains."""
    col, items = next(iter(f.gains.items()))
    lo, hi = min(g.diff for _, g in items), max(g.diff for _, g in items)
    span = f"{lo:+.3f}" if lo == hi else f"{lo:+.3f} to {hi:+.3f}"
    if lo > 0:
        return f"training gains {span} over the untrained base model on {col}"
    if hi < 0:
        return f"every trained row is below the untrained base model on {col} ({span})"
    return f"the trained rows differ from the untrained base model on {col} by {span}, gains and losses"


def lead(f: Facts) -> str:
    """One sentence: first what the seeds support where they limit it, then the change over the base
    model on the first benchmark number, and whether any difference from the baseline reaches a verdict."""
    parts = [p for p in (support(f),) if p]
    if f.gains:
        parts.append(change(f))
    if f.differs:
        verb = "reaches" if len(f.differs) == 1 else "reach"
        parts.append(f"{len(f.differs)} of {f.compared} differences from {f.baseline} {verb} a verdict")
    elif f.compared:
        parts.append(f"no difference from {f.baseline} reaches a verdict ({f.compared} compared)")
    if not parts:
        return f"{f.task}: no comparison to draw (one row, or no {f.baseline} row and no base row)."
    return f"{f.task}: " + "; ".join(parts) + "."


def points(f: Facts) -> list[str]:
    """What the seeds cannot tell, what is pooled or kept apart, what differs, the gains over base,
    what is ruled out, what is too noisy: one line each; every verdict names its test and family."""
    out = []
    if f.too_few:
        out.append(f"Too few seeds to tell (fewer than {f.min_seeds} paired seeds: observations, not results): "
                   f"{_list(f.too_few)}.")
    out += [f"{line}." for line in f.numerics]
    if f.differs:
        out.append(f"Differs from {f.baseline} ({f.test}, Holm over {_families(f.families)}): {_list(f.differs)}.")
    elif f.compared:
        out.append(f"No difference from {f.baseline} reaches a verdict ({f.test}, Holm over "
                   f"{_families(f.families)}).")
    if f.gains:
        every = [g.diff for items in f.gains.values() for _, g in items]
        title = "Gain over the base model" if min(every) > 0 else "Change from the base model"
        verdicts = f"; verdicts: {f.test}, Holm over {_families(f.gain_families)}" if f.gain_families else ""
        per_column = [f"on {col}, " + ", ".join(f"{label} {_interval(g)}" + (f" ({g.word})" if g.word else "")
                                                for label, g in items) for col, items in f.gains.items()]
        out.append(f"{title} ({f.interval_kind} over seeds{verdicts}): {'; '.join(per_column)}.")
    if f.ruled_out:
        out.append(f"Ruled out ({f.interval_kind}, end-of-run benchmarks): {_list(f.ruled_out)}.")
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
