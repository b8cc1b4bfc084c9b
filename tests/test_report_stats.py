"""The report's statistics against scipy.stats and rliable, computed here independently on fixed
per-seed values (the same seeded bootstraps): intervals, p-values, probability of improvement,
interquartile means, seeds needed; Holm's correction by hand; and the verdict rule (no verdict
word where the exact test cannot reach the threshold with that many seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from rliable import metrics as rl
from scipy import stats as sps

from harness.report import stats as S

ALGO = {0: 0.651, 1: 0.645, 2: 0.656, 3: 0.660, 4: 0.641}
BASELINE = {0: 0.648, 1: 0.642, 2: 0.655, 3: 0.650, 4: 0.649}
SEEDS = sorted(ALGO)
X = np.array([ALGO[s] for s in SEEDS])
Y = np.array([BASELINE[s] for s in SEEDS])


def _boot(data, statistic, **kw):
    res = sps.bootstrap(data, statistic, n_resamples=9999, confidence_level=0.95, method="percentile",
                        rng=np.random.default_rng(0), **kw)
    return res.confidence_interval.low, res.confidence_interval.high


def test_summary_interval_and_iqm_are_scipys_and_rliables():
    s = S.summarize(list(X))
    assert s.n == 5 and s.mean == pytest.approx(X.mean()) and s.std == pytest.approx(X.std(ddof=1))
    assert (s.lo, s.hi) == pytest.approx(_boot((X,), np.mean))
    assert s.iqm == pytest.approx(rl.aggregate_iqm(X))
    assert (s.iqm_lo, s.iqm_hi) == pytest.approx(_boot((X,), lambda a, axis=-1: sps.trim_mean(a, 0.25, axis=axis)))
    one = S.summarize([0.5])
    assert one.n == 1 and math.isnan(one.std) and math.isnan(one.lo)


def test_paired_comparison_matches_the_libraries():
    c = S.compare(ALGO, BASELINE, effect=0.01)
    d = X - Y
    assert c.n == 5 and c.diff == pytest.approx(d.mean()) and c.sd == pytest.approx(d.std(ddof=1))
    t = sps.ttest_rel(X, Y)
    assert c.p_t == pytest.approx(t.pvalue) and (c.lo, c.hi) == pytest.approx(tuple(t.confidence_interval()))
    assert (c.boot_lo, c.boot_hi) == pytest.approx(_boot((d,), np.mean))
    assert c.boot_lo >= d.min() and c.boot_hi <= d.max()  # why "rules out" reads the t interval
    exact = sps.permutation_test((X, Y), lambda a, b, axis=-1: np.mean(a - b, axis=axis), permutation_type="samples",
                                 n_resamples=np.inf)
    assert c.p_perm == pytest.approx(exact.pvalue) and c.p_min == pytest.approx(2 / 2 ** 5)
    assert c.prob == pytest.approx(rl.probability_of_improvement(X[:, None], Y[:, None]))

    def prob(a, b, axis=-1):  # rliable's statistic, resample by resample
        a, b = np.moveaxis(a, axis, -1), np.moveaxis(b, axis, -1)
        return np.array([rl.probability_of_improvement(u[:, None], v[:, None])
                         for u, v in zip(a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1]))]).reshape(a.shape[:-1])

    assert (c.prob_lo, c.prob_hi) == pytest.approx(_boot((X, Y), prob))


def test_against_one_value_the_base_model():
    base = 0.584
    c = S.compare(ALGO, base, effect=0.01)
    assert c.diff == pytest.approx(X.mean() - base)
    t = sps.ttest_1samp(X, base)
    ci = t.confidence_interval()  # scipy's is of the mean of X
    assert c.p_t == pytest.approx(t.pvalue) and (c.lo, c.hi) == pytest.approx((ci.low - base, ci.high - base))
    assert (c.boot_lo, c.boot_hi) == pytest.approx(_boot((X - base,), np.mean))
    assert c.p_perm == pytest.approx(2 / 2 ** 5)  # every seed above the base: only the identity and full flip
    assert c.prob == 1.0


def _power(n, effect, sd):
    crit = sps.t.ppf(0.975, n - 1)
    nc = effect / (sd / np.sqrt(n))
    return sps.nct.sf(crit, n - 1, nc) + sps.nct.cdf(-crit, n - 1, nc)


@pytest.mark.parametrize("effect", [0.01, 0.02])
def test_seeds_needed_is_the_first_n_with_80_percent_power(effect):
    c = S.compare(ALGO, BASELINE, effect=effect)
    sd = (X - Y).std(ddof=1)
    n = c.seeds_needed
    assert _power(n, effect, sd) >= 0.8 and (n == 2 or _power(n - 1, effect, sd) < 0.8)
    decided = S.decide({"col": c})["col"]
    assert decided.seeds_needed == max(n, 6)  # and the exact test needs 2/2^n <= 0.05: 6 seeds


def test_fewer_than_three_seeds_give_no_seeds_needed():
    c = S.compare({0: 0.6, 1: 0.7}, {0: 0.5, 1: 0.55}, effect=0.01)
    assert c.seeds_needed is None and c.verdict == "too few seeds to tell (n=2)"


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 -> 3*0.01, max(0.03, 2*0.03), max(0.06, 1*0.04)
    assert S.holm([0.04, 0.01, 0.03, math.nan]) == pytest.approx([0.06, 0.03, 0.06, math.nan], nan_ok=True)


def test_no_verdict_word_where_the_exact_test_cannot_reach_the_threshold():
    three = S.compare({0: 0.70, 1: 0.71, 2: 0.72}, {0: 0.60, 1: 0.60, 2: 0.61}, effect=0.01)
    assert three.p_t < 0.01  # a t-test would call it
    v = S.decide({"a": three})["a"]
    assert v.word is None and v.verdict.startswith("no verdict possible with 3 seeds (exact p ≥ 0.25")
    seven = {s: 0.7 + s / 1000 for s in range(7)}
    base7 = {s: 0.6 + (s % 3) / 1000 for s in range(7)}
    alone = S.decide({"a": S.compare(seven, base7, 0.01)})["a"]
    assert alone.word == "higher" and alone.p_holm == pytest.approx(2 / 2 ** 7)
    # over 8 columns Holm asks 0.05 / 8 of the smallest p: 7 seeds (2/128 = 0.0156) cannot give it
    family = S.decide({f"c{i}": S.compare(seven, base7, 0.01) for i in range(8)})
    assert all(c.word is None and "9 seeds could reach 0.00625" in c.verdict for c in family.values())


def test_stratified_iqm_over_seeds_and_columns():
    matrix = np.array([[0.1, 0.5, 0.9], [0.2, 0.4, 0.8], [0.3, 0.6, 0.7], [0.25, 0.45, 0.95]])
    point, lo, hi = S.aggregate_iqm(matrix)
    assert point == pytest.approx(rl.aggregate_iqm(matrix))

    def iqm(*cols, axis=-1):  # each column's seeds resampled on their own (rliable's StratifiedBootstrap)
        stacked = np.stack([np.moveaxis(c, axis, -1) for c in cols], axis=-1)
        return np.array([rl.aggregate_iqm(m) for m in stacked.reshape(-1, *stacked.shape[-2:])]
                        ).reshape(stacked.shape[:-2])

    assert (lo, hi) == pytest.approx(_boot(tuple(matrix.T), iqm))


@pytest.mark.parametrize("values,point", [([0.2, 0.9], 0.01), ([-3.0, 2.5], 0.1), ([40.0], 1.0)])
def test_one_point_of_a_columns_scale(values, point):
    assert S.column_scale_point(values) == pytest.approx(point)


def test_holm_agrees_with_statsmodels():
    multitest = pytest.importorskip("statsmodels.stats.multitest")
    ps = [0.25, 0.5, 0.0156, 0.03125, 0.75, 0.0625, 1.0, 0.125]
    expected = multitest.multipletests(ps, alpha=0.05, method="holm")[1]
    assert S.holm(ps) == pytest.approx(list(expected))
