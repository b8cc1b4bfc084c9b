"""The credit-quality table of ``mrbench localize --algo``: where each method's token credit lands
against the tokens each reward's verifier read.

An *instance* is a (response, reward) pair whose reward varies within the response's group (only
those carry credit) and whose verifier read part of the response (its verdict's spans touch some
token but not every token that writes text: the pairs ``mrtpo-oracle`` moves credit on). For one
method and one instance, the credit profile is |A_k,t|, reward k's part of the token advantage
(the method's :meth:`~algorithms.base.Algorithm.contributions`; for a method that does not split
its advantage by reward, the token advantage itself). Then, as in the paper's Table 4:

- Dist.: the share of the profile on the read tokens; Tok.: the read tokens' share of the response;
- concentration = mean Dist. / mean Tok. over the instances: uniform credit (GDPO) gives 1 exactly,
  above 1 the credit concentrates on what the verifier read;
- rank correlation: Spearman's rho between the profile and the read mask (0 for a constant profile,
  which ranks no token above another);

pooled over every instance, and per reward family. An instance to which a method gives no credit at
all is left out of that method's figures (its n says how many remain).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.stats import rankdata

ALL = "all"
#: the figure's grid shades log2 of the concentration up to this far from 1x (2: 0.25x to 4x)
LOG2_SPAN = 2


def rank_correlation(profile: np.ndarray, read: np.ndarray) -> float:
    """Spearman's rho of a credit profile against a 0/1 read mask (average ranks for ties); 0 where
    either is constant."""
    if profile.size < 2 or np.ptp(profile) == 0 or np.ptp(read.astype(float)) == 0:
        return 0.0
    x, y = rankdata(profile), rankdata(read.astype(float))
    r = float(np.corrcoef(x, y)[0, 1])
    return r if math.isfinite(r) else 0.0


@dataclass
class Cell:
    """One method's instances in one scope (all rewards, or one family)."""

    dist: list[float] = field(default_factory=list)
    tok: list[float] = field(default_factory=list)
    corr: list[float] = field(default_factory=list)
    without_credit: int = 0

    def add(self, profile: np.ndarray, read: np.ndarray) -> None:
        total = float(profile.sum())
        if total <= 0.0:
            self.without_credit += 1
            return
        self.dist.append(float(profile[read].sum()) / total)
        self.tok.append(float(read.mean()))
        self.corr.append(rank_correlation(profile, read))

    def summary(self) -> dict[str, Any]:
        n = len(self.dist)
        if not n:
            return {"n": 0, "concentration": None, "dist_pct": None, "tok_pct": None, "rank_corr": None,
                    "without_credit": self.without_credit}
        dist, tok = float(np.mean(self.dist)), float(np.mean(self.tok))
        return {"n": n, "concentration": dist / tok if tok > 0 else None, "dist_pct": 100 * dist,
                "tok_pct": 100 * tok, "rank_corr": float(np.mean(self.corr)), "without_credit": self.without_credit}


def credit_quality(credit: dict[str, np.ndarray], read: np.ndarray, instances: np.ndarray,
                   families: Sequence[Sequence[str]], lengths: Sequence[int]) -> dict[str, Any]:
    """The table's figures (module docstring) as a JSON-ready dict.

    ``credit``: method -> |A_k,t| as float [B,K,T]; ``read`` bool [B,K,T]; ``instances`` bool [B,K];
    ``families[j][k]``: the family of response j's reward k; ``lengths[j]``: its valid tokens."""
    methods = list(credit)
    cells: dict[tuple[str, str], Cell] = defaultdict(Cell)
    per_family: dict[str, int] = defaultdict(int)
    for j, k in zip(*np.nonzero(instances)):
        n = int(lengths[j])
        family = families[j][k]
        per_family[family] += 1
        mask = read[j, k, :n]
        for m in methods:
            profile = np.abs(credit[m][j, k, :n]).astype(np.float64)
            cells[(m, ALL)].add(profile, mask)
            cells[(m, family)].add(profile, mask)
    order = sorted(per_family)
    return {"methods": methods, "instances": int(instances.sum()),
            "pooled": {m: cells[(m, ALL)].summary() for m in methods},
            "by_family": {f: {"instances": per_family[f], **{m: cells[(m, f)].summary() for m in methods}}
                          for f in order}}


def _num(value: float | None, digits: int) -> str:
    return "\u2013" if value is None else f"{value:.{digits}f}"


def markdown(result: dict[str, Any], heading: str) -> str:
    """The pooled table and the per-family concentrations, under ``heading``."""
    methods = result["methods"]
    pooled = result["pooled"]
    lines = [f"# Where each method's token credit lands\n\n{heading}\n",
             (f"{result['instances']} (response, reward) instances: the reward varies within the response's "
             "group and its verifier read part of the response. Concentration = mean share of the reward's "
             "|credit| on the tokens its verifier read / mean share of those tokens (the paper's Table 4 "
             "ratio; uniform credit, GDPO, gives 1). Rank corr.: Spearman's rho between |credit| and the "
             "read mask (0 for uniform credit).\n"),
             "## Pooled over rewards\n",
             "| method | concentration (x uniform) | \\|credit\\| on read tokens % | read tokens % | rank corr. | n |",
             "|---|---:|---:|---:|---:|---:|"]
    for m in methods:
        s = pooled[m]
        lines.append(f"| {m} | {_num(s['concentration'], 2)} | {_num(s['dist_pct'], 1)} | {_num(s['tok_pct'], 1)} "
                     f"| {_num(s['rank_corr'], 3)} | {s['n']} |")
    lines += ["", "## Per reward family: concentration (x uniform)\n",
              "| family | n | " + " | ".join(methods) + " |", "|---|---:|" + "---:|" * len(methods)]
    for family, row in result["by_family"].items():
        lines.append(f"| {family} | {row['instances']} | "
                     + " | ".join(_num(row[m]["concentration"], 2) for m in methods) + " |")
    return "\n".join(lines) + "\n"


def csv_text(result: dict[str, Any]) -> str:
    """Every figure in long form: one line per (method, scope), scope ``all`` or a family."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["method", "scope", "concentration", "dist_pct", "tok_pct", "rank_corr", "n", "without_credit"])
    rows = [(m, ALL, result["pooled"][m]) for m in result["methods"]]
    rows += [(m, f, row[m]) for f, row in result["by_family"].items() for m in result["methods"]]
    for method, scope, s in rows:
        out.writerow([method, scope] + ["" if s[k] is None else f"{s[k]:.6f}" for k in
                                        ("concentration", "dist_pct", "tok_pct", "rank_corr")]
                     + [s["n"], s["without_credit"]])
    return buf.getvalue()


def figure(result: dict[str, Any], out: Any, title: str) -> None:
    """The pooled concentration per method (bars, uniform at 1) and the per-family concentrations
    (a grid, methods by families, shaded by log2 of the concentration between 0.25x and 4x, the
    number written in each cell), as a PNG at ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = result["methods"]
    families = list(result["by_family"])
    pooled = [result["pooled"][m]["concentration"] or 0.0 for m in methods]
    grid = np.array([[result["by_family"][f][m]["concentration"] if result["by_family"][f][m]["concentration"]
                      is not None else np.nan for f in families] for m in methods], dtype=float)
    width = 4.5 + 0.45 * max(len(families), 4)
    fig, (left, right) = plt.subplots(1, 2, figsize=(width, 1.2 + 0.45 * len(methods) + 1.5),
                                      gridspec_kw={"width_ratios": [1.0, max(1.0, 0.25 * len(families))]})
    y = np.arange(len(methods))
    left.barh(y, pooled, color=["0.6" if abs(v - 1.0) < 1e-9 else "tab:blue" for v in pooled])
    left.axvline(1.0, color="black", linestyle="--", linewidth=1)
    left.set_yticks(y, methods, fontsize=8)
    left.invert_yaxis()
    left.set_xlabel("concentration on read tokens (x uniform)", fontsize=8)
    left.set_title("pooled over rewards", fontsize=9)
    for i, v in enumerate(pooled):
        left.text(v, i, f" {v:.2f}", va="center", fontsize=7)
    if not families:  # no instance: nothing to shade
        right.axis("off")
        right.text(0.5, 0.5, "no (response, reward) instance", ha="center", va="center", fontsize=9)
        fig.suptitle(title, fontsize=9)
        fig.savefig(out)
        plt.close(fig)
        return
    with np.errstate(divide="ignore"):
        shade = np.log2(np.where(grid > 0, grid, 1 / 2 ** LOG2_SPAN))  # 0.25x and 4x are the ends
    image = right.imshow(shade, cmap="RdBu_r", vmin=-LOG2_SPAN, vmax=LOG2_SPAN, aspect="auto")
    right.set_yticks(y, methods, fontsize=8)
    right.set_xticks(np.arange(len(families)), families, rotation=60, ha="right", fontsize=7)
    right.set_title("per reward family (blue: below uniform, red: above)", fontsize=9)
    for i in range(len(methods)):
        for jj in range(len(families)):
            if np.isfinite(grid[i, jj]):
                dark = abs(float(shade[i, jj])) > 0.6 * LOG2_SPAN
                right.text(jj, i, f"{grid[i, jj]:.2f}", ha="center", va="center", fontsize=6,
                           color="white" if dark else "black")
    bar = fig.colorbar(image, ax=right, fraction=0.03)
    ticks = np.arange(-LOG2_SPAN, LOG2_SPAN + 1)
    bar.set_ticks(ticks, labels=[f"{2.0 ** t:g}x" for t in ticks])
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
