"""Where a reward's replay distance falls on one response (paper Table 4 and Figure 6).

An *instance* is one (response, reward) pair with its distance profile q_t (the relevance of
Eq. 5 at every response token) and the tokens its checker read (:mod:`harness.token_align`).

- Dist.: the share of the total distance on the tokens read, sum_{t read} q_t / sum_t q_t.
- Tok.: the share of the tokens that were read.
- Ratio: Dist. / Tok. A profile that puts the same distance on every token gives Dist. = Tok.,
  a ratio of 1 (the uniform assignment of GDPO); above 1, the distance concentrates on what the
  checker read.
- Concentration: the smallest share of the tokens, taken in decreasing order of distance, that
  holds a given share (80%) of the total distance (uniform: 80%).
- Correlation: Pearson's r between the profiles of two different rewards on the same response.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def _profile(q: Sequence[float]) -> np.ndarray:
    arr = np.asarray(q, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"a distance profile is one value per token, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError("a distance profile must be finite at every token")
    return np.clip(arr, 0.0, None)


def part_share(q: Sequence[float], read: Sequence[bool]) -> tuple[float, float] | None:
    """(Dist., Tok.) as fractions for one instance; None when it has no token, no distance, or no
    token read (the share of a part that is not there is undefined)."""
    arr = _profile(q)
    inside = np.asarray(read, dtype=bool)
    if inside.shape != arr.shape:
        raise ValueError(f"{arr.shape[0]} distances but {inside.shape[0]} read flags")
    total = float(arr.sum())
    if arr.size == 0 or total <= 0.0 or not inside.any():
        return None
    return float(arr[inside].sum()) / total, float(inside.mean())


def tokens_for_share(q: Sequence[float], share: float = 0.8) -> float | None:
    """The smallest fraction of the tokens whose distances add up to ``share`` of the total
    (None without distance)."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"share must be in (0, 1], got {share}")
    arr = _profile(q)
    total = float(arr.sum())
    if arr.size == 0 or total <= 0.0:
        return None
    cumulative = np.cumsum(np.sort(arr)[::-1]) / total
    needed = int(np.searchsorted(cumulative, share - 1e-12)) + 1
    return min(needed, arr.size) / arr.size


def concentration_curve(q: Sequence[float], points: int = 50) -> list[float] | None:
    """Share of the distance held by the top ``x`` of the tokens, at ``x = 0, 1/points, ..., 1``
    (linear between tokens; the diagonal for a uniform profile). None without distance."""
    arr = _profile(q)
    total = float(arr.sum())
    if arr.size == 0 or total <= 0.0:
        return None
    cumulative = np.concatenate([[0.0], np.cumsum(np.sort(arr)[::-1]) / total])
    xs = np.linspace(0.0, 1.0, points + 1)
    return [float(v) for v in np.interp(xs * arr.size, np.arange(arr.size + 1), cumulative)]


def correlation(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Pearson's r of two profiles over the same tokens (None when either is constant)."""
    x, y = _profile(a), _profile(b)
    if x.shape != y.shape:
        raise ValueError(f"profiles of different lengths: {x.size} and {y.size}")
    if x.size < 2 or float(x.std()) == 0.0 or float(y.std()) == 0.0:
        return None
    r = float(np.corrcoef(x, y)[0, 1])
    return r if math.isfinite(r) else None


def pairwise_correlations(profiles: Sequence[Sequence[float]]) -> list[float]:
    """r of every pair of different rewards' profiles on one response (constant ones left out)."""
    out = []
    for i in range(len(profiles)):
        for j in range(i + 1, len(profiles)):
            r = correlation(profiles[i], profiles[j])
            if r is not None:
                out.append(r)
    return out
