"""The concentration-curve figure of ``mrbench localize`` (paper Figure 6a, c).

For each reward (one line per reward type, up to :data:`MAX_LINES`; beyond that only the pooled
curve), the mean share of the reward's replay distance held by the top fraction of a response's
tokens, tokens taken in decreasing order of distance. The grey diagonal is the uniform
assignment of GDPO; the dotted line marks 80% of the distance.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

MAX_LINES = 8


def concentration_figure(result: dict[str, Any], out: str | Path, title: str) -> Path:
    """Write the figure (PNG) of :func:`harness.credit.report.analyse`'s curves to ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curves = result["curves"]
    xs = [100 * x for x in curves["x"]]
    fig, ax = plt.subplots(figsize=(5.2, 4.0), dpi=120)
    ax.plot([0, 100], [0, 100], color="0.6", linewidth=1.5, label="uniform (GDPO)")
    ax.axhline(100 * result["concentration"]["share"], color="0.75", linestyle=":", linewidth=1)
    by_reward = curves["by_reward"]
    if len(by_reward) <= MAX_LINES:
        for name, ys in by_reward.items():
            ax.plot(xs, [100 * y for y in ys], linewidth=1.4, label=name)
    if curves["pooled"] is not None:
        ax.plot(xs, [100 * y for y in curves["pooled"]], color="black", linewidth=2.2, label="all rewards")
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 100)
    ax.set_xlabel("top tokens of the response, %")
    ax.set_ylabel("share of the reward's replay distance, %")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
