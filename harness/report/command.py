"""``mrbench report --root DIR --out DIR``: read the finished records, write the report files."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from harness.records import atomic_write_text
from harness.report.collect import collect, group_runs
from harness.report.figures import draw_curves
from harness.report.html import to_html
from harness.report.render import markdown, to_csv, to_json
from harness.report.tables import TaskReport, task_report


@dataclass
class ReportOptions:
    root: str = "results"
    out: str = "report"
    baseline: str = "gdpo"
    threshold: float | None = None
    min_seeds: int = 3


def build_reports(opts: ReportOptions) -> tuple[list[TaskReport], int, list[str]]:
    """Task reports (figures not drawn yet), the number of runs used, and the records left out."""
    if not Path(opts.root).is_dir():
        raise FileNotFoundError(f"--root {opts.root}: no such directory")
    runs, problems = collect(opts.root)
    by_task, more = group_runs(runs)
    reports = [task_report(task, groups, opts.baseline, opts.threshold, opts.min_seeds)
               for task, groups in by_task.items()]
    return reports, len(runs) - len(more), problems + more


def write_report(opts: ReportOptions) -> list[Path]:
    """Write leaderboard.md/.csv/.json, curves-<task>.png/.svg and report.html; returns their paths."""
    out = Path(opts.out)
    reports, runs, problems = build_reports(opts)
    for rep in reports:
        algos = sorted({row.algo for table in rep.tables for row in table.rows})
        if opts.baseline not in algos:
            print(f"mrbench report: task {rep.task}: no {opts.baseline!r} rows to compare with (--baseline); "
                  f"its algorithms: {', '.join(algos)}", file=sys.stderr)
    written: list[Path] = []
    for rep in reports:
        rep.figures = draw_curves(rep, out)
        written += [out / name for name in rep.figures.values()]
    root = str(opts.root)
    files = {
        "leaderboard.md": markdown(reports, root, runs, problems, opts.baseline, opts.min_seeds),
        "leaderboard.csv": to_csv(reports),
        "leaderboard.json": to_json(reports, root, problems, opts.baseline, opts.min_seeds),
        "report.html": to_html(reports, out, root, runs, problems, opts.baseline, opts.min_seeds),
    }
    for name, text in files.items():
        atomic_write_text(out / name, text)
        written.append(out / name)
    return written
