"""Leaderboards derived from run records (never edited by hand).

Cells are grouped by (task, algorithm, model); every seed's record contributes. For each
headline figure — each benchmark's summary numbers in ``eval.json`` and the last training step's
reward means in ``metrics.jsonl`` — the table shows ``mean ± sample std`` over the seeds and the
number of seeds. Unfinished or corrupt records are listed below the table with the reason.

``mrbench report`` (:mod:`harness.report`) gives the full picture from the same records: one table
per task with bootstrap intervals and seed-paired comparisons against a baseline, learning curves
and steps to threshold, as Markdown, CSV, JSON and a self-contained HTML page.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from harness.metric_names import reward_mean_name
from harness.records import RecordError, atomic_write_text, find_records, load_record


def _headline(record: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for bench, res in (record.get("eval") or {}).get("benchmarks", {}).items():
        for key, value in (res.get("summary") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and "count" not in key:
                out[f"{bench}/{key}"] = float(value)
    metrics = record.get("metrics") or []
    if metrics:
        for key, value in metrics[-1].items():
            if reward_mean_name(key) is not None and isinstance(value, (int, float)):
                out[f"train/{reward_mean_name(key)}"] = float(value)
    return out


def collect(root: str | Path) -> tuple[dict[tuple[str, str, str], list[dict[str, float]]], list[str]]:
    cells: dict[tuple[str, str, str], list[dict[str, float]]] = defaultdict(list)
    problems: list[str] = []
    for path in find_records(Path(root)):
        try:
            rec = load_record(path)
        except RecordError as exc:
            problems.append(str(exc))
            continue
        if rec["provenance"].get("status") != "finished":
            problems.append(f"{path}: not finished (status {rec['provenance'].get('status')!r})")
            continue
        cfg = rec["config"]
        key = (cfg["task"]["name"], cfg["algo"]["name"], cfg["model"]["name"])
        cells[key].append(_headline(rec))
    return cells, problems


def build_leaderboard(root: str | Path = "results", out: str | Path | None = None) -> str:
    cells, problems = collect(root)
    if not cells:
        table = f"no finished records under {root}"
    else:
        columns = sorted({k for runs in cells.values() for run in runs for k in run})
        header = "| task | algorithm | model | seeds | " + " | ".join(columns) + " |"
        lines = [header, "|" + "---|" * (4 + len(columns))]
        for (task, algo, model), runs in sorted(cells.items()):
            vals = []
            for col in columns:
                xs = [r[col] for r in runs if col in r]
                if not xs:
                    vals.append("")
                elif len(xs) == 1:
                    vals.append(f"{xs[0]:.4g}")
                else:
                    vals.append(f"{statistics.mean(xs):.4g} ± {statistics.stdev(xs):.2g}")
            lines.append(f"| {task} | {algo} | {model} | {len(runs)} | " + " | ".join(vals) + " |")
        table = "\n".join(lines)
    if problems:
        table += "\n\nskipped records:\n" + "\n".join(f"- {p}" for p in problems)
    if out:
        atomic_write_text(Path(out), table + "\n")
    return table
