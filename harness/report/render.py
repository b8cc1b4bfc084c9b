"""``leaderboard.md``, ``leaderboard.csv`` (one line per row and column) and ``leaderboard.json``
(everything, curves included) from the task reports."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from harness.report.notes import md_n_notes
from harness.report.stats import Comparison, Summary
from harness.report.tables import Row, StatCell, TaskReport

CSV_FIELDS = ("task", "table", "row", "algorithm", "model", "seeds", "column", "n", "mean", "std", "ci_low",
              "ci_high", "best", "baseline", "diff", "diff_ci_low", "diff_ci_high", "p_t", "p_perm", "verdict",
              "target", "first_step", "steps")


def num(x: float | None, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    text = f"{x:+.3f}" if signed else f"{x:.3f}"
    return text if abs(x) < 1000 else (f"{x:+.4g}" if signed else f"{x:.4g}")


def stat_text(s: Summary, seeds: int) -> str:
    if s.n == 1:
        text = num(s.mean)
    else:
        text = f"{num(s.mean)} ± {num(s.std)} [{num(s.lo)}, {num(s.hi)}]"
    return text + (f" (n={s.n})" if s.n != seeds else "")


def compare_text(c: Comparison | None) -> str:
    if c is None:
        return "—"
    if c.n == 0:
        return c.verdict
    interval = f" [{num(c.lo, True)}, {num(c.hi, True)}]" if c.n > 1 else ""
    return f"{num(c.diff, True)}{interval}, {c.verdict}"


def vs_text(cell: StatCell | None, row: Row) -> str:
    if cell is None:
        return ""
    if row.is_baseline:
        return "baseline"
    return compare_text(cell.vs) if row.baseline_label is not None else "no baseline row on this model"


def method_note(baseline: str, min_seeds: int) -> str:
    return (f"Cells: mean ± sample std over seeds [95% bootstrap interval of the mean]; the best mean of each "
            f"column in bold. Differences: from the {baseline} row on the same model, over the seeds both ran "
            f"(mean difference [95% bootstrap interval]), with a two-sided paired t-test; below {min_seeds} "
            f"paired seeds: too few seeds to tell. leaderboard.csv and .json also give an exact paired "
            f"sign-flip permutation p.")


def _md_row(cells: list[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def markdown(reports: list[TaskReport], root: str, runs: int, problems: list[str], baseline: str,
             min_seeds: int) -> str:
    lines = ["# mrbench report", "", f"{runs} finished runs under `{root}`.", "", method_note(baseline, min_seeds)]
    for rep in reports:
        lines += ["", f"## {rep.task}"]
        for table in rep.tables:
            lines += ["", f"### {table.title}", "",
                      _md_row(["algorithm", "model", "seeds", *table.columns]),
                      "|" + "---|" * (3 + len(table.columns))]
            for row in table.rows:
                cells = []
                for col in table.columns:
                    cell = row.cells.get(col)
                    text = stat_text(cell.summary, len(row.seeds)) if cell else ""
                    cells.append(f"**{text}**" if cell and cell.best else text)
                lines.append(_md_row([row.label, row.model, str(len(row.seeds)), *cells]))
            lines += ["", f"Difference from {baseline}:", "", _md_row(["algorithm", "model", *table.columns]),
                      "|" + "---|" * (2 + len(table.columns))]
            for row in table.rows:
                lines.append(_md_row([row.label, row.model,
                                      *(vs_text(row.cells.get(c), row) for c in table.columns)]))
        th = rep.thresholds
        if th.families:
            lines += ["", "### Steps to threshold", "",
                      f"First step at which a row's median training curve reaches {th.source}.", "",
                      _md_row(["algorithm", "model", "steps", *th.families]), "|" + "---|" * (3 + len(th.families))]
            for tr in th.rows:
                lines.append(_md_row([tr.row.label, tr.row.model, str(tr.total_steps),
                                      *(threshold_text(tr.steps[f], tr.targets[f]) for f in th.families)]))
        if rep.figures.get("png"):
            lines += ["", f"![learning curves of {rep.task}]({rep.figures['png']})"]
    if problems:
        lines += ["", "## Records left out", ""] + [f"- {p}" for p in problems]
    lines[5:5] = md_n_notes(lines)  # after the method note
    return "\n".join(lines) + "\n"


def threshold_text(step: int | None, target: float | None) -> str:
    if target is None:
        return "no target"
    return f"{step if step is not None else 'not reached'} (≥ {num(target)})"


def _clean(x: Any) -> Any:
    if isinstance(x, float) and (math.isnan(x) or math.isinf(x)):
        return None
    return x


def _summary_dict(cell: StatCell) -> dict[str, Any]:
    s = cell.summary
    out: dict[str, Any] = {"n": s.n, "mean": _clean(s.mean), "std": _clean(s.std), "ci": [_clean(s.lo), _clean(s.hi)],
                           "best": cell.best}
    if cell.vs is not None:
        c = cell.vs
        out["vs_baseline"] = {"n": c.n, "diff": _clean(c.diff), "ci": [_clean(c.lo), _clean(c.hi)],
                              "p_t": _clean(c.p_t), "p_perm": _clean(c.p_perm), "verdict": c.verdict}
    return out


def to_json(reports: list[TaskReport], root: str, problems: list[str], baseline: str, min_seeds: int) -> str:
    tasks: dict[str, Any] = {}
    for rep in reports:
        tasks[rep.task] = {
            "tables": [{"title": t.title, "columns": t.columns,
                        "rows": [{"label": r.label, "algorithm": r.algo, "model": r.model, "seeds": r.seeds,
                                  "is_baseline": r.is_baseline, "baseline": r.baseline_label,
                                  "cells": {c: _summary_dict(cell) for c, cell in r.cells.items()}}
                                 for r in t.rows]} for t in rep.tables],
            "steps_to_threshold": {"source": rep.thresholds.source, "families": rep.thresholds.families,
                                   "rows": [{"label": tr.row.label, "model": tr.row.model, "steps": tr.total_steps,
                                             "first_step": tr.steps, "target": {k: _clean(v) for k, v in
                                                                                tr.targets.items()}}
                                            for tr in rep.thresholds.rows]},
            "curves": {fam: {label: {"steps": c.steps, "median": c.median, "q25": c.q25, "q75": c.q75}
                             for label, c in per_row.items()} for fam, per_row in rep.curves.items()},
            "figures": rep.figures,
        }
    data = {"root": root, "baseline": baseline, "min_seeds": min_seeds, "tasks": tasks, "left_out": problems}
    return json.dumps(data, indent=2, sort_keys=False, allow_nan=False) + "\n"


def to_csv(reports: list[TaskReport]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for rep in reports:
        for table in rep.tables:
            for row in table.rows:
                for col, cell in row.cells.items():
                    s, c = cell.summary, cell.vs
                    line = {"task": rep.task, "table": table.title, "row": row.label, "algorithm": row.algo,
                            "model": row.model, "seeds": len(row.seeds), "column": col, "n": s.n,
                            "mean": _clean(s.mean), "std": _clean(s.std), "ci_low": _clean(s.lo),
                            "ci_high": _clean(s.hi), "best": cell.best, "baseline": row.baseline_label or ""}
                    if c is not None:
                        line.update(diff=_clean(c.diff), diff_ci_low=_clean(c.lo), diff_ci_high=_clean(c.hi),
                                    p_t=_clean(c.p_t), p_perm=_clean(c.p_perm), verdict=c.verdict)
                    writer.writerow(line)
        for tr in rep.thresholds.rows:
            for fam in rep.thresholds.families:
                writer.writerow({"task": rep.task, "table": "steps to threshold", "row": tr.row.label,
                                 "algorithm": tr.row.algo, "model": tr.row.model, "seeds": len(tr.row.seeds),
                                 "column": fam, "target": _clean(tr.targets[fam]), "first_step": tr.steps[fam],
                                 "steps": tr.total_steps})
    return buf.getvalue()
