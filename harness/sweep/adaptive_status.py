"""``mrbench sweep GRID --until-resolved --status``: per arm, the seeds run, the current interval on each
chosen metric, and whether the arm is resolved, or how many seeds it is expected to need.

The current interval is computed from the finished records now (it may be a round ahead of the last
recorded decision, while a round runs); resolved and stopped come from the recorded decisions. The
seeds expected are the fewest at which the interval would resolve if the spread and the mean
difference stayed as they are (:func:`harness.report.sequential.seeds_expected`).
"""

from __future__ import annotations

from pathlib import Path

from harness.report.numbers import num
from harness.report.sequential import METHOD, SEEDS_CAP, resolution, seeds_expected
from harness.sweep.adaptive import (
    MAX_SEEDS,
    RESOLVED,
    STATE_FILE,
    AdaptiveSettings,
    arm_values,
    arms_of,
    choose_metrics,
    interval,
    load_state,
    seeds_given,
)
from harness.sweep.grid import Cell, GridError, GridSpec


def _stopped(state: dict, key: str) -> tuple[int, str] | None:
    for rnd in state["rounds"]:
        d = rnd.get("decisions", {}).get(key)
        if d and d["stop"]:
            return rnd["round"], d["stop"]
    return None


def adaptive_status(spec: GridSpec, cells: list[Cell], settings: AdaptiveSettings, first: list[int]) -> str:
    arms, _ = arms_of(cells, settings.baseline)
    state = load_state(spec.root, settings, first, arms)
    if not state["rounds"]:
        state["rounds"] = [{"round": 1, "seeds": {k: list(first) for k in arms}, "decided": False}]
    metrics = state["metrics"]
    if not metrics:
        try:
            metrics = choose_metrics(state, arms)
        except GridError:
            metrics = []
    decided = sum(r["decided"] for r in state["rounds"])
    head = (f"adaptive sweep {spec.name} ({Path(spec.root) / STATE_FILE}): {decided} of {len(state['rounds'])} "
            f"rounds decided; baseline {settings.baseline}; effect ±{settings.effect:g}; at most "
            f"{settings.max_seeds} seeds per arm; rounds of {settings.round_size} after the first "
            f"({len(first)} seeds)")
    lines = [head, f"intervals: 95% {METHOD}, phi {state['phi']:.3g}"]
    for key, arm in arms.items():
        given = seeds_given(state, key)
        done = len(arm_values(arm, given))
        head = f"{key}: {done} of {len(given)} seeds finished"
        if not arm.baseline:
            lines.append(f"{head} (baseline)" if arm.algo == settings.baseline else f"{head} (no baseline arm)")
            continue
        parts, expected = [], []
        for metric in metrics:
            iv, _ = interval(arm, arms[arm.baseline], metric, state)
            text = f"{num(iv.diff, True)} [{num(iv.lo, True)}, {num(iv.hi, True)}]" if iv.n else "no pairs yet"
            parts.append(f"{metric} {text} (n={iv.n})")
            if resolution(iv, settings.effect) is None:
                expected.append(seeds_expected(iv, settings.effect, state["phi"], settings.alpha))
        stopped = _stopped(state, key)
        if stopped and stopped[1] == RESOLVED:
            verdict = f"resolved (round {stopped[0]})"
        elif stopped and stopped[1] == MAX_SEEDS:
            verdict = f"stopped unresolved at --max-seeds {settings.max_seeds} (round {stopped[0]})"
        elif not metrics:
            verdict = "open: first round not finished"
        elif not expected:
            verdict = "open: resolved by the finished seeds (decided when the round ends)"
        elif any(e is None for e in expected):
            verdict = "open: too few seeds for an estimate of the seeds needed"
        else:
            need = max(e for e in expected if e is not None)
            if need > SEEDS_CAP:
                verdict = f"open: over {SEEDS_CAP} seeds expected at this spread"
            elif need > settings.max_seeds:
                verdict = f"open: about {need} seeds expected, more than --max-seeds {settings.max_seeds}"
            else:
                verdict = f"open: about {need} seeds expected"
        lines.append(f"{head}; " + "; ".join(parts) + f"; {verdict}")
    return "\n".join(lines)
