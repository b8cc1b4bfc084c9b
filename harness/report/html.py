"""``report.html``: one self-contained page (styles inline, figures embedded as data URIs) with the
same tables as ``leaderboard.md`` and each task's learning curves.

Layout: the page is at most 1,200 px wide; a table wider than the page scrolls inside its own box
(column names break after ``/``, ``_`` and ``-``, cells wrap at spaces), so the page itself never
scrolls sideways at 1,280 px. Every ``(n=K)`` a table prints is explained under it. The learning
curves come in two views, chosen with a switch above the figure (no script): smoothed (the
default, with the window stated) and the raw per-step medians.
"""

from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path

from harness.report.figures import report_window
from harness.report.method import diff_cell_note, method_note
from harness.report.notes import CELL_N_NOTE, DIFF_N_NOTE, n_notes
from harness.report.render import design_of, gain_cells, pooled_of, stat_text, threshold_text, vs_cells
from harness.report.tables import TaskReport
from harness.report.verdict import verdict_parts

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; padding: 0 1em; }
.table-wrap { max-width: 100%; overflow-x: auto; margin: 0.6em 0 1.4em; }
table { border-collapse: collapse; font-size: 0.86em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; min-width: 4em; }
td { min-width: 5em; }
td.best { font-weight: bold; }
tr.baseline td { background: #fafaf0; }
p.note { color: #555; font-size: 0.9em; max-width: 60em; }
table.versus td, table.gain td { text-align: right; font-variant-numeric: tabular-nums; }
table.versus td:nth-child(-n+2), table.gain td:nth-child(-n+2) { text-align: left; }
td[title] { cursor: help; }
details.cell-notes { color: #555; font-size: 0.86em; max-width: 60em; margin: -0.8em 0 1.4em; }
details.cell-notes li { margin: 0.15em 0; }
section.verdict { border-left: 4px solid #4a7; background: #f4faf6; padding: 0.2em 1em; margin: 1em 0; }
section.verdict p, section.verdict li { max-width: 60em; }
section.verdict p.lead { font-weight: 600; }
img.curves { max-width: 100%; border: 1px solid #ddd; }
.views > input { position: absolute; opacity: 0; }
.views > label { display: inline-block; padding: 0.2em 0.8em; margin: 0 0.3em 0.4em 0; border: 1px solid #bbb;
                 border-radius: 4px; cursor: pointer; font-size: 0.9em; }
.views > input:checked + label { background: #e8eef8; border-color: #5577aa; }
.views > .view { display: none; }
.views > input.smoothed:checked ~ .view.smoothed, .views > input.raw:checked ~ .view.raw { display: block; }
"""


def _header_html(text: str) -> str:
    """A column name that may break after ``/``, ``_`` and ``-`` (long benchmark keys)."""
    return re.sub(r"([/_-])", r"\1<wbr>", escape(text))


def _td(text: str, best: bool, title: str = "") -> str:
    attrs = (' class="best"' if best else "") + (f' title="{escape(title)}"' if title else "")
    return f"<td{attrs}>{escape(text)}</td>"


def _table(head: list[str], body: list[tuple[list[tuple], bool]], css_class: str) -> list[str]:
    """Cells are ``(text, best)`` or ``(text, best, tooltip)``."""
    out = ['<div class="table-wrap">', f'<table class="{css_class}">',
           "<thead><tr>" + "".join(f"<th>{_header_html(h)}</th>" for h in head) + "</tr></thead>", "<tbody>"]
    for cells, baseline in body:
        tds = "".join(_td(*cell) for cell in cells)
        out.append(f'<tr class="baseline">{tds}</tr>' if baseline else f"<tr>{tds}</tr>")
    out += ["</tbody>", "</table>", "</div>"]
    return out


def _differences(table, cells_of, css_class: str, highlight, design=None) -> list[str]:
    """A difference table, one number per cell (its full text as the cell's tooltip), and the full
    texts as notes under it."""
    body, notes = [], []
    for row in table.rows:
        cells = [(row.label, False), (row.model, False)]
        for col in table.columns:
            short, full = cells_of(row.cells.get(col), row)
            cells.append((short, False, full))
            if full:
                notes.append(f"<li><b>{escape(row.label)}</b> ({escape(row.model)}), {escape(col)}: {escape(full)}</li>")
        body.append((cells, highlight(row)))
    out = _table(["algorithm", "model", *table.columns], body, css_class)
    out += [f'<p class="note">{escape(n)}</p>' for n in n_notes(notes, DIFF_N_NOTE)]
    if notes:
        out += [f'<p class="note">{escape(diff_cell_note(design))}</p>',
                '<details class="cell-notes"><summary>Intervals, verdicts and the smallest detectable effects</summary>',
                '<ul class="cell-notes">', *notes, "</ul></details>"]
    return out


def _notes(body: list[tuple[list[tuple[str, bool]], bool]], note: str) -> list[str]:
    return [f'<p class="note">{escape(n)}</p>' for n in n_notes([t for cells, _ in body for t, _ in cells], note)]


def _image(out_dir: Path, name: str | None, alt: str) -> list[str]:
    if not name:
        return []
    data = base64.b64encode((out_dir / name).read_bytes()).decode("ascii")
    return [f'<img class="curves" alt="{escape(alt)}" src="data:image/png;base64,{data}">']


def _curves(rep: TaskReport, out_dir: Path, index: int) -> list[str]:
    raw = _image(out_dir, rep.figures.get("png"), f"learning curves of {rep.task}, raw per-step medians")
    if not rep.figures.get("smoothed_png"):
        return raw
    window = report_window(rep)
    smooth = _image(out_dir, rep.figures["smoothed_png"],
                    f"learning curves of {rep.task}, moving average over {window} steps")
    name = f"view-{index}"
    return ['<div class="views">',
            f'<input type="radio" class="smoothed" name="{name}" id="{name}-smoothed" checked>',
            f'<label for="{name}-smoothed">smoothed: centred moving average over {window} steps</label>',
            f'<input type="radio" class="raw" name="{name}" id="{name}-raw">',
            f'<label for="{name}-raw">raw per-step medians</label>',
            '<div class="view smoothed">', *smooth, "</div>", '<div class="view raw">', *raw, "</div>", "</div>"]


def verdict_block(reports: list[TaskReport]) -> list[str]:
    """The page's opening verdict: one paragraph per task, from its own tables."""
    parts = verdict_parts(reports)
    if not parts:
        return []
    out = ['<section class="verdict" id="verdict"><h2>Verdict</h2>']
    for lead, points in parts:
        out.append(f'<p class="lead">{escape(lead)}</p>')
        if points:
            out.append("<ul>" + "".join(f"<li>{escape(p)}</li>" for p in points) + "</ul>")
    return out + ["</section>"]


def to_html(reports: list[TaskReport], out_dir: Path, root: str, runs: int, problems: list[str], baseline: str,
            min_seeds: int, effect: float | None = None) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">', "<title>mrbench report</title>",
             f"<style>{STYLE}</style></head><body>", "<h1>mrbench report</h1>", *verdict_block(reports),
             f"<p>{runs} finished runs under <code>{escape(root)}</code>.</p>",
             f'<p class="note">{escape(method_note(baseline, min_seeds, effect, design_of(reports), pooled_of(reports)))}</p>']
    for index, rep in enumerate(reports):
        parts.append(f'<section class="task"><h2>{escape(rep.task)}</h2>')
        for table in rep.tables:
            parts.append(f"<h3>{escape(table.title)}</h3>")
            body = []
            for row in table.rows:
                cells = [(row.label, False), (row.model, False), ("—" if row.is_base else str(len(row.seeds)), False)]
                for col in table.columns:
                    cell = row.cells.get(col)
                    cells.append((stat_text(cell, len(row.seeds)) if cell else "", bool(cell and cell.best)))
                body.append((cells, row.is_baseline))
            parts += _table(["algorithm", "model", "seeds", *table.columns], body, "results")
            parts += _notes(body, CELL_N_NOTE)
            parts.append(f"<h4>Difference from {escape(baseline)}</h4>")
            parts += _differences(table, vs_cells, "versus", lambda row: row.is_baseline, rep.design)
            if table.has_base:
                parts.append("<h4>Gain over the base model</h4>")
                parts += _differences(table, gain_cells, "gain", lambda row: row.is_base, rep.design)
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
            parts += _curves(rep, out_dir, index)
        parts.append("</section>")
    if problems:
        parts.append("<h2>Records and values left out</h2><ul>" + "".join(f"<li>{escape(p)}</li>" for p in problems) + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
