"""Statistics over seeds: summaries with bootstrap intervals, and seed-paired comparisons.

- :func:`summarize`: mean, sample standard deviation, and a 95% percentile-bootstrap interval of
  the mean (seeds resampled with replacement; a fixed generator, so a report is reproducible);
- :func:`compare`: an algorithm against the baseline over the seeds both ran (matched by seed):
  the mean difference, its bootstrap interval, a two-sided paired t-test, and an exact paired
  sign-flip permutation test. Below ``min_seeds`` paired seeds the verdict is "too few seeds to tell".

The t distribution's CDF uses the closed forms for integer degrees of freedom (Abramowitz and
Stegun 26.7.3-4), so nothing beyond numpy is needed.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95
BOOTSTRAP_DRAWS = 4000
ALPHA = 0.05
EXACT_PERMUTATION_MAX_N = 14  # 2^14 sign patterns; above, a Monte Carlo sample of them


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    std: float   # sample standard deviation (NaN for one seed)
    lo: float    # 95% bootstrap interval of the mean (NaN for one seed)
    hi: float


@dataclass(frozen=True)
class Comparison:
    n: int             # paired seeds
    diff: float        # mean of (algorithm - baseline) over paired seeds
    lo: float
    hi: float
    p_t: float         # paired t-test, two-sided
    p_perm: float      # paired sign-flip permutation test, two-sided
    verdict: str


def _rng(values: np.ndarray) -> np.random.Generator:
    return np.random.default_rng(len(values) * 7919 + 17)


def bootstrap_interval(values: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return math.nan, math.nan
    idx = _rng(values).integers(0, len(values), size=(BOOTSTRAP_DRAWS, len(values)))
    means = values[idx].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return float(lo), float(hi)


def summarize(values: list[float]) -> Summary:
    xs = np.asarray(values, dtype=float)
    n = len(xs)
    if n == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan)
    std = float(xs.std(ddof=1)) if n > 1 else math.nan
    lo, hi = bootstrap_interval(xs)
    return Summary(n, float(xs.mean()), std, lo, hi)


def t_two_sided_p(t: float, dof: int) -> float:
    """P(|T| >= |t|) for Student's t with integer ``dof`` >= 1."""
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 0.0
    theta = math.atan(abs(t) / math.sqrt(dof))
    c2, s = math.cos(theta) ** 2, math.sin(theta)
    if dof % 2 == 1:
        total, term = 0.0, 1.0
        for k in range(1, (dof - 1) // 2 + 1):
            total += term
            term *= c2 * (2 * k) / (2 * k + 1)
        inside = (2 / math.pi) * (theta + (s * math.cos(theta) * total if dof > 1 else 0.0))
    else:
        total, term = 0.0, 1.0
        for k in range(1, dof // 2 + 1):
            total += term
            term *= c2 * (2 * k - 1) / (2 * k)
        inside = s * total
    return min(1.0, max(0.0, 1.0 - inside))


def paired_t_p(diffs: np.ndarray) -> float:
    n = len(diffs)
    if n < 2:
        return math.nan
    sd = float(diffs.std(ddof=1))
    mean = float(diffs.mean())
    if sd == 0.0:
        return 1.0 if mean == 0.0 else 0.0
    return t_two_sided_p(mean / (sd / math.sqrt(n)), n - 1)


def sign_flip_p(diffs: np.ndarray) -> float:
    """Share of sign patterns whose mean is at least as far from 0 as the observed one."""
    n = len(diffs)
    if n == 0:
        return math.nan
    observed = abs(diffs.mean()) - 1e-12
    if n <= EXACT_PERMUTATION_MAX_N:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
    else:
        signs = _rng(diffs).choice((1.0, -1.0), size=(20000, n))
    return float((np.abs((signs * diffs).mean(axis=1)) >= observed).mean())


def compare(values: dict[int, float], baseline: dict[int, float], min_seeds: int = 3) -> Comparison:
    """``values`` and ``baseline`` map seed -> metric; only seeds present in both are compared."""
    seeds = sorted(set(values) & set(baseline))
    diffs = np.asarray([values[s] - baseline[s] for s in seeds], dtype=float)
    n = len(diffs)
    if n == 0:
        return Comparison(0, math.nan, math.nan, math.nan, math.nan, math.nan, "no seeds in common")
    lo, hi = bootstrap_interval(diffs)
    p_t, p_perm = paired_t_p(diffs), sign_flip_p(diffs)
    diff = float(diffs.mean())
    if n < min_seeds:
        verdict = f"too few seeds to tell (n={n})"
    elif p_t < ALPHA:
        verdict = f"{'higher' if diff > 0 else 'lower'} (p={p_t:.3g})"
    else:
        verdict = f"not distinguishable (p={p_t:.2g})"
    return Comparison(n, diff, lo, hi, p_t, p_perm, verdict)
