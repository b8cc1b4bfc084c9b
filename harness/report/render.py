"""``leaderboard.md`` from the task reports, and the texts every output shares (cells, differences,
what an interval rules out, seeds needed, the method note); ``leaderboard.csv`` and ``.json`` are
:mod:`harness.report.export`. Names from records (tasks, algorithms, models, benchmarks, paths)
are escaped for Markdown and HTML alike."""

from __future__ import annotations

from html import escape

from harness.report.method import diff_cell_note, method_note
from harness.report.notes import md_n_notes
from harness.report.numbers import num, rules_out_text
from harness.report.stats import MIN_SEEDS_FOR_SPREAD, SEEDS_MAX, Comparison, Summary
from harness.report.tables import Row, StatCell, Table, TaskReport
from harness.report.verdict import verdict_parts

CSV_FIELDS = ("task", "table", "row", "algorithm", "model", "seeds", "column", "n", "mean", "std", "ci_low",
              "ci_high", "iqm", "best", "left_out", "baseline", "diff", "diff_ci_low", "diff_ci_high",
              "diff_boot_low", "diff_boot_high", "p_t",
              "p_perm", "p_holm", "prob_improvement", "effect", "seeds_needed", "smallest_detectable", "rules_out",
              "verdict", "base", "gain", "gain_ci_low", "gain_ci_high", "gain_p_perm", "gain_p_holm",
              "gain_prob_improvement", "gain_seeds_needed", "gain_smallest_detectable", "gain_rules_out", "gain_verdict", "target", "first_step", "steps")


def stat_text(cell: StatCell | Summary, seeds: int) -> str:
    """``mean ± std [interval]`` (one seed: the value), with ``n=`` when the cell has fewer values than the
    row has seeds, and the values left out (not finite) named by seed."""
    if isinstance(cell, Summary):
        cell = StatCell(cell)
    s = cell.summary
    if s.n == 0:
        return "left out: " + ", ".join(cell.left_out)
    text = num(s.mean) if s.n == 1 else f"{num(s.mean)} ± {num(s.std)} [{num(s.lo)}, {num(s.hi)}]"
    notes = [f"n={s.n}"] if s.n != seeds else []
    if cell.left_out:
        notes.append("left out: " + ", ".join(cell.left_out))
    return text + (f" ({'; '.join(notes)})" if notes else "")


def seeds_text(c: Comparison) -> str:
    if c.n < MIN_SEEDS_FOR_SPREAD:
        return f"fewer than {MIN_SEEDS_FOR_SPREAD} seeds: no estimate of the seeds needed"
    if c.seeds_needed is None:
        return ""
    if c.seeds_needed > SEEDS_MAX:
        return f"over {SEEDS_MAX} seeds for ±{c.effect:g}"
    return f"about {c.seeds_needed} seeds for ±{c.effect:g}"


def detectable_text(c: Comparison) -> str:
    """The smallest effect these seeds detect (paired t, 80% power), in words."""
    if c.n < MIN_SEEDS_FOR_SPREAD:
        return f"fewer than {MIN_SEEDS_FOR_SPREAD} seeds: no estimate of the smallest detectable effect"
    if c.detectable is None:
        return ""
    return f"smallest effect detectable with these {c.n} seeds: ±{num(c.detectable)}"


def compare_text(c: Comparison | None) -> str:
    """A comparison in full: the difference, its interval, what that rules out, the verdict and the
    smallest effect these seeds detect (the footnote and tooltip of a difference cell)."""
    if c is None:
        return "—"
    if c.n == 0:
        return c.verdict
    interval = f" [{num(c.lo, True)}, {num(c.hi, True)}]" if c.n > 1 else ""
    parts = [f"{num(c.diff, True)}{interval}", rules_out_text(c), c.verdict, detectable_text(c)]
    return "; ".join(p for p in parts if p)


#: after a difference that reaches a verdict (the report's test, Holm-corrected over the table's family)
MARK = {"higher": " ▲", "lower": " ▼"}


def compare_cell(c: Comparison | None) -> str:
    """A comparison as one number: the mean difference, marked where it reaches a verdict."""
    if c is None:
        return "—"
    if c.n == 0:
        return "—"
    return num(c.diff, True) + MARK.get(c.word or "", "")


def _comparison_of(cell: StatCell | None, row: Row, attr: str) -> tuple[str, str]:
    """(cell text, full text) of the row's ``vs`` or ``vs_base`` comparison in a column."""
    if cell is None:
        return "", ""
    if attr == "vs":
        if row.is_baseline:
            return "baseline", ""
        if row.is_base:
            return "base model", ""
        if row.baseline_label is None:
            return "—", "no baseline row on this model with the same numerics"
    else:
        if row.is_base:
            return "base model", ""
        if row.base_label is None:
            return "—", "no base row for this evaluation with the same numerics"
    c = getattr(cell, attr)
    return compare_cell(c), compare_text(c)


def vs_cells(cell: StatCell | None, row: Row) -> tuple[str, str]:
    """(the cell's one number, its footnote) for the difference from the baseline."""
    return _comparison_of(cell, row, "vs")


def gain_cells(cell: StatCell | None, row: Row) -> tuple[str, str]:
    """(the cell's one number, its footnote) for the gain over the base model."""
    return _comparison_of(cell, row, "vs_base")


def design_of(reports: list[TaskReport]):
    """The adaptive sweep's design the reports were built with (None: fixed seed counts)."""
    return next((rep.design for rep in reports if rep.design is not None), None)


def pooled_of(reports: list[TaskReport]) -> bool:
    """Whether the reports pool records across versions on purpose (--pool-across-versions)."""
    return any(rep.pool_across_versions for rep in reports)


_MD_SPECIAL = "\\`*_[]|~"  # HTML's < > & become entities first; the rest matters only at a line's start


def md_escape(text: str) -> str:
    """A name as literal Markdown text: HTML made inert (``&lt;script&gt;``), Markdown's punctuation
    backslash-escaped, line breaks as spaces."""
    text = escape(str(text), quote=False).replace("\r", " ").replace("\n", " ")
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in text)


def md_code(text: str) -> str:
    """A path as a code span (literal as it is), or escaped text when it holds a backtick."""
    text = str(text).replace("\n", " ")
    return f"`{text}`" if "`" not in text else md_escape(text)


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _md_comparisons(lines: list[str], title: str, table: Table, cells_of, design=None) -> None:
    """A difference table with one number per cell, then one note per cell with the rest."""
    lines += ["", f"{title}:", "", _md_row(["algorithm", "model", *map(md_escape, table.columns)]),
              "|" + "---|" * (2 + len(table.columns))]
    notes = []
    for row in table.rows:
        shown = []
        for col in table.columns:
            short, full = cells_of(row.cells.get(col), row)
            shown.append(short)
            if full:
                notes.append(f"- {md_escape(row.label)} ({md_escape(row.model)}), {md_escape(col)}: {full}")
        lines.append(_md_row([md_escape(row.label), md_escape(row.model), *shown]))
    if notes:
        lines += ["", diff_cell_note(design), "", *notes]


def markdown(reports: list[TaskReport], root: str, runs: int, problems: list[str], baseline: str,
             min_seeds: int, effect: float | None = None) -> str:
    lines = ["# mrbench report", "", f"{runs} finished runs under {md_code(root)}.", "",
             method_note(baseline, min_seeds, effect, design_of(reports), pooled_of(reports))]
    parts = verdict_parts(reports)
    if parts:
        lines += ["", "## Verdict"]
        for lead, points in parts:
            lines += ["", f"**{md_escape_prose(lead)}**"]
            if points:
                lines += [""] + [f"- {md_escape_prose(p)}" for p in points]
    for rep in reports:
        lines += ["", f"## {md_escape(rep.task)}"]
        for table in rep.tables:
            lines += ["", f"### {table.title}", "",
                      _md_row(["algorithm", "model", "seeds", *map(md_escape, table.columns)]),
                      "|" + "---|" * (3 + len(table.columns))]
            for row in table.rows:
                cells = []
                for col in table.columns:
                    cell = row.cells.get(col)
                    text = stat_text(cell, len(row.seeds)) if cell else ""
                    cells.append(f"**{text}**" if cell and cell.best else text)
                seeds = "—" if row.is_base else str(len(row.seeds))
                lines.append(_md_row([md_escape(row.label), md_escape(row.model), seeds, *cells]))
            _md_comparisons(lines, f"Difference from {md_escape(baseline)}", table, vs_cells, rep.design)
            if table.has_base:
                _md_comparisons(lines, "Gain over the base model", table, gain_cells, rep.design)
        th = rep.thresholds
        if th.families:
            lines += ["", "### Steps to threshold", "",
                      f"First step at which a row's median training curve reaches {md_escape(th.source)}.", "",
                      _md_row(["algorithm", "model", "steps", *map(md_escape, th.families)]),
                      "|" + "---|" * (3 + len(th.families))]
            for tr in th.rows:
                lines.append(_md_row([md_escape(tr.row.label), md_escape(tr.row.model), str(tr.total_steps),
                                      *(threshold_text(tr.steps[f], tr.targets[f]) for f in th.families)]))
        if rep.figures.get("png"):
            lines += ["", f"![learning curves of {md_escape(rep.task)}]({rep.figures['png']})"]
    if problems:
        lines += ["", "## Records and values left out", ""] + [f"- {md_escape(p)}" for p in problems]
    lines[5:5] = md_n_notes(lines)  # after the method note
    return "\n".join(lines) + "\n"


def md_escape_prose(text: str) -> str:
    """Generated prose holding names: HTML made inert and the characters that would start emphasis,
    code or links escaped (numbers, signs and brackets of intervals stay readable)."""
    text = escape(str(text), quote=False)
    return "".join("\\" + ch if ch in "\\`*_[]|" else ch for ch in text)


def threshold_text(step: int | None, target: float | None) -> str:
    if target is None:
        return "no target"
    return f"{step if step is not None else 'not reached'} (≥ {num(target)})"


