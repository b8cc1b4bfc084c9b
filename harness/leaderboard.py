"""``mrbench leaderboard``: one compact table of every configuration's headline numbers over seeds.

Records are read and grouped exactly as ``mrbench report`` groups them
(:func:`harness.report.collect.collect` and :func:`~harness.report.collect.group_runs`): one row
per configuration (task, algorithm, model and every other setting but the seed, the output place
and execution-only fields), labelled with the settings that set it apart from the other rows of
its algorithm and model, each by its shortest unambiguous name (``mrtpo (steps=16)``; a field an
older record lacks counts at its default, so it is no difference). Two configurations of one algorithm are
never pooled into one row.

Columns: each benchmark's summary numbers in ``eval.json`` and, per reward family, the final
training reward (``train/<family>``: the mean of the last tenth of the steps, as the report's
table). A cell is ``mean ± sample std`` over the row's seeds; ``(n=K)`` after it says that only K
of the row's seeds have that column.

Below the table it says which records each row merged, which configurations of the same task,
algorithm and model it kept apart (and the settings in which they differ), and which records it
left out (unfinished, unreadable, a second record of a seed already in its row).

``mrbench report`` gives the full picture from the same grouping: intervals, seed-paired
comparisons against a baseline, learning curves and steps to threshold.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from harness.records import atomic_write_text
from harness.report.collect import Group, Run, collect, group_runs

N_NOTE = ("(n=K) after a value: only K of the row's seeds have that column (a reward family none of a seed's "
          "training prompts asked for, or a benchmark a run did not evaluate); the value is over those K.")


def _values(run: Run) -> dict[str, float]:
    return {**run.evals, **{f"train/{fam}": v for fam, v in run.finals.items()}}


def _cell(xs: list[float], seeds: int) -> str:
    if not xs:
        return ""
    text = f"{xs[0]:.4g}" if len(xs) == 1 else f"{statistics.mean(xs):.4g} ± {statistics.stdev(xs):.2g}"
    return text + (f" (n={len(xs)})" if len(xs) != seeds else "")


def _where(path: str, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return path


def _kept_apart(groups: list[Group]) -> list[str]:
    """One line per (task, algorithm, model) with more than one configuration: the differing settings."""
    same: dict[tuple[str, str, str], list[Group]] = defaultdict(list)
    for g in groups:
        same[(g.task, g.algo, g.model)].append(g)
    lines = []
    for (task, algo, model), gs in sorted(same.items()):
        if len(gs) < 2:
            continue
        keys = sorted({k for g in gs for k in g.settings})
        differing = [k for k in keys if len({repr(g.settings.get(k)) for g in gs}) > 1]
        shown = ", ".join(f"{k} ({' / '.join(str(g.settings.get(k, 'unset')) for g in gs)})" for k in differing)
        lines.append(f"- {task} / {algo} / {model}: {len(gs)} configurations in {len(gs)} rows "
                     f"({', '.join(g.label for g in gs)}), differing in {shown}")
    return lines


def build_leaderboard(root: str | Path = "results", out: str | Path | None = None) -> str:
    root = Path(root)
    runs, problems = collect(root)
    by_task, more = group_runs(runs)
    problems = problems + more
    groups = [g for task in sorted(by_task) for g in by_task[task]]
    if not groups:
        text = f"no finished records under {root}"
    else:
        columns = sorted({k for g in groups for run in g.runs for k in _values(run)},
                         key=lambda c: (c.startswith("train/"), c))
        lines = ["| task | row | model | seeds | " + " | ".join(columns) + " |", "|" + "---|" * (4 + len(columns))]
        partial = False
        for g in groups:
            vals = []
            for col in columns:
                xs = [_values(run)[col] for run in sorted(g.runs, key=lambda r: r.seed) if col in _values(run)]
                vals.append(_cell(xs, len(g.runs)))
                partial |= bool(xs) and len(xs) != len(g.runs)
            lines.append(f"| {g.task} | {g.label} | {g.model} | {len(g.runs)} | " + " | ".join(vals) + " |")
        if partial:
            lines += ["", N_NOTE]
        lines += ["", "merged (one row per configuration; its seeds pooled):"]
        for g in groups:
            where = ", ".join(_where(r.path, root) for r in sorted(g.runs, key=lambda r: r.seed))
            lines.append(f"- {g.task} / {g.label} / {g.model}: {len(g.runs)} record(s), seeds "
                         f"{', '.join(str(s) for s in g.seeds)}: {where}")
        apart = _kept_apart(groups)
        if apart:
            lines += ["", "kept apart (same task, algorithm and model; another configuration):", *apart]
        text = "\n".join(lines)
    if problems:
        text += "\n\nleft out:\n" + "\n".join(f"- {p}" for p in problems)
    if out:
        atomic_write_text(Path(out), text + "\n")
    return text
