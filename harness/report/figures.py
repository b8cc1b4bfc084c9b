"""Learning curves: one figure per task, one panel per reward family, one line per row (median
over seeds) with its interquartile band; written as PNG and SVG (matplotlib, Agg backend)."""

from __future__ import annotations

import math
from pathlib import Path

from harness.report.tables import TaskReport

PANEL_W, PANEL_H = 4.2, 3.0
MAX_COLUMNS = 3


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


def draw_curves(report: TaskReport, out_dir: Path) -> dict[str, str]:
    """Write ``curves-<task>.png`` and ``.svg`` under ``out_dir``; returns format -> file name."""
    if not report.curves:
        return {}
    plt = _pyplot()
    families = list(report.curves)
    cols = min(MAX_COLUMNS, len(families))
    nrows = math.ceil(len(families) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(PANEL_W * cols, PANEL_H * nrows), squeeze=False)
    labels = sorted({label for per_row in report.curves.values() for label in per_row})
    colors = {label: plt.get_cmap("tab10")(i % 10) for i, label in enumerate(labels)}
    for ax, fam in zip(axes.flat, families):
        for label, curve in report.curves[fam].items():
            ax.plot(curve.steps, curve.median, color=colors[label], label=label, linewidth=1.6,
                    marker="o" if len(curve.steps) < 12 else None, markersize=3)
            ax.fill_between(curve.steps, curve.q25, curve.q75, color=colors[label], alpha=0.2, linewidth=0)
        ax.set_title("all rewards (reward_mean)" if fam == "all" else f"reward: {fam}", fontsize=10)
        ax.set_xlabel("training step")
        ax.set_ylabel("reward")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(families):]:
        ax.set_visible(False)
    handles, names = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=min(len(names), 4), frameon=False)
    fig.suptitle(f"{report.task}: training rewards, median over seeds (band: interquartile range)", fontsize=11)
    fig.tight_layout(rect=(0, 0.08 if nrows == 1 else 0.05, 1, 0.95))
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = file_stem(report.task)
    written = {}
    for fmt in ("png", "svg"):
        path = out_dir / f"{stem}.{fmt}"
        fig.savefig(path, format=fmt, dpi=110)
        written[fmt] = path.name
    plt.close(fig)
    return written
