"""Intervals that stay valid when seeds are added until the answer is known (``mrbench sweep --until-resolved``).

An adaptive sweep looks at its paired seed differences after every round and stops an arm once its
interval excludes 0 or is narrow enough. A fixed-n t interval looked at that way covers less than
it says (looked at after every seed up to 12, a "different" verdict under no difference comes
about 18% of the time, not 5%). These intervals are confidence sequences: valid at every number of
seeds at once, so any stopping rule, and any number of looks, keeps their 95%.

Method: the anytime-valid t-test of Lindon, Ham, Tingley and Bojinov ("Anytime-valid linear models
and regression adjusted causal inference in randomized experiments", 2024), computed by the
``savvi`` package (``savvi.LinearRegression``, one intercept, fed the paired differences in seed
order). It assumes normal differences with an unknown spread (the paired t-test's model), which
fits seed-to-seed differences of benchmark accuracies over hundreds of items; it needs no bound on
the values and no known variance. Why this library and not another: docs/adaptive-sweeps.md.

- :func:`confidence_sequence`: the interval after the differences seen so far (the running
  intersection over every prefix, as savvi keeps it) and its anytime-valid p-value;
- :func:`prior_scale`: the mixture's scale ``phi``, fixed by the design alone (the most seeds an arm
  may get): the value that makes the interval narrowest at that many seeds;
- :func:`halfwidth`: the half-width the library gives n differences of a given spread (what the
  "seeds expected" figure projects);
- :func:`seeds_expected`: the fewest seeds at which an arm's interval would resolve at the spread and
  mean difference seen so far.
"""

from __future__ import annotations

import json
import math
import warnings
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

ALPHA = 0.05
STATE_FILE = "adaptive.json"  # an adaptive sweep's state, in its root (harness.sweep.adaptive)
MIN_SEEDS = 3          # savvi's t-test has n - 2 degrees of freedom: no finite interval below 3 differences
SEEDS_CAP = 1000       # seeds_expected's search stops here
METHOD = ("anytime-valid t confidence sequence (Lindon et al. 2024, savvi.LinearRegression on the paired "
          "differences; valid under any stopping rule and any number of looks)")


@dataclass(frozen=True)
class SequentialInterval:
    n: int          # paired differences
    diff: float     # their mean
    lo: float       # 95% confidence sequence at n (-inf/inf below MIN_SEEDS)
    hi: float
    p: float        # anytime-valid p-value (the smallest over the prefixes; 1 below MIN_SEEDS)
    sd: float       # sample std of the differences (NaN below 2)

    @property
    def halfwidth(self) -> float:
        return (self.hi - self.lo) / 2


def _model(alpha: float, phi: float):
    try:
        from savvi.linear_regression import LinearRegression
    except ImportError as exc:  # installed by scripts/setup.sh (--no-deps: its cvxpy is for another module)
        raise ImportError("the adaptive sweep's intervals need the savvi package (pip install --no-deps "
                          "savvi==0.3.1 py-markdown-table; scripts/setup.sh installs it)") from exc
    return LinearRegression(alpha, 1, phi)


def confidence_sequence(diffs: list[float] | np.ndarray, phi: float, alpha: float = ALPHA) -> SequentialInterval:
    """The confidence sequence after ``diffs`` (in seed order) and its anytime-valid p-value."""
    xs = np.asarray(diffs, dtype=float)
    n = len(xs)
    mean = float(xs.mean()) if n else math.nan
    sd = float(xs.std(ddof=1)) if n > 1 else math.nan
    if n >= MIN_SEEDS and np.all(xs == xs[0]):  # no spread: the t statistic is 0/0 or infinite
        if not math.isfinite(halfwidth(n, 1.0, phi, alpha)):  # no finite interval at n seeds, whatever the spread
            return SequentialInterval(n, mean, -math.inf, math.inf, 1.0, 0.0)
        # the interval's limit as the spread goes to 0: the point, as narrow as the design allows
        return SequentialInterval(n, mean, mean, mean, 1.0 if mean == 0 else 0.0, 0.0)
    model = _model(alpha, phi)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # savvi divides by 0 where the radius is infinite
        for x in xs:
            model.update(np.array([x, 1.0]))
            model.infer()
    lo, hi = (float(v) for v in model.conf_int[0])
    return SequentialInterval(n, mean, lo, hi, float(min(1.0, model.p_value[0])), sd)


def halfwidth(n: int, sd: float, phi: float, alpha: float = ALPHA) -> float:
    """The library's half-width for n differences whose sample std is ``sd`` (at that n alone, not
    intersected with earlier ones): n evenly spaced values scaled to that std, fed to savvi."""
    if n < MIN_SEEDS:
        return math.inf
    if sd == 0:
        return 0.0
    z = np.arange(n, dtype=float)
    z = (z - z.mean()) / z.std(ddof=1) * sd
    model = _model(alpha, phi)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        for x in z:
            model.update(np.array([x, 1.0]))
        lo, hi = model.calculate_conf_int()[0]
    return float((hi - lo) / 2)


@lru_cache(maxsize=64)
def prior_scale(max_seeds: int, alpha: float = ALPHA) -> float:
    """The mixture scale ``phi`` that makes the interval narrowest at ``max_seeds`` differences (a
    design choice made before any data, as avlm's ``optimal_g`` makes it; searched on a log grid)."""
    if max_seeds < MIN_SEEDS:
        raise ValueError(f"--max-seeds {max_seeds}: the adaptive intervals need at least {MIN_SEEDS} seeds")
    grid = np.exp(np.linspace(math.log(1e-3), math.log(1e3), 121))
    widths = [halfwidth(max_seeds, 1.0, float(phi), alpha) for phi in grid]
    return float(grid[int(np.argmin(widths))])


def resolution(iv: SequentialInterval, effect: float) -> str | None:
    """Why the interval settles the comparison: it excludes 0, or it is at most ±effect wide; None if neither."""
    if not (math.isfinite(iv.lo) and math.isfinite(iv.hi)):
        return None
    if iv.lo > 0 or iv.hi < 0:
        return "excludes 0"
    if iv.halfwidth <= effect:
        return f"within ±{effect:g}"
    return None


def seeds_expected(iv: SequentialInterval, effect: float, phi: float, alpha: float = ALPHA) -> int | None:
    """The fewest seeds (more than ``iv.n``) at which the interval, at the spread and mean difference
    seen so far, would be at most ±effect wide or exclude 0; None without a spread (fewer than 2
    differences), SEEDS_CAP + 1 beyond the cap."""
    if not math.isfinite(iv.sd):
        return None
    target = max(effect, abs(iv.diff) * (1 - 1e-9))
    n = max(MIN_SEEDS, iv.n + 1)
    if halfwidth(SEEDS_CAP, iv.sd, phi, alpha) > target:
        return SEEDS_CAP + 1
    lo, hi = n, SEEDS_CAP  # the half-width shrinks with n: bisect for the first n that reaches the target
    while lo < hi:
        mid = (lo + hi) // 2
        if halfwidth(mid, iv.sd, phi, alpha) <= target:
            hi = mid
        else:
            lo = mid + 1
    return lo


@dataclass(frozen=True)
class Design:
    """What an adaptive sweep's report needs of its design: the prior scale and how often it looked."""

    phi: float
    looks: int          # the rounds whose decisions were taken
    max_seeds: int
    alpha: float = ALPHA

    @property
    def statement(self) -> str:
        looks = "once, after its one round" if self.looks == 1 else f"after each of its {self.looks} rounds"
        return (f"95% {METHOD}, prior scale {self.phi:.3g} (fixed by --max-seeds {self.max_seeds}); the sweep looked "
                f"{looks}")


def read_design(root: str | Path) -> Design | None:
    """The design of the adaptive sweep whose root is ``root`` (None: not an adaptive sweep's root)."""
    path = Path(root) / STATE_FILE
    if not path.is_file():
        return None
    state = json.loads(path.read_text(encoding="utf-8"))
    looks = sum(bool(r.get("decided")) for r in state.get("rounds", []))
    settings = state["settings"]
    return Design(float(state["phi"]), looks, int(settings["max_seeds"]), float(settings["alpha"]))


def as_sequential(comp, diffs: np.ndarray, design: Design):
    """A report comparison (:class:`harness.report.stats.Comparison`) with its interval and p replaced by
    the confidence sequence's (differences in seed order); its verdict then reads the anytime-valid p
    (Holm over a row's columns, as the exact test's), which any number of seeds can reach."""
    if comp.n < 1:
        return comp
    iv = confidence_sequence(diffs, design.phi, design.alpha)
    needed = seeds_expected(iv, comp.effect, design.phi, design.alpha) if comp.n >= 2 else None
    return replace(comp, lo=iv.lo, hi=iv.hi, p_perm=iv.p, p_min=0.0, seeds_needed=needed, detectable=None,
                   method="cs")
