"""``mrbench leaderboard``: one compact table of every configuration's headline numbers over seeds.

Records are read and grouped exactly as ``mrbench report`` groups them
(:func:`harness.report.collect.collect` and :func:`~harness.report.collect.group_runs`): one row
per configuration (task, algorithm, model and every other setting but the seed, the output place
and execution-only fields) and numerics (:mod:`harness.report.pooling`: the same fingerprint, or
for records without one the same commit, dirty flag and versions), labelled with the settings that
set it apart from the other rows of its algorithm and model, each by its shortest unambiguous name
(``mrtpo (steps=16)``; a field an older record lacks counts at its default, so it is no
difference), and with what sets apart the numerics of one configuration's rows (``gdpo (commit
311470f, fingerprint unknown)``). Two configurations of one algorithm are never pooled into one
row; one configuration's records of different numerics are pooled only with
``--pool-across-versions``, and then the output says which rows mix.

Columns: each benchmark's summary numbers in ``eval.json`` and, per reward family, the final
training reward (``train/<family>``: the mean of the last tenth of the steps, as the report's
table). A cell is ``mean ± sample std`` over the row's seeds; ``(n=K)`` after it says that only K
of the row's seeds have that column.

Below the table it says which records each row merged and their numerics, which configurations
of the same task, algorithm and model it kept apart (and the settings or numerics in which they
differ), and which records it left out (unfinished, unreadable, a second record of a seed already
in its row, with whether the two agree).

``mrbench report`` gives the full picture from the same grouping: intervals, seed-paired
comparisons against a baseline, learning curves and steps to threshold.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from harness.records import atomic_write_text
from harness.report.collect import Group, collect, group_runs
from harness.report.pooling import mixes

N_NOTE = ("(n=K) after a value: only K of the row's seeds have that column (a reward family none of a seed's "
          "training prompts asked for, or a benchmark a run did not evaluate); the value is over those K.")


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
    """One line per (task, algorithm, model) with more than one configuration (the differing settings),
    and one per configuration kept apart in several rows by its records' numerics."""
    same: dict[tuple[str, str, str], list[Group]] = defaultdict(list)
    for g in groups:
        same[(g.task, g.algo, g.model)].append(g)
    lines = []
    for (task, algo, model), gs in sorted(same.items()):
        configs: dict[str, list[Group]] = defaultdict(list)
        for g in gs:
            configs[repr(sorted(g.settings.items()))].append(g)
        if len(configs) > 1:
            keys = sorted({k for g in gs for k in g.settings})
            firsts = [c[0] for c in configs.values()]
            differing = [k for k in keys if len({repr(g.settings.get(k)) for g in firsts}) > 1]
            shown = ", ".join(f"{k} ({' / '.join(str(g.settings.get(k, 'unset')) for g in firsts)})"
                              for k in differing)
            lines.append(f"- {task} / {algo} / {model}: {len(configs)} configurations in {len(gs)} rows "
                         f"({', '.join(g.label for g in gs)}), differing in {shown}")
        for split in configs.values():
            if len(split) > 1:
                lines.append(f"- {task} / {algo} / {model}: one configuration in {len(split)} rows by its records' "
                             f"numerics ({', '.join(g.label for g in split)}): not shown to compute the same "
                             f"numbers (docs/comparability.md); --pool-across-versions merges them")
    return lines


def _numerics_lines(groups: list[Group], pooled: bool) -> list[str]:
    """What the rows' numerics are: how many records have no fingerprint, and (pooled) which rows mix."""
    runs = [n for g in groups for n in g.numerics]
    unknown = sum(not n.known for n in runs)
    lines = []
    if unknown:
        rule = "" if pooled else ": each pools only with records of the same commit, dirty flag and versions"
        lines.append(f"- fingerprint unknown for {unknown} of {len(runs)} records (made before records carried "
                     f"one, or by a backend that computes none){rule}")
    if pooled:
        mixed = [g for g in groups if mixes(g.numerics)]
        lines.append("- pooled across versions on purpose (--pool-across-versions): "
                     + (f"{len(mixed)} row(s) mix records of different numerics: "
                        + "; ".join(f"{g.task} / {g.label} / {g.model} ({g.numerics_text})" for g in mixed)
                        if mixed else "no row mixes records of different numerics"))
    return lines


def build_leaderboard(root: str | Path = "results", out: str | Path | None = None,
                      pool_across_versions: bool = False) -> str:
    root = Path(root)
    runs, problems = collect(root)
    by_task, more = group_runs(runs, pool_across_versions)
    problems = problems + more
    groups = [g for task in sorted(by_task) for g in by_task[task]]
    if not groups:
        text = f"no finished records under {root}"
    else:
        columns = sorted({k for g in groups for run in g.runs for k in run.values},
                         key=lambda c: (c.startswith("train/"), c))
        lines = ["| task | row | model | seeds | " + " | ".join(columns) + " |", "|" + "---|" * (4 + len(columns))]
        partial = False
        for g in groups:
            vals = []
            for col in columns:
                xs = [run.values[col] for run in sorted(g.runs, key=lambda r: r.seed) if col in run.values]
                vals.append(_cell(xs, len(g.runs)))
                partial |= bool(xs) and len(xs) != len(g.runs)
            lines.append(f"| {g.task} | {g.label} | {g.model} | {len(g.runs)} | " + " | ".join(vals) + " |")
        if partial:
            lines += ["", N_NOTE]
        rule = "configuration, pooled across versions" if pool_across_versions else "configuration and numerics"
        lines += ["", f"merged (one row per {rule}; its seeds pooled):"]
        for g in groups:
            where = ", ".join(_where(r.path, root) for r in sorted(g.runs, key=lambda r: r.seed))
            lines.append(f"- {g.task} / {g.label} / {g.model}: {len(g.runs)} record(s), seeds "
                         f"{', '.join(str(s) for s in g.seeds)}: {where}; numerics: {g.numerics_text}")
        apart = _kept_apart(groups)
        if apart:
            lines += ["", "kept apart (same task, algorithm and model; another configuration or numerics):", *apart]
        numerics = _numerics_lines(groups, pool_across_versions)
        if numerics:
            lines += ["", "numerics:", *numerics]
        text = "\n".join(lines)
    if problems:
        text += "\n\nleft out:\n" + "\n".join(f"- {p}" for p in problems)
    if out:
        atomic_write_text(Path(out), text + "\n")
    return text
