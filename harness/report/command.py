"""``mrbench report --root DIR --out DIR``: read the finished records, write the report files."""

from __future__ import annotations

import errno
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from harness.records import atomic_write_text
from harness.report.collect import collect, group_runs
from harness.report.export import to_csv, to_json
from harness.report.figures import draw_curves
from harness.report.html import to_html
from harness.report.render import markdown
from harness.report.sequential import read_design
from harness.report.tables import TaskReport, task_report
from harness.report.verdict import verdict_parts


class EmptyReport(ValueError):
    """``--strict`` and no finished run under the root (the CLI prints it and exits 2)."""


@dataclass
class ReportOptions:
    root: str = "results"
    out: str = "report"
    baseline: str = "gdpo"
    threshold: float | None = None
    min_seeds: int = 3
    effect: float | None = None   # the effect seeds-needed is for (None: one point of each column's scale)
    strict: bool = False          # an empty root is an error, not a warning
    pool_across_versions: bool = False  # one row per configuration, whatever its records' numerics


def build_reports(opts: ReportOptions) -> tuple[list[TaskReport], int, list[str]]:
    """Task reports (figures not drawn yet), the number of runs used, and the records left out."""
    if not Path(opts.root).is_dir():
        raise FileNotFoundError(f"--root {opts.root}: no such directory")
    runs, problems = collect(opts.root)
    by_task, more = group_runs(runs, opts.pool_across_versions)
    design = read_design(opts.root)  # an adaptive sweep's root: its intervals are confidence sequences
    reports = [task_report(task, groups, opts.baseline, opts.threshold, opts.min_seeds, opts.effect, design,
                           opts.pool_across_versions)
               for task, groups in by_task.items()]
    return reports, len(runs) - len(more), problems + more


@dataclass
class Written:
    """What :func:`write_report` wrote, and the verdict the files open with (per task: the lead
    sentence and the points under it), for the terminal."""

    paths: list[Path]
    verdict: list[tuple[str, list[str]]]


def verdict_lines(verdict: list[tuple[str, list[str]]], width: int = 100) -> list[str]:
    """The verdict as the terminal shows it: a heading, each task's lead sentence and its points, wrapped."""
    if not verdict:
        return []
    out = ["Verdict:"]
    for lead, points in verdict:
        out += textwrap.wrap(lead, width, initial_indent="  ", subsequent_indent="  ", break_on_hyphens=False)
        for point in points:
            out += textwrap.wrap(point, width, initial_indent="  - ", subsequent_indent="    ",
                                 break_on_hyphens=False)
    return out


def write_report(opts: ReportOptions) -> Written:
    """Write leaderboard.md/.csv/.json, curves-<task>.png/.svg and report.html; returns their paths
    and the verdict."""
    out = Path(opts.out)
    if opts.effect is not None and not (opts.effect > 0 and opts.effect < float("inf")):
        raise ValueError(f"--effect {opts.effect}: must be a positive number")
    reports, runs, problems = build_reports(opts)
    if runs == 0:
        why = f"no finished run under {opts.root}" + (f" ({len(problems)} records left out)" if problems else "")
        if opts.strict:
            raise EmptyReport(f"{why}; nothing to report (--strict)")
        print(f"mrbench report: warning: {why}; the report is empty", file=sys.stderr)
    for rep in reports:
        algos = sorted({row.algo for table in rep.tables for row in table.rows if not row.is_base})
        if opts.baseline not in algos:
            print(f"mrbench report: task {rep.task}: no {opts.baseline!r} rows to compare with (--baseline); "
                  f"its algorithms: {', '.join(algos)}", file=sys.stderr)
    written: list[Path] = []
    try:
        for rep in reports:
            rep.figures = draw_curves(rep, out)
            written += [out / name for name in rep.figures.values()]
        root = str(opts.root)
        files = {
            "leaderboard.md": markdown(reports, root, runs, problems, opts.baseline, opts.min_seeds, opts.effect),
            "leaderboard.csv": to_csv(reports),
            "leaderboard.json": to_json(reports, root, problems, opts.baseline, opts.min_seeds, opts.effect),
            "report.html": to_html(reports, out, root, runs, problems, opts.baseline, opts.min_seeds, opts.effect),
        }
        for name, text in files.items():
            atomic_write_text(out / name, text)
            written.append(out / name)
    except OSError as exc:
        raise ReportNotWritten(out, exc) from exc
    if problems and runs:
        print(f"mrbench report: note: {len(problems)} records or values left out (unfinished, damaged or a second "
              f"record of a seed); leaderboard.md lists each under 'Records and values left out'", file=sys.stderr)
    return Written(written, verdict_parts(reports))


class ReportNotWritten(ValueError):
    """The output folder refused a report file (read-only, full, not permitted): one line naming it."""

    def __init__(self, out: Path, exc: OSError):
        where = exc.filename or out
        room = " (free some space, or" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else " (make it writable, or"
        super().__init__(f"{where}: cannot write the report there: {exc.strerror or exc}{room} choose another "
                         f"--out)")
