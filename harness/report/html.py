"""``report.html``: one self-contained page (styles inline, figures embedded as data URIs) with the
same tables as ``leaderboard.md`` and each task's learning curves."""

from __future__ import annotations

import base64
from html import escape
from pathlib import Path

from harness.report.render import method_note, stat_text, threshold_text, vs_text
from harness.report.tables import TaskReport

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
table { border-collapse: collapse; margin: 0.6em 0 1.4em; font-size: 0.88em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.best { font-weight: bold; }
tr.baseline td { background: #fafaf0; }
p.note { color: #555; font-size: 0.9em; max-width: 60em; }
img.curves { max-width: 100%; border: 1px solid #ddd; }
"""


def _table(head: list[str], body: list[tuple[list[tuple[str, bool]], bool]], css_class: str) -> list[str]:
    out = [f'<table class="{css_class}">', "<thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head)
           + "</tr></thead>", "<tbody>"]
    for cells, baseline in body:
        tds = "".join(f'<td class="best">{escape(t)}</td>' if best else f"<td>{escape(t)}</td>" for t, best in cells)
        out.append(f'<tr class="baseline">{tds}</tr>' if baseline else f"<tr>{tds}</tr>")
    out += ["</tbody>", "</table>"]
    return out


def _image(out_dir: Path, name: str | None, alt: str) -> list[str]:
    if not name:
        return []
    data = base64.b64encode((out_dir / name).read_bytes()).decode("ascii")
    return [f'<img class="curves" alt="{escape(alt)}" src="data:image/png;base64,{data}">']


def to_html(reports: list[TaskReport], out_dir: Path, root: str, runs: int, problems: list[str], baseline: str,
            min_seeds: int) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">', "<title>mrbench report</title>",
             f"<style>{STYLE}</style></head><body>", "<h1>mrbench report</h1>",
             f"<p>{runs} finished runs under <code>{escape(root)}</code>.</p>",
             f'<p class="note">{escape(method_note(baseline, min_seeds))}</p>']
    for rep in reports:
        parts.append(f'<section class="task"><h2>{escape(rep.task)}</h2>')
        for table in rep.tables:
            parts.append(f"<h3>{escape(table.title)}</h3>")
            body = []
            for row in table.rows:
                cells = [(row.label, False), (row.model, False), (str(len(row.seeds)), False)]
                for col in table.columns:
                    cell = row.cells.get(col)
                    cells.append((stat_text(cell.summary, len(row.seeds)) if cell else "", bool(cell and cell.best)))
                body.append((cells, row.is_baseline))
            parts += _table(["algorithm", "model", "seeds", *table.columns], body, "results")
            parts.append(f"<h4>Difference from {escape(baseline)}</h4>")
            body = [([(row.label, False), (row.model, False)]
                     + [(vs_text(row.cells.get(c), row), False) for c in table.columns], row.is_baseline)
                    for row in table.rows]
            parts += _table(["algorithm", "model", *table.columns], body, "versus")
        th = rep.thresholds
        if th.families:
            parts.append("<h3>Steps to threshold</h3>")
            parts.append(f'<p class="note">First step at which a row\'s median training curve reaches '
                         f"{escape(th.source)}.</p>")
            body = [([(tr.row.label, False), (tr.row.model, False), (str(tr.total_steps), False)]
                     + [(threshold_text(tr.steps[f], tr.targets[f]), False) for f in th.families], tr.row.is_baseline)
                    for tr in th.rows]
            parts += _table(["algorithm", "model", "steps", *th.families], body, "thresholds")
        if rep.figures.get("png"):
            parts.append("<h3>Learning curves</h3>")
            parts += _image(out_dir, rep.figures["png"], f"learning curves of {rep.task}")
        parts.append("</section>")
    if problems:
        parts.append("<h2>Records left out</h2><ul>" + "".join(f"<li>{escape(p)}</li>" for p in problems) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
