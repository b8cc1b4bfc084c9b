"""The localisation analysis of replayed credit rows: paper Table 4, concentration, correlation.

Input: credit rows (:mod:`harness.training.credit_rows`) whose pairs were replayed. Per (response, reward)
instance with a distance profile q:

- Table 4 (instances whose checker read some token and whose profile has some distance): per
  reward family (constraint type) and per verdict (satisfied / violated), Dist. % and Tok. % are
  the means over instances of :func:`harness.credit.stats.part_share`, Ratio = Dist. / Tok., n
  the instances; a cell with fewer than five instances shows "–". Two pooled rows, all satisfied
  and all violated, follow.
- Concentration (every instance with distance): the mean share of tokens holding 80% of the
  reward's distance, per reward family and pooled, and the mean concentration curve.
- Correlation: the mean Pearson r between the profiles of two different rewards on the same
  response, over every such pair.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from harness.credit.stats import concentration_curve, pairwise_correlations, part_share, tokens_for_share
from harness.training.credit_rows import read_flags

MIN_INSTANCES = 5
SHARE = 0.8
DASH = "\u2013"
SATISFIED, VIOLATED = "satisfied", "violated"


@dataclass
class Cell:
    dist: list[float] = field(default_factory=list)
    tok: list[float] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        n = len(self.dist)
        if not n:
            return {"n": 0, "dist_pct": None, "tok_pct": None, "ratio": None}
        dist, tok = float(np.mean(self.dist)), float(np.mean(self.tok))
        return {"n": n, "dist_pct": 100 * dist, "tok_pct": 100 * tok, "ratio": dist / tok if tok > 0 else None}


def analyse(rows: Sequence[dict[str, Any]], points: int = 50) -> dict[str, Any]:
    """Every figure of the analysis as a JSON-ready dict (see the module docstring)."""
    cells: dict[tuple[str, str], Cell] = defaultdict(Cell)
    share80: dict[str, list[float]] = defaultdict(list)
    curves: dict[str, list[list[float]]] = defaultdict(list)
    correlations: list[float] = []
    counts = {"responses": len(rows), "pairs": 0, "replayed": 0, "no_distance": 0, "nothing_read": 0}
    for row in rows:
        n = len(row["tokens"])
        profiles = []
        for entry in row["rewards"]:
            if entry.get("value") is None:
                continue
            counts["pairs"] += 1
            q = entry.get("q")
            if q is None:
                continue
            counts["replayed"] += 1
            profiles.append(q)
            family = entry["family"]
            concentrated = tokens_for_share(q, SHARE)
            if concentrated is None:
                counts["no_distance"] += 1
                continue
            share80[family].append(concentrated)
            curves[family].append(concentration_curve(q, points))
            shares = part_share(q, read_flags(entry, n))
            if shares is None:
                counts["nothing_read"] += 1
                continue
            status = SATISFIED if entry["satisfied"] else VIOLATED
            for key in ((family, status), ("", status)):
                cells[key].dist.append(shares[0])
                cells[key].tok.append(shares[1])
        correlations += pairwise_correlations(profiles)
    families = sorted({f for f, _ in cells if f} | set(share80))
    table = [{"type": f, SATISFIED: cells[(f, SATISFIED)].summary(), VIOLATED: cells[(f, VIOLATED)].summary()}
             for f in families]
    pooled = {status: cells[("", status)].summary() for status in (SATISFIED, VIOLATED)}
    all_share = [v for vals in share80.values() for v in vals]
    all_curves = [c for cs in curves.values() for c in cs]
    return {
        "counts": counts, "table4": table, "pooled": pooled, "min_instances": MIN_INSTANCES,
        "concentration": {"share": SHARE,
                          "by_reward": {f: {"n": len(v), "tokens_pct": 100 * float(np.mean(v))}
                                        for f, v in sorted(share80.items())},
                          "pooled": {"n": len(all_share),
                                     "tokens_pct": 100 * float(np.mean(all_share)) if all_share else None}},
        "curves": {"x": [i / points for i in range(points + 1)],
                   "by_reward": {f: np.mean(cs, axis=0).tolist() for f, cs in sorted(curves.items())},
                   "pooled": np.mean(all_curves, axis=0).tolist() if all_curves else None},
        "correlation": {"pairs": len(correlations),
                        "mean_r": float(np.mean(correlations)) if correlations else None},
    }


def _num(value: float | None, digits: int) -> str:
    return DASH if value is None else f"{value:.{digits}f}"


def _cells(s: dict[str, Any]) -> list[str]:
    if s["n"] < MIN_INSTANCES:
        return [DASH, DASH, DASH, str(s["n"])]
    return [_num(s["dist_pct"], 1), _num(s["tok_pct"], 1), _num(s["ratio"], 2), str(s["n"])]


def markdown(result: dict[str, Any], heading: str) -> str:
    """The tables as Markdown, under ``heading`` (the settings of the run)."""
    head = ("| type | satisfied Dist. % | Tok. % | Ratio | n | violated Dist. % | Tok. % | Ratio | n |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    body = "".join(f"| {r['type']} | " + " | ".join(_cells(r[SATISFIED]) + _cells(r[VIOLATED])) + " |\n"
                   for r in result["table4"])
    pooled = result["pooled"]
    empty = [""] * 4
    body += "| **all satisfied** | " + " | ".join(_cells(pooled[SATISFIED]) + empty) + " |\n"
    body += "| **all violated** | " + " | ".join(empty + _cells(pooled[VIOLATED])) + " |\n"
    conc = result["concentration"]
    ctab = "| reward | tokens holding 80% of the distance, % | n |\n|---|---:|---:|\n"
    ctab += "".join(f"| {f} | {_num(v['tokens_pct'], 1)} | {v['n']} |\n" for f, v in conc["by_reward"].items())
    ctab += f"| **all** | {_num(conc['pooled']['tokens_pct'], 1)} | {conc['pooled']['n']} |\n"
    corr = result["correlation"]
    c = result["counts"]
    return (f"# Where the replay distance falls\n\n{heading}\n\n"
            f"{c['responses']} responses, {c['pairs']} (response, reward) pairs, {c['replayed']} replayed; "
            f"{c['no_distance']} with no distance and {c['nothing_read']} whose checker read no token are "
            f"left out of Table 4.\n\n"
            "## Table 4: distance on the part the checker reads\n\n"
            "Dist.: share of the reward's replay distance on the tokens its checker read; Tok.: those "
            f"tokens' share of the response; Ratio = Dist. / Tok. (1 = uniform). {DASH}: fewer than "
            f"{MIN_INSTANCES} instances.\n\n" + head + body +
            "\n## Concentration\n\n" + ctab +
            f"\nMean correlation between different rewards' distance profiles on the same response: "
            f"{_num(corr['mean_r'], 3)} over {corr['pairs']} pairs.\n")


def csv_text(result: dict[str, Any]) -> str:
    """Table 4 in long form: one line per (type, verdict), numbers unrounded, with the pooled rows."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["type", "verdict", "dist_pct", "tok_pct", "ratio", "n", "fewer_than_5"])
    lines = [(r["type"], status, r[status]) for r in result["table4"] for status in (SATISFIED, VIOLATED)]
    lines += [("all", status, result["pooled"][status]) for status in (SATISFIED, VIOLATED)]
    for name, status, s in lines:
        out.writerow([name, status, "" if s["dist_pct"] is None else f"{s['dist_pct']:.4f}",
                      "" if s["tok_pct"] is None else f"{s['tok_pct']:.4f}",
                      "" if s["ratio"] is None else f"{s['ratio']:.4f}", s["n"], s["n"] < MIN_INSTANCES])
    return buf.getvalue()
