"""The adaptive sweep's intervals (harness.report.sequential, savvi's anytime-valid t confidence
sequence) under its stopping rule, by simulation on the seed-to-seed spreads of the committed
reference records.

- Under the null (two identical arms) the rule's "different" verdicts stay at or below 5% (plus
  Monte-Carlo error), looked at after every round of the real rule, and after every seed.
- The control: an ordinary paired t interval looked at after every seed says "different" far more
  often than 5% on the same draws (the test can fail).
- Under a shifted alternative the rule stops earlier on average than the fixed seed count with the
  same power (at 24 seeds at most and a shift of 1.2 standard deviations; at 12 seeds at most, and
  at powers near 80%, the fixed count is the smaller one: docs/adaptive-sweeps.md).

The simulations run thousands of sweeps at once with a vectorised copy of savvi's formula (numpy);
the first test checks that copy against savvi itself.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from harness.report.sequential import ALPHA, MIN_SEEDS, confidence_sequence, prior_scale
from harness.report.stats import power_paired_t

REFERENCES = Path(__file__).resolve().parents[1] / "results" / "reference"
SWEEPS = 4000
MC = 3 * math.sqrt(ALPHA * (1 - ALPHA) / SWEEPS)  # three Monte-Carlo standard errors at 5%


def cs_batch(x: np.ndarray, phi: float, alpha: float = ALPHA) -> tuple[np.ndarray, np.ndarray]:
    """savvi's confidence sequence for every row of x (sweeps x seeds), at every prefix: the
    intercept-only t-test of Lindon et al. with n - 2 degrees of freedom, intersected over prefixes."""
    sweeps, seeds = x.shape
    n = np.arange(1, seeds + 1)
    mean = np.cumsum(x, 1) / n
    ss = np.cumsum(x * x, 1) - n * mean ** 2
    lo, hi = np.full((sweeps, seeds), -np.inf), np.full((sweeps, seeds), np.inf)
    run_lo, run_hi = np.full(sweeps, -np.inf), np.full(sweeps, np.inf)
    for k in range(seeds):
        nk = k + 1
        if nk >= MIN_SEEDS:
            nu = nk - 2
            se = np.sqrt(np.maximum(ss[:, k], 0) / (nk - 1) / nk)
            r = phi / (phi + nk)
            q = (r * alpha ** 2) ** (1 / (nu + 1))
            radius = se * math.sqrt(nu * (1 - q) / (q - r)) if q > r else np.full(sweeps, np.inf)
            run_lo = np.maximum(run_lo, mean[:, k] - radius)
            run_hi = np.minimum(run_hi, mean[:, k] + radius)
        lo[:, k], hi[:, k] = run_lo, run_hi
    return lo, hi


def reference_spreads() -> list[float]:
    """The std of the paired seed differences from gdpo, per arm and benchmark number, in the
    committed reference comparisons."""
    import json

    spreads = []
    for ref in sorted(REFERENCES.glob("ifollow-smollm2*")):
        values: dict[str, dict[int, dict[str, float]]] = {}
        for ev in ref.glob("ifollow/*/*/seed*/eval.json"):
            algo, seed = ev.parts[-4], int(ev.parts[-2].removeprefix("seed"))
            bench = json.loads(ev.read_text())["benchmarks"]
            values.setdefault(algo, {})[seed] = {f"{b}/{k}": v for b, res in bench.items()
                                                 for k, v in res.get("summary", {}).items()
                                                 if isinstance(v, float) and k.endswith("_level")}
        for algo, per_seed in values.items():
            if algo == "gdpo":
                continue
            seeds = sorted(set(per_seed) & set(values.get("gdpo", {})))
            for col in per_seed[seeds[0]] if seeds else []:
                diffs = [per_seed[s][col] - values["gdpo"][s][col] for s in seeds]
                spreads.append(float(np.std(diffs, ddof=1)))
    return spreads


@pytest.fixture(scope="module")
def spreads():
    found = reference_spreads()
    if len(found) < 4:
        pytest.skip("no committed reference records")
    return np.asarray(found)


def rule(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, looks: list[int], effect: float):
    """The adaptive sweep's rule on each row: at each look (seeds so far) stop when the interval
    excludes 0 or is at most ±effect wide. Returns (said different, seeds at stopping)."""
    sweeps = x.shape[0]
    stopped = np.zeros(sweeps, bool)
    different = np.zeros(sweeps, bool)
    seeds = np.full(sweeps, looks[-1])
    for n in looks:
        excl = (lo[:, n - 1] > 0) | (hi[:, n - 1] < 0)
        narrow = (hi[:, n - 1] - lo[:, n - 1]) / 2 <= effect
        now = ~stopped & (excl | narrow | (n == looks[-1]))
        different |= now & excl
        seeds[now] = n
        stopped |= now
    return different, seeds


def t_looked_at_every_seed(x: np.ndarray, first: int = 2) -> np.ndarray:
    """An ordinary 95% paired t interval after every seed: ever excluding 0."""
    n = np.arange(1, x.shape[1] + 1)
    mean = np.cumsum(x, 1) / n
    with np.errstate(all="ignore"):
        sd = np.sqrt((np.cumsum(x * x, 1) - n * mean ** 2) / (n - 1))
        half = stats.t.ppf(1 - ALPHA / 2, n - 1) * sd / np.sqrt(n)
    ever = np.zeros(x.shape[0], bool)
    for k in range(first - 1, x.shape[1]):
        ever |= np.abs(mean[:, k]) > half[:, k]
    return ever


def test_the_vectorised_copy_is_savvis_confidence_sequence():
    rng = np.random.default_rng(7)
    phi = prior_scale(12)
    x = rng.normal(0.01, 0.02, (25, 12))
    lo, hi = cs_batch(x, phi)
    for row, a, b in zip(x, lo[:, -1], hi[:, -1]):
        iv = confidence_sequence(row, phi)
        assert iv.lo == pytest.approx(a, rel=1e-6, abs=1e-9) and iv.hi == pytest.approx(b, rel=1e-6, abs=1e-9)


def test_under_the_null_the_rule_says_different_at_most_five_percent_and_peeking_t_does_not(spreads):
    rng = np.random.default_rng(2026)
    sd = rng.choice(spreads, SWEEPS)[:, None]
    x = rng.standard_normal((SWEEPS, 12)) * sd              # two identical arms: differences centred on 0
    lo, hi = cs_batch(x, prior_scale(12))
    different, _ = rule(x, lo, hi, looks=[4, 6, 8, 10, 12], effect=0.01)   # the reference's rule
    assert different.mean() <= ALPHA + MC
    every_seed, _ = rule(x, lo, hi, looks=list(range(2, 13)), effect=0.0)  # every seed, no narrow stop
    assert every_seed.mean() <= ALPHA + MC
    peeking = t_looked_at_every_seed(x)                     # the control: the same draws, a t interval
    assert peeking.mean() > ALPHA + MC
    assert peeking.mean() > 2 * ALPHA                        # about 18%: not a near miss


def test_under_a_shift_the_rule_stops_earlier_on_average_than_the_fixed_count_with_its_power():
    rng = np.random.default_rng(11)
    shift, max_seeds = 1.2, 24                               # in units of the differences' std
    x = rng.standard_normal((SWEEPS, max_seeds)) + shift
    lo, hi = cs_batch(x, prior_scale(max_seeds))
    detected, seeds = rule(x, lo, hi, looks=list(range(4, max_seeds + 1, 2)), effect=0.0)
    power = detected.mean()
    assert power > 0.9
    fixed = next(n for n in range(2, 1000) if power_paired_t(n, shift, 1.0) >= power)
    assert seeds.mean() < fixed - 2, (seeds.mean(), fixed, power)
