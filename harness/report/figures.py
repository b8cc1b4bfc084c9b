"""Learning curves: one figure per task, one panel per reward family, one line per row (median
over seeds) with its interquartile band; written as PNG and SVG (matplotlib, Agg backend), twice:
the raw per-step medians (``curves-<task>``) and a smoothed view (``curves-<task>-smoothed``: a
centred moving average of the medians and the band over :func:`smoothing_window` steps, shorter
at the ends).

Rows that coincide stay visible: each row has its own colour, dash pattern and marker (markers
every few points on long curves), and the rows are drawn a small step offset apart (at most
a tenth of a step in all, said in the title), so a row hidden under another still shows its
dashes and markers; every legend entry shows its row's style. Steps are integers on the x axis.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

from harness.report.tables import Curve, TaskReport

PANEL_W, PANEL_H = 4.2, 3.0
MAX_COLUMNS = 3
DASHES = ["-", (0, (5, 2)), (0, (1, 1.5)), (0, (6, 2, 1, 2)), (0, (3, 1, 1, 1, 1, 1)), (0, (8, 3))]
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
MAX_MARKERS = 12
OFFSET_SPAN = 0.1  # steps: the rows' offsets spread over at most this width


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError("mrbench report draws its figures with matplotlib: pip install 'mrbench[report]' "
                          "(bash scripts/setup.sh installs it)") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def file_stem(task: str) -> str:
    return "curves-" + "".join(c if (c.isalnum() or c in "._-") else "-" for c in task)


def smoothing_window(n_steps: int) -> int:
    """The moving-average window: an odd number of steps, about an eighth of the run, at least 3
    (1, no smoothing, for runs under 4 steps)."""
    if n_steps < 4:
        return 1
    w = max(3, round(n_steps / 8))
    return w if w % 2 else w + 1


def moving_average(values: list[float], window: int) -> list[float]:
    """Centred moving average over ``window`` points, truncated at the ends (mean of what exists);
    NaN values are skipped."""
    half = window // 2
    out = []
    for i in range(len(values)):
        part = [v for v in values[max(0, i - half):i + half + 1] if not math.isnan(v)]
        out.append(sum(part) / len(part) if part else math.nan)
    return out


def smoothed(curve: Curve, window: int) -> Curve:
    return Curve(curve.steps, moving_average(curve.median, window), moving_average(curve.q25, window),
                 moving_average(curve.q75, window))


def _offsets(labels: list[str]) -> dict[str, float]:
    if len(labels) < 2:
        return {label: 0.0 for label in labels}
    step = OFFSET_SPAN / (len(labels) - 1)
    return {label: (i - (len(labels) - 1) / 2) * step for i, label in enumerate(labels)}


def _figure(plt, report: TaskReport, window: int):
    families = list(report.curves)
    cols = min(MAX_COLUMNS, len(families))
    nrows = math.ceil(len(families) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(PANEL_W * cols, PANEL_H * nrows), squeeze=False)
    labels = sorted({label for per_row in report.curves.values() for label in per_row})
    colors = {label: plt.get_cmap("tab10")(i % 10) for i, label in enumerate(labels)}
    dashes = {label: DASHES[i % len(DASHES)] for i, label in enumerate(labels)}
    markers = {label: MARKERS[i % len(MARKERS)] for i, label in enumerate(labels)}
    offsets = _offsets(labels)
    from matplotlib.ticker import MaxNLocator

    for ax, fam in zip(axes.flat, families):
        for label in labels:
            curve = report.curves[fam].get(label)
            if curve is None:
                continue
            if window > 1:
                curve = smoothed(curve, window)
            xs = [s + offsets[label] for s in curve.steps]
            every = max(1, math.ceil(len(xs) / MAX_MARKERS))
            ax.plot(xs, curve.median, color=colors[label], label=label, linewidth=1.5, linestyle=dashes[label],
                    marker=markers[label], markevery=(labels.index(label) % every, every), markersize=4,
                    markerfacecolor="none", markeredgewidth=1.1)
            ax.fill_between(xs, curve.q25, curve.q75, color=colors[label], alpha=0.15, linewidth=0)
        ax.set_title("all rewards (reward_mean)" if fam == "all" else f"reward: {fam}", fontsize=10)
        ax.set_xlabel("training step")
        ax.set_ylabel("reward")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(families):]:
        ax.set_visible(False)
    handles, names = [], []
    for ax in axes.flat:  # every row's entry, even one missing from the first panel
        for h, n in zip(*ax.get_legend_handles_labels()):
            if n not in names:
                handles.append(h)
                names.append(n)
    fig.legend(handles, names, loc="lower center", ncol=min(len(names), 4), frameon=False, handlelength=3.5)
    view = (f"smoothed: centred moving average over {window} steps" if window > 1 else "raw per-step values")
    shift = f"; rows offset by up to ±{OFFSET_SPAN / 2:g} step to stay visible" if len(labels) > 1 else ""
    title = f"{report.task}: training rewards, median over seeds (band: interquartile range), {view}{shift}"
    fig.suptitle("\n".join(textwrap.wrap(title, width=int(PANEL_W * cols * 13))), fontsize=10)
    legend_rows = math.ceil(len(names) / 4)
    bottom = min(0.3, (0.06 if nrows == 1 else 0.035) * (1 + legend_rows))
    fig.tight_layout(rect=(0, bottom, 1, 0.95))
    return fig


def report_window(report: TaskReport) -> int:
    """The smoothing window of a task's smoothed figure (from its longest curve)."""
    n_steps = max((len(c.steps) for per_row in report.curves.values() for c in per_row.values()), default=0)
    return smoothing_window(n_steps)


def draw_curves(report: TaskReport, out_dir: Path) -> dict[str, str]:
    """Write ``curves-<task>.png``/``.svg`` (raw) and ``curves-<task>-smoothed.png``/``.svg`` under
    ``out_dir``; returns ``png``, ``svg``, ``smoothed_png``, ``smoothed_svg`` -> file name (the
    smoothed files are left out for runs too short to smooth, :func:`report_window`)."""
    if not report.curves:
        return {}
    plt = _pyplot()
    window = report_window(report)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = file_stem(report.task)
    written: dict[str, str] = {}
    for prefix, suffix, w in (("", "", 1), ("smoothed_", "-smoothed", window)):
        if prefix and w == 1:
            continue
        fig = _figure(plt, report, w)
        for fmt in ("png", "svg"):
            path = out_dir / f"{stem}{suffix}.{fmt}"
            fig.savefig(path, format=fmt, dpi=110)
            written[prefix + fmt] = path.name
        plt.close(fig)
    return written
