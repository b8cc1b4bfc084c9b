"""The concentration-curve figure of ``mrbench localize`` (paper Figure 6a, c).

A concentration curve gives, for the top fraction of a response's tokens (tokens taken in
decreasing order of a reward's replay distance), the mean share of that distance they hold. The
figure has one panel for all rewards together (every reward's mean curve in colour when there
are at most :data:`LEGEND_LINES` of them, in thin grey beyond, and the pooled curve in black),
then one small panel per reward type with its mean curve, the pooled curve dashed for reference
and, in the title, how many (response, reward) pairs it averages. In every panel the grey
diagonal is the uniform assignment of GDPO and the dotted line marks 80% of the distance.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

LEGEND_LINES = 8
COLUMNS = 4
FIRST_W, FIRST_H = 5.2, 4.0
PANEL_W, PANEL_H = 3.0, 2.5


def _frame(ax: Any, share: float) -> None:
    ax.plot([0, 100], [0, 100], color="0.6", linewidth=1.2, label="uniform (GDPO)")
    ax.axhline(100 * share, color="0.75", linestyle=":", linewidth=1)
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.25)


def draw(result: dict[str, Any], title: str) -> Any:
    """The matplotlib figure of :func:`harness.credit.report.analyse`'s curves (not saved)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = result["curves"]
    xs = [100 * x for x in curves["x"]]
    share = result["concentration"]["share"]
    counts = {f: v["n"] for f, v in result["concentration"]["by_reward"].items()}
    by_reward = curves["by_reward"]
    pooled = curves["pooled"]
    cols = max(2, min(COLUMNS, len(by_reward)))
    rows = math.ceil(len(by_reward) / cols)
    fig = plt.figure(figsize=(max(FIRST_W, PANEL_W * cols), FIRST_H + PANEL_H * rows), dpi=110)
    grid = fig.add_gridspec(1 + rows, cols, height_ratios=[FIRST_H] + [PANEL_H] * rows)
    ax = fig.add_subplot(grid[0, :2])
    _frame(ax, share)
    colour = len(by_reward) <= LEGEND_LINES
    for name, ys in by_reward.items():
        ax.plot(xs, [100 * y for y in ys], linewidth=1.3 if colour else 0.8, color=None if colour else "0.55",
                alpha=1.0 if colour else 0.6, label=name if colour else None)
    if not colour:
        ax.plot([], [], color="0.55", linewidth=0.8, label=f"each of {len(by_reward)} reward types")
    if pooled is not None:
        ax.plot(xs, [100 * y for y in pooled], color="black", linewidth=2.2, label="all rewards")
    ax.set_xlabel("top tokens of the response, %")
    ax.set_ylabel("share of the reward's replay distance, %")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    for i, (name, ys) in enumerate(by_reward.items()):
        sub = fig.add_subplot(grid[1 + i // cols, i % cols])
        _frame(sub, share)
        if pooled is not None:
            sub.plot(xs, [100 * y for y in pooled], color="black", linewidth=1, linestyle="--", alpha=0.6)
        sub.plot(xs, [100 * y for y in ys], color="tab:red", linewidth=1.6)
        sub.set_title(f"{name} (n={counts.get(name, '?')} pairs)", fontsize=8)
        sub.tick_params(labelsize=7)
    if by_reward:
        fig.text(0.5, 0.005, "small panels: one reward type each (red), all rewards dashed; n = (response, reward) "
                 "pairs averaged", ha="center", va="bottom", fontsize=7, color="0.3")
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    return fig


def concentration_figure(result: dict[str, Any], out: str | Path, title: str) -> Path:
    """Write the figure (PNG) of :func:`harness.credit.report.analyse`'s curves to ``out``."""
    import matplotlib.pyplot as plt

    fig = draw(result, title)
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
