"""``leaderboard.md`` from the task reports, and the texts every output shares (cells, differences,
what an interval rules out, seeds needed, the method note); ``leaderboard.csv`` and ``.json`` are
:mod:`harness.report.export`. Names from records (tasks, algorithms, models, benchmarks, paths)
are escaped for Markdown and HTML alike."""

from __future__ import annotations

from html import escape

from harness.report.notes import md_n_notes
from harness.report.numbers import num, rules_out_text
from harness.report.stats import ALPHA, METHOD, MIN_SEEDS_FOR_SPREAD, POWER, SEEDS_MAX, Comparison, Summary
from harness.report.tables import Row, StatCell, Table, TaskReport
from harness.report.verdict import verdict_parts

CSV_FIELDS = ("task", "table", "row", "algorithm", "model", "seeds", "column", "n", "mean", "std", "ci_low",
              "ci_high", "iqm", "best", "left_out", "baseline", "diff", "diff_ci_low", "diff_ci_high",
              "diff_boot_low", "diff_boot_high", "p_t",
              "p_perm", "p_holm", "prob_improvement", "effect", "seeds_needed", "rules_out", "verdict", "base",
              "gain", "gain_ci_low", "gain_ci_high", "gain_p_perm", "gain_p_holm", "gain_prob_improvement",
              "gain_seeds_needed", "gain_rules_out", "gain_verdict", "target", "first_step", "steps")


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


def compare_text(c: Comparison | None) -> str:
    if c is None:
        return "—"
    if c.n == 0:
        return c.verdict
    interval = f" [{num(c.lo, True)}, {num(c.hi, True)}]" if c.n > 1 else ""
    parts = [f"{num(c.diff, True)}{interval}", rules_out_text(c), c.verdict, seeds_text(c)]
    return "; ".join(p for p in parts if p)


def vs_text(cell: StatCell | None, row: Row) -> str:
    if cell is None:
        return ""
    if row.is_baseline:
        return "baseline"
    if row.is_base:
        return "base model"
    return compare_text(cell.vs) if row.baseline_label is not None else "no baseline row on this model"


def gain_text(cell: StatCell | None, row: Row) -> str:
    if cell is None:
        return ""
    if row.is_base:
        return "base model"
    return compare_text(cell.vs_base) if row.base_label is not None else "no base row for this evaluation"


def method_note(baseline: str, min_seeds: int, effect: float | None = None) -> str:
    effect_text = f"±{effect:g}" if effect is not None else "one point of the column's scale (±0.01 for shares)"
    return (f"Cells: {METHOD}; the best mean of each column in bold. Differences: from the {baseline} row on the "
            f"same model, over the seeds both ran (mean difference [95% paired t interval, scipy.stats.ttest_rel]), "
            f"with what that interval rules out (a bootstrap interval of a mean over 3 seeds cannot reach beyond the "
            f"observed differences, so it would claim too much; the JSON and CSV give it too). Verdicts: the exact paired sign-flip permutation test "
            f"(scipy.stats.permutation_test over all 2^n sign patterns; it cannot go below p = 2/2^n, 0.25 with 3 "
            f"seeds), Holm-corrected over the columns of each row and table; 'higher'/'lower' only where the "
            f"corrected p is below {ALPHA:g}, and 'no verdict possible' where the test cannot reach the threshold "
            f"with that many seeds; below {min_seeds} paired seeds: too few seeds to tell. Seeds needed: the seeds at "
            f"which a paired t-test (level {ALPHA:g}) detects {effect_text} with {POWER:.0%} power at the observed "
            f"spread of the paired differences (noncentral t, scipy.stats.nct), and at least the seeds the exact "
            f"test needs. Gain over base: from the base row, the untrained model evaluated through the same "
            f"end-of-run evaluation (benchmarks, held-out cases, decoding), one deterministic evaluation, so the "
            f"interval (one-sample t, scipy.stats.ttest_1samp) is over the trained row's seeds only. leaderboard.csv "
            f"and .json also give the t-test p, the bootstrap interval of each difference, the probability of improvement P(X > Y) over the paired seeds "
            f"(rliable.metrics.probability_of_improvement, bootstrap interval) and the interquartile mean per cell "
            f"and per row over seeds x columns (rliable.metrics.aggregate_iqm, stratified bootstrap over each "
            f"column's seeds).")


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


def _md_comparisons(lines: list[str], title: str, table: Table, text_of) -> None:
    lines += ["", f"{title}:", "", _md_row(["algorithm", "model", *map(md_escape, table.columns)]),
              "|" + "---|" * (2 + len(table.columns))]
    for row in table.rows:
        lines.append(_md_row([md_escape(row.label), md_escape(row.model),
                              *(text_of(row.cells.get(c), row) for c in table.columns)]))


def markdown(reports: list[TaskReport], root: str, runs: int, problems: list[str], baseline: str,
             min_seeds: int, effect: float | None = None) -> str:
    lines = ["# mrbench report", "", f"{runs} finished runs under {md_code(root)}.", "",
             method_note(baseline, min_seeds, effect)]
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
            _md_comparisons(lines, f"Difference from {md_escape(baseline)}", table, vs_text)
            if table.has_base:
                _md_comparisons(lines, "Gain over the base model", table, gain_text)
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


