"""``leaderboard.json`` (everything, curves included, strict JSON: ``null`` where a number is
undefined or not finite) and ``leaderboard.csv`` (one line per row and column, then the
steps-to-threshold lines; an empty field where a number is undefined)."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from harness.report.method import method_note
from harness.report.render import CSV_FIELDS, design_of, detectable_text, pooled_of, rules_out_text, seeds_text
from harness.report.stats import Comparison
from harness.report.tables import StatCell, TaskReport
from harness.report.verdict import verdict_paragraphs
from mrbench_core.jsonio import finite_or_null


def strict_json(data: Any) -> str:
    return json.dumps(finite_or_null(data), indent=2, sort_keys=False, allow_nan=False) + "\n"


def _comparison(c: Comparison) -> dict[str, Any]:
    return {"n": c.n, "diff": c.diff, "ci": [c.lo, c.hi], "ci_bootstrap": [c.boot_lo, c.boot_hi],
            "rules_out": rules_out_text(c), "p_t": c.p_t,
            "p_perm": c.p_perm, "p_perm_smallest": c.p_min, "p_holm": c.p_holm, "holm_family": c.family,
            "prob_improvement": c.prob, "prob_improvement_ci": [c.prob_lo, c.prob_hi], "sd_diff": c.sd,
            "effect": c.effect, "seeds_needed": c.seeds_needed, "seeds_text": seeds_text(c),
            "smallest_detectable": c.detectable, "smallest_detectable_text": detectable_text(c), "verdict": c.verdict,
            "word": c.word}


def _cell(cell: StatCell) -> dict[str, Any]:
    s = cell.summary
    out: dict[str, Any] = {"n": s.n, "mean": s.mean, "std": s.std, "ci": [s.lo, s.hi], "iqm": s.iqm,
                           "iqm_ci": [s.iqm_lo, s.iqm_hi], "best": cell.best, "left_out": cell.left_out}
    if cell.vs is not None:
        out["vs_baseline"] = _comparison(cell.vs)
    if cell.vs_base is not None:
        out["gain_over_base"] = _comparison(cell.vs_base)
    return out


def to_json(reports: list[TaskReport], root: str, problems: list[str], baseline: str, min_seeds: int,
            effect: float | None = None) -> str:
    tasks: dict[str, Any] = {}
    for rep in reports:
        tasks[rep.task] = {
            "tables": [{"title": t.title, "columns": t.columns, "effects": t.effects,
                        "holm_families": {("vs_baseline" if kind == "vs" else "gain_over_base"): {
                            "size": f.size, "rows": f.rows, "columns": f.columns, "text": f.text(t.short or t.title)}
                            for kind, f in t.families.items()},
                        "rows": [{"label": r.label, "algorithm": r.algo, "model": r.model, "seeds": r.seeds,
                                  "is_baseline": r.is_baseline, "baseline": r.baseline_label, "is_base": r.is_base,
                                  "base": r.base_label, "numerics": r.numerics,
                                  "iqm": None if r.iqm is None else {"value": r.iqm[0], "ci": [r.iqm[1], r.iqm[2]]},
                                  "cells": {c: _cell(cell) for c, cell in r.cells.items()}}
                                 for r in t.rows]} for t in rep.tables],
            "steps_to_threshold": {"source": rep.thresholds.source, "families": rep.thresholds.families,
                                   "rows": [{"label": tr.row.label, "model": tr.row.model, "steps": tr.total_steps,
                                             "first_step": tr.steps, "target": tr.targets}
                                            for tr in rep.thresholds.rows]},
            "curves": {fam: {label: {"steps": c.steps, "median": c.median, "q25": c.q25, "q75": c.q75}
                             for label, c in per_row.items()} for fam, per_row in rep.curves.items()},
            "figures": rep.figures,
        }
    data = {"root": root, "baseline": baseline, "min_seeds": min_seeds, "effect": effect,
            "method": method_note(baseline, min_seeds, effect, design_of(reports), pooled_of(reports)),
            "pool_across_versions": pooled_of(reports), "verdict": verdict_paragraphs(reports),
            "tasks": tasks, "left_out": problems}
    return strict_json(data)


def _csv_value(x: Any) -> Any:
    return None if isinstance(x, float) and not math.isfinite(x) else x


def to_csv(reports: list[TaskReport]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    writer.writeheader()
    for rep in reports:
        for table in rep.tables:
            for row in table.rows:
                for col, cell in row.cells.items():
                    s = cell.summary
                    line = {"task": rep.task, "table": table.title, "row": row.label, "algorithm": row.algo,
                            "model": row.model, "seeds": len(row.seeds), "column": col, "n": s.n, "mean": s.mean,
                            "std": s.std, "ci_low": s.lo, "ci_high": s.hi, "iqm": s.iqm, "best": cell.best,
                            "left_out": "; ".join(cell.left_out), "baseline": row.baseline_label or "",
                            "base": row.base_label or ""}
                    if (c := cell.vs) is not None:
                        line.update(diff=c.diff, diff_ci_low=c.lo, diff_ci_high=c.hi, diff_boot_low=c.boot_lo,
                                    diff_boot_high=c.boot_hi, p_t=c.p_t, p_perm=c.p_perm,
                                    p_holm=c.p_holm, prob_improvement=c.prob, effect=c.effect,
                                    seeds_needed=c.seeds_needed, smallest_detectable=c.detectable,
                                    rules_out=rules_out_text(c), verdict=c.verdict)
                    if (g := cell.vs_base) is not None:
                        line.update(gain=g.diff, gain_ci_low=g.lo, gain_ci_high=g.hi, gain_p_perm=g.p_perm,
                                    gain_p_holm=g.p_holm, gain_prob_improvement=g.prob,
                                    gain_seeds_needed=g.seeds_needed, gain_smallest_detectable=g.detectable,
                                    gain_rules_out=rules_out_text(g),
                                    gain_verdict=g.verdict, effect=g.effect)
                    writer.writerow({k: _csv_value(v) for k, v in line.items()})
        for tr in rep.thresholds.rows:
            for fam in rep.thresholds.families:
                writer.writerow({"task": rep.task, "table": "steps to threshold", "row": tr.row.label,
                                 "algorithm": tr.row.algo, "model": tr.row.model, "seeds": len(tr.row.seeds),
                                 "column": fam, "target": _csv_value(tr.targets[fam]), "first_step": tr.steps[fam],
                                 "steps": tr.total_steps})
    return buf.getvalue()
