"""Statistics over seeds, computed by scipy.stats and rliable (nothing hand-rolled but Holm's step-down).

- :func:`summarize`: mean, sample standard deviation, a 95% percentile-bootstrap interval of the mean
  (``scipy.stats.bootstrap``, seeds resampled), and the interquartile mean (``rliable.metrics.aggregate_iqm``)
  with its bootstrap interval;
- :func:`compare`: one row against another over the seeds both ran (matched by seed), or against a
  single value (the base model): the mean difference with its 95% t interval and p (paired t-test,
  ``scipy.stats.ttest_rel``; ``ttest_1samp`` against a value) and its percentile-bootstrap interval.
  What a difference rules out is read from the t interval: a bootstrap of the mean of 3 values never
  reaches beyond the largest of them, so at few seeds it claims more than it knows. Then the exact
  sign-flip permutation test
  (``scipy.stats.permutation_test``, every one of the 2^n sign patterns), the probability of
  improvement P(X > Y) over the paired seeds (``rliable.metrics.probability_of_improvement``) with a
  bootstrap interval resampling each side's seeds independently (rliable's scheme; the resamples use
  the same formula, vectorised), and the seeds a
  paired t-test would need to detect a chosen effect at 80% power (noncentral t, ``scipy.stats.nct``),
  and its inverse, the smallest effect the seeds there are detect at 80% power
  (:func:`smallest_detectable`, what the tables print);
- :func:`decide`: the verdicts of one family of comparisons (every row's comparison with the baseline
  in every column of a table, or every row's gain over the base model): Holm's correction of the
  permutation p-values over the whole family, and a verdict word only where the exact test can reach
  the corrected threshold with that many seeds (its smallest p with n pairs is 2/2^n: 0.25 with 3 seeds);
- :func:`aggregate_iqm`: a row's interquartile mean over seeds x columns with a stratified bootstrap
  interval (each column's seeds resampled on their own, as rliable's ``StratifiedBootstrap`` does;
  rliable's own needs the ``arch`` package, so scipy's resampler does it here).

Every bootstrap uses a generator seeded with :data:`SEED`, so a report is reproducible.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
from rliable import metrics as rl_metrics
from scipy import stats as sps
from scipy.optimize import brentq

LEVEL = 0.95
ALPHA = 0.05
POWER = 0.8
SEED = 0
RESAMPLES = 9999          # bootstrap resamples
MIN_SEEDS_FOR_SPREAD = 3  # below: no seeds-needed estimate
SEEDS_MAX = 1000
K = TypeVar("K", bound=Hashable)
METHOD = ("mean ± sample std [95% percentile bootstrap of the mean, scipy.stats.bootstrap, "
          f"{RESAMPLES} resamples, seeded]")


@dataclass(frozen=True)
class Summary:
    n: int
    mean: float
    std: float      # sample standard deviation (NaN below two seeds)
    lo: float       # 95% bootstrap interval of the mean (NaN below two seeds)
    hi: float
    iqm: float = math.nan
    iqm_lo: float = math.nan
    iqm_hi: float = math.nan


@dataclass(frozen=True)
class Comparison:
    n: int              # paired seeds (or seeds, against a single value)
    diff: float         # mean of (row - other) over them
    lo: float           # 95% t interval of that mean (what "rules out" reads)
    hi: float
    p_t: float          # paired t-test (one-sample against a value), two-sided
    p_perm: float       # exact sign-flip permutation test, two-sided
    p_min: float        # the smallest p the exact test can give with n pairs: 2 / 2^n
    prob: float         # P(row > other) over the paired seeds (ties count half)
    prob_lo: float
    prob_hi: float
    sd: float           # sample std of the paired differences
    effect: float       # the effect the seeds-needed figure is for
    seeds_needed: int | None  # None: fewer than MIN_SEEDS_FOR_SPREAD seeds (no estimate of the spread)
    verdict: str = ""
    p_holm: float = math.nan
    family: int = 1     # comparisons in the Holm family
    word: str | None = None  # "higher" / "lower" when a verdict is reached
    boot_lo: float = math.nan  # 95% percentile-bootstrap interval of the mean difference
    boot_hi: float = math.nan
    detectable: float | None = None  # the smallest effect a paired t-test detects at these n seeds (80% power)
    method: str = "t"   # "t": fixed-n intervals and the exact test; "cs": an adaptive sweep's confidence sequence


def _rng() -> np.random.Generator:
    return np.random.default_rng(SEED)


def _finite(x: float) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _iqm_axis(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return sps.trim_mean(x, 0.25, axis=axis)  # what rliable.metrics.aggregate_iqm computes, along an axis


def mean_interval(values: np.ndarray, statistic=np.mean) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    if len(values) < 2:
        return math.nan, math.nan
    if np.all(values == values[0]):
        return float(values[0]), float(values[0])
    res = sps.bootstrap((values,), statistic, n_resamples=RESAMPLES, confidence_level=LEVEL, method="percentile",
                        rng=_rng())
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def summarize(values: list[float]) -> Summary:
    xs = np.asarray(values, dtype=float)
    n = len(xs)
    if n == 0:
        return Summary(0, math.nan, math.nan, math.nan, math.nan)
    std = float(xs.std(ddof=1)) if n > 1 else math.nan
    lo, hi = mean_interval(xs)
    iqm = float(rl_metrics.aggregate_iqm(xs))
    iqm_lo, iqm_hi = mean_interval(xs, _iqm_axis)
    return Summary(n, float(xs.mean()), std, lo, hi, iqm, iqm_lo, iqm_hi)


def sign_flip_p(diffs: np.ndarray) -> float:
    """Two-sided p of the exact sign-flip permutation test of mean(diffs) = 0."""
    if len(diffs) == 0:
        return math.nan
    if len(diffs) == 1 or np.all(diffs == 0):  # one pair: both sign patterns are as extreme
        return 1.0
    res = sps.permutation_test((diffs,), np.mean, permutation_type="samples", n_resamples=np.inf,
                               alternative="two-sided", rng=_rng())
    return float(res.pvalue)


def t_test(values: np.ndarray, other: np.ndarray | float) -> tuple[float, float, float]:
    """Two-sided p and 95% interval of the mean difference: paired t-test (``ttest_rel``), or
    one-sample against a value (``ttest_1samp``)."""
    diffs = values - other
    if len(diffs) < 2:
        return math.nan, math.nan, math.nan
    if np.all(diffs == diffs[0]):  # no spread: the t statistic is 0/0 or infinite
        return (1.0 if diffs[0] == 0 else 0.0), float(diffs[0]), float(diffs[0])
    if isinstance(other, np.ndarray):
        res = sps.ttest_rel(values, other)
    else:  # on the differences, so that the interval is of the difference, not of the row's mean
        res = sps.ttest_1samp(diffs, 0.0)
    ci = res.confidence_interval(LEVEL)
    return float(res.pvalue), float(ci.low), float(ci.high)


def _prob_axis(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
    """rliable's P(X > Y) for one task (Mann-Whitney U / n_x n_y, ties half), along an axis of resamples."""
    a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
    gt = (a[..., :, None] > b[..., None, :]).mean(axis=(-2, -1))
    eq = (a[..., :, None] == b[..., None, :]).mean(axis=(-2, -1))
    return gt + 0.5 * eq


def probability_of_improvement(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """P(X > Y) (``rliable.metrics.probability_of_improvement``: over all pairs of seeds, ties half) and
    its bootstrap interval, each side's seeds resampled independently (one value: the row's only)."""
    p = float(rl_metrics.probability_of_improvement(x[:, None], y[:, None]))
    if len(x) < 2:
        return p, math.nan, math.nan
    if np.all(x == x[0]) and np.all(y == y[0]):
        return p, p, p
    if len(y) == 1:  # against one value (the base model)
        res = sps.bootstrap((x,), lambda a, axis=-1: _prob_axis(a, y, axis), n_resamples=RESAMPLES,
                            confidence_level=LEVEL, method="percentile", rng=_rng())
    else:
        res = sps.bootstrap((x, y), _prob_axis, n_resamples=RESAMPLES, confidence_level=LEVEL,
                            method="percentile", rng=_rng())
    return p, float(res.confidence_interval.low), float(res.confidence_interval.high)


def smallest_exact_p(n: int) -> float:
    return 2.0 / 2 ** n if n > 0 else math.nan


def seeds_for_exact_test(threshold: float) -> int:
    """The fewest pairs with which the exact sign-flip test can give p <= threshold."""
    n = 1
    while smallest_exact_p(n) > threshold:
        n += 1
    return n


def power_paired_t(n: int, effect: float, sd: float, alpha: float = ALPHA) -> float:
    """Power of the two-sided paired t-test with n pairs for a true mean difference ``effect``."""
    if sd == 0:
        return 1.0
    df = n - 1
    crit = sps.t.ppf(1 - alpha / 2, df)
    nc = abs(effect) / (sd / math.sqrt(n))
    return float(sps.nct.sf(crit, df, nc) + sps.nct.cdf(-crit, df, nc))


def seeds_needed(sd: float, effect: float, floor: int = 2, power: float = POWER) -> int | None:
    """Fewest seeds (at least ``floor``) at which a paired t-test at level ALPHA detects ``effect``
    with ``power``, given the paired differences' standard deviation ``sd``; SEEDS_MAX + 1 beyond."""
    if not (_finite(sd) and _finite(effect)) or effect == 0:
        return None
    for n in range(max(2, floor), SEEDS_MAX + 1):
        if power_paired_t(n, effect, sd) >= power:
            return n
    return SEEDS_MAX + 1


def smallest_detectable(n: int, sd: float, power: float = POWER, alpha: float = ALPHA) -> float | None:
    """The smallest true mean difference that a two-sided paired t-test at level ``alpha`` with ``n``
    pairs detects with ``power``, at the paired differences' standard deviation ``sd`` (the inverse
    of :func:`seeds_needed`: fixed seeds, solved for the effect); None below two pairs."""
    if n < 2 or not _finite(sd):
        return None
    if sd == 0:
        return 0.0
    hi = sd
    while power_paired_t(n, hi, sd, alpha) < power:
        hi *= 2
    return float(brentq(lambda e: power_paired_t(n, e, sd, alpha) - power, 0.0, hi, xtol=1e-12 * max(1.0, hi)))


def compare(values: dict[int, float], other: dict[int, float] | float, effect: float,
            min_seeds: int = 3, design=None) -> Comparison:
    """``values``: seed -> metric; ``other``: seed -> metric (only seeds in both count) or one value
    (the base model's, the same for every seed). With an adaptive sweep's ``design``
    (:class:`harness.report.sequential.Design`) the interval and p are its confidence sequence's."""
    if isinstance(other, dict):
        seeds = sorted(set(values) & set(other))
        ys: np.ndarray | float = np.asarray([other[s] for s in seeds], dtype=float)
    else:
        seeds = sorted(values)
        ys = float(other)
    xs = np.asarray([values[s] for s in seeds], dtype=float)
    n = len(xs)
    nan = math.nan
    if n == 0:
        return Comparison(0, nan, nan, nan, nan, nan, nan, nan, nan, nan, nan, effect, None, "no seeds in common")
    diffs = xs - ys
    boot_lo, boot_hi = mean_interval(diffs)
    sd = float(diffs.std(ddof=1)) if n > 1 else nan
    y_arr = ys if isinstance(ys, np.ndarray) else np.asarray([ys])
    prob, prob_lo, prob_hi = probability_of_improvement(xs, y_arr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        p_t, lo, hi = t_test(xs, ys)
    needed = seeds_needed(sd, effect) if n >= MIN_SEEDS_FOR_SPREAD else None
    detectable = smallest_detectable(n, sd) if n >= MIN_SEEDS_FOR_SPREAD else None
    comp = Comparison(n, float(diffs.mean()), lo, hi, p_t, sign_flip_p(diffs), smallest_exact_p(n), prob, prob_lo,
                      prob_hi, sd, effect, needed, boot_lo=boot_lo, boot_hi=boot_hi, detectable=detectable)
    if design is not None:
        from harness.report.sequential import as_sequential

        comp = as_sequential(comp, diffs, design)
    return replace(comp, verdict=f"too few seeds to tell (n={n})") if n < min_seeds else comp


def holm(pvalues: list[float]) -> list[float]:
    """Holm's step-down adjusted p-values (NaN entries stay NaN and do not count)."""
    order = sorted((p, i) for i, p in enumerate(pvalues) if _finite(p))
    m = len(order)
    adjusted = [math.nan] * len(pvalues)
    running = 0.0
    for rank, (p, i) in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def decide(comparisons: Mapping[K, Comparison], min_seeds: int = 3, family: str = "") -> dict[K, Comparison]:
    """Verdicts for one Holm family of comparisons: every comparison of one kind in one table (each
    row's difference from the baseline, or each row's gain over the base model, in every column;
    :func:`harness.report.tables.task_report`), those with a test (at least ``min_seeds`` pairs).
    ``family`` names it in each verdict (``comparisons with gdpo in this table``). The verdict word
    needs the Holm-adjusted p below ALPHA; where the exact test cannot reach ALPHA / m with n seeds,
    the verdict says so and how many seeds could. The seeds-needed figure becomes at least that many
    seeds too."""
    testable = [c for c, comp in comparisons.items() if comp.n >= min_seeds and _finite(comp.p_perm)]
    m = max(1, len(testable))
    adjusted = dict(zip(testable, holm([comparisons[c].p_perm for c in testable])))
    threshold = ALPHA / m
    floor = seeds_for_exact_test(threshold)
    named = f", Holm over {m}" + (f" {family}" if family else "") if m > 1 else ""
    out = {}
    for col, comp in comparisons.items():
        if comp.seeds_needed is not None and comp.method == "t":  # and the seeds the exact test needs
            comp = replace(comp, seeds_needed=max(comp.seeds_needed, floor))
        if col not in adjusted:
            out[col] = comp
            continue
        p_adj = adjusted[col]
        test = "anytime-valid p" if comp.method == "cs" else "exact p"
        if comp.p_min > threshold:
            verdict = (f"no verdict possible with {comp.n} seeds (exact p ≥ {comp.p_min:.3g}; "
                       f"{floor} seeds could reach {threshold:.3g}{named})")
            word = None
        elif p_adj < ALPHA and comp.diff != 0:
            word = "higher" if comp.diff > 0 else "lower"
            verdict = f"{word} ({test}={comp.p_perm:.3g}{named}: {p_adj:.3g})"
        else:
            word = None
            verdict = f"not distinguishable ({test}={comp.p_perm:.2g}{named}: {p_adj:.2g})"
        out[col] = replace(comp, verdict=verdict, p_holm=p_adj, family=m, word=word)
    return out


def aggregate_iqm(matrix: np.ndarray) -> tuple[float, float, float]:
    """Interquartile mean of a seeds x columns matrix (rliable) and its stratified bootstrap interval."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.size == 0:
        return math.nan, math.nan, math.nan
    point = float(rl_metrics.aggregate_iqm(matrix))
    if matrix.shape[0] < 2:
        return point, math.nan, math.nan
    if np.all(matrix == matrix[0]):
        return point, point, point
    columns = tuple(matrix[:, j] for j in range(matrix.shape[1]))

    def iqm_of_columns(*cols: np.ndarray, axis: int = -1) -> np.ndarray:
        stacked = np.stack([np.moveaxis(c, axis, -1) for c in cols], axis=-1)  # (..., seeds, columns)
        return _iqm_axis(stacked.reshape(*stacked.shape[:-2], -1))

    res = sps.bootstrap(columns, iqm_of_columns, n_resamples=RESAMPLES, confidence_level=LEVEL, method="percentile",
                        rng=_rng())
    return point, float(res.confidence_interval.low), float(res.confidence_interval.high)


def column_scale_point(values: list[float]) -> float:
    """One point of a column's scale: 0.01 for numbers within [-1, 1] (shares, accuracies), else a
    hundredth of the power of ten above the largest magnitude (0.1 for rewards up to 10)."""
    top = max((abs(v) for v in values if _finite(v)), default=0.0)
    if top <= 1.0:
        return 0.01
    return 10.0 ** math.ceil(math.log10(top)) / 100
