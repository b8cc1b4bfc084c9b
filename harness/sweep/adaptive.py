"""``mrbench sweep GRID --until-resolved``: seeds in rounds until each arm's comparison is resolved.

An arm is a grid cell less its seed (``ifollow/mrtpo/smollm2-135m``). The first round runs the
seeds the grid lists, for every arm (and the grid's base cells); each later round gives the arms
still open ``--round-size`` more seeds (the next integers), and the baseline arm of their model the
same seeds. After each round every open arm is compared with its baseline arm on the chosen metrics
(end-of-run benchmark numbers, paired by seed) with an anytime-valid confidence sequence
(:mod:`harness.report.sequential`). An arm stops when every metric's interval excludes 0 or is at
most ±``--effect`` wide (resolved), or when it has ``--max-seeds`` seeds. A stopped arm gets no
more seeds; the sweep ends when every arm has stopped.

The state is ``ROOT/adaptive.json``: the settings, the mixture scale, the metrics, and per round
the seeds it gave each arm and, once its cells finished, the decisions taken (each arm's intervals,
whether it stopped and why). A killed sweep rerun with the same command finishes the round in
progress and takes the recorded decisions as they are: they are replayed, never recomputed, so a
resumed sweep makes the decisions an uninterrupted one would have made. Other settings than the
recorded ones are refused (the intervals' validity rests on a design fixed in advance).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from harness.records import RecordError, atomic_write_json, config_identity, read_json
from harness.report.collect import eval_numbers
from harness.report.sequential import (
    ALPHA,
    METHOD,
    MIN_SEEDS,
    STATE_FILE,
    confidence_sequence,
    prior_scale,
    resolution,
)
from harness.sweep.grid import Cell, GridError, GridSpec
from harness.sweep.status import FINISHED, cell_state

RESOLVED, MAX_SEEDS = "resolved", "max seeds"
#: the most --max-seeds allows
MAX_SEEDS_LIMIT = 100


@dataclass(frozen=True)
class AdaptiveSettings:
    baseline: str = "gdpo"
    metrics: tuple[str, ...] = ()   # empty: every end-of-run benchmark number the first round's records have
    effect: float = 0.01
    max_seeds: int = 12
    round_size: int = 2
    alpha: float = ALPHA

    def check(self) -> None:
        if not (self.effect > 0 and math.isfinite(self.effect)):
            raise GridError(f"--effect {self.effect}: must be a positive number")
        if self.max_seeds < MIN_SEEDS:
            raise GridError(f"--max-seeds {self.max_seeds}: the intervals need at least {MIN_SEEDS} seeds")
        if self.round_size < 1:
            raise GridError(f"--round-size {self.round_size}: must be at least 1")
        if self.max_seeds > MAX_SEEDS_LIMIT:
            raise GridError(f"--max-seeds {self.max_seeds}: at most {MAX_SEEDS_LIMIT} (each seed is a training run "
                            f"of every open arm, and every cell the sweep may run is expanded and checked before "
                            f"its first round)")
        for metric in self.metrics:
            bench, _, key = metric.partition("/")
            if not bench or not key:
                raise GridError(f"--metric {metric!r}: expected BENCH/KEY (an end-of-run benchmark and one of its "
                                f"numbers, e.g. ifollow-heldout/instruction_level)")


@dataclass
class Arm:
    key: str                      # the record path without seed<N>
    algo: str
    cells: dict[int, Cell]        # seed -> cell
    baseline: str | None = None   # its baseline arm's key (None: it is one, or has none)


def grid_seeds(spec: GridSpec) -> list[int]:
    """The first round's seeds: the grid's ``seed`` axis (or its one ``set`` seed)."""
    values = spec.axes.get("seed", [spec.set.get("seed", 0)])
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        raise GridError(f"{spec.path}: grid.seed: --until-resolved needs integer seeds, got {values!r}")
    return sorted(values)


def with_seeds(spec: GridSpec, max_seeds: int) -> tuple[GridSpec, list[int]]:
    """The grid with its seed axis extended to ``max_seeds`` seeds (the next integers after the
    largest listed), and the first round's seeds."""
    first = grid_seeds(spec)
    if len(first) > max_seeds:
        raise GridError(f"{spec.path}: the grid lists {len(first)} seeds, more than --max-seeds {max_seeds}")
    seeds = first + list(range(max(first) + 1, max(first) + 1 + max_seeds - len(first)))
    return replace(spec, axes={**spec.axes, "seed": seeds}), first


def arms_of(cells: list[Cell], baseline: str) -> tuple[dict[str, Arm], list[Cell]]:
    """The training cells grouped into arms (each non-baseline arm paired with the baseline arm of
    its task and model), and the base cells."""
    arms: dict[str, Arm] = {}
    base = [c for c in cells if c.kind == "base"]
    for cell in cells:
        if cell.kind == "base":
            continue
        key = Path(cell.id).parent.as_posix()
        arms.setdefault(key, Arm(key, cell.cfg.algo.name, {})).cells[cell.cfg.seed] = cell
    for arm in arms.values():
        if arm.algo == baseline:
            continue
        same = [a for a in arms.values() if a.algo == baseline and _task_model(a) == _task_model(arm)]
        if len(same) > 1:
            raise GridError(f"arm {arm.key}: {len(same)} {baseline} arms on its task and model "
                            f"({', '.join(a.key for a in same)}); --until-resolved compares with one")
        arm.baseline = same[0].key if same else None
    if not any(a.baseline for a in arms.values()):
        raise GridError(f"--baseline {baseline}: no arm to compare with it (arms: {', '.join(arms)})")
    return arms, base


def _task_model(arm: Arm) -> tuple[str, str]:
    cfg = next(iter(arm.cells.values())).cfg
    return cfg.task.name, cfg.model.name


# ---------------------------------------------------------------------------------------------
# state


def new_state(settings: AdaptiveSettings, first: list[int]) -> dict[str, Any]:
    return {"method": METHOD, "settings": {**asdict(settings), "metrics": list(settings.metrics)},
            "phi": prior_scale(settings.max_seeds, settings.alpha), "first_seeds": first,
            "metrics": list(settings.metrics), "rounds": []}


def load_state(root: str | Path, settings: AdaptiveSettings, first: list[int],
               arms: dict[str, Arm] | None = None) -> dict[str, Any]:
    """The recorded state, or a new one; other settings than the recorded ones, a damaged state and
    (given ``arms``) a grid whose arms differ from the ones the sweep started with are refused."""
    path = Path(root) / STATE_FILE
    if not path.exists():
        state = new_state(settings, first)
        if arms is not None:
            state["arms"] = {key: arm_identity(arm) for key, arm in arms.items()}
        return state
    try:
        state = read_json(path)
    except RecordError as exc:
        raise GridError(f"{exc}; {DAMAGED_HINT}") from exc
    check_state(state, path)
    want = {**asdict(settings), "metrics": list(settings.metrics)}
    if state.get("settings") != want or state.get("first_seeds") != first:
        had = {**state.get("settings", {}), "first seeds": state.get("first_seeds")}
        raise GridError(f"{path}: this adaptive sweep ran with {had}; now asked for "
                        f"{ {**want, 'first seeds': first} }: rerun with the recorded settings, or give a "
                        f"fresh --root (its intervals are valid only for the design it started with)")
    if arms is not None:
        check_arms(state, arms, path)
    return state


DAMAGED_HINT = ("restore it (an adaptive sweep's decisions cannot be recomputed from its records), or give a "
                "fresh --root")


def check_state(state: Any, path: Path) -> None:
    """Refuse (one line naming the file and the key) a state that is not the shape this module writes."""
    def bad(what: str) -> GridError:
        return GridError(f"{path}: damaged: {what}; {DAMAGED_HINT}")

    if not isinstance(state, dict):
        raise bad("not a JSON object")
    for key, kind in (("settings", dict), ("first_seeds", list), ("metrics", list), ("rounds", list),
                      ("phi", (int, float))):
        if not isinstance(state.get(key), kind) or isinstance(state.get(key), bool):
            raise bad(f"{key!r} is {state.get(key)!r}")
    for i, rnd in enumerate(state["rounds"]):
        where = f"rounds[{i}]"
        if not isinstance(rnd, dict) or not isinstance(rnd.get("seeds"), dict) or \
                not isinstance(rnd.get("decided"), bool) or not isinstance(rnd.get("round"), int):
            raise bad(f"{where} is not a round (round, seeds, decided)")
        for key, seeds in rnd["seeds"].items():
            if not isinstance(seeds, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in seeds):
                raise bad(f"{where}.seeds.{key} is {seeds!r}")
        decisions = rnd.get("decisions", {})
        if not isinstance(decisions, dict) or not all(isinstance(d, dict) and "stop" in d for d in decisions.values()):
            raise bad(f"{where}.decisions is not a mapping of decisions")


def arm_identity(arm: Arm) -> dict[str, Any]:
    """What an arm computes: its first cell's configuration without the seed and the record paths."""
    cell = arm.cells[min(arm.cells)]
    config = json.loads(cell.cfg.to_json())
    config.pop("seed", None)
    config.get("output", {}).pop("dir", None)
    config.get("output", {}).pop("root", None)
    return config


def check_arms(state: dict[str, Any], arms: dict[str, Arm], path: Path) -> None:
    """The arms the sweep started with (``state['arms']``, recorded when it first ran) against the
    grid's now: an arm added or dropped, or one whose settings changed, is refused, naming it. A
    state written before arms were recorded gets them now."""
    recorded = state.get("arms")
    if recorded is None:
        state["arms"] = {key: arm_identity(arm) for key, arm in arms.items()}
        return
    added, dropped = sorted(set(arms) - set(recorded)), sorted(set(recorded) - set(arms))
    if added or dropped:
        what = "; ".join(part for part in (f"added {', '.join(added)}" if added else "",
                                           f"dropped {', '.join(dropped)}" if dropped else "") if part)
        raise GridError(f"{path}: the grid's arms changed since this adaptive sweep started ({what}): put the grid "
                        f"back as it was, or give a fresh --root for the new design")
    for key, arm in arms.items():
        differ = changed_keys(config_identity(recorded[key]), config_identity(arm_identity(arm)))
        if differ:
            raise GridError(f"{path}: arm {key}: the grid changed {', '.join(differ[:3])} since this adaptive sweep "
                            f"started: put the grid back as it was, or give a fresh --root for the new design")


def changed_keys(a: Any, b: Any, where: str = "") -> list[str]:
    """The dotted keys whose values differ between two config dicts (``a`` -> ``b``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            out += changed_keys(a.get(key), b.get(key), f"{where}.{key}".strip("."))
        return out
    return [] if a == b else [f"{where} ({a!r} -> {b!r})"]


def save_state(root: str | Path, state: dict[str, Any]) -> None:
    atomic_write_json(Path(root) / STATE_FILE, state)


def open_arms(state: dict[str, Any], arms: dict[str, Arm]) -> list[str]:
    """The non-baseline arms not stopped by a recorded decision."""
    stopped = {key for rnd in state["rounds"] for key, d in rnd.get("decisions", {}).items() if d["stop"]}
    return [key for key, arm in arms.items() if arm.baseline and key not in stopped]


def seeds_given(state: dict[str, Any], key: str) -> list[int]:
    return sorted({s for rnd in state["rounds"] for s in rnd["seeds"].get(key, [])})


def plan_round(state: dict[str, Any], arms: dict[str, Arm], settings: AdaptiveSettings) -> dict[str, Any] | None:
    """The next round's seeds per arm (None: every arm has stopped)."""
    if not state["rounds"]:
        seeds = {key: list(state["first_seeds"]) for key in arms}
        return {"round": 1, "seeds": seeds, "decided": False}
    todo = open_arms(state, arms)
    if not todo:
        return None
    seeds: dict[str, list[int]] = {}
    for key in todo:
        had = seeds_given(state, key)
        more = [s for s in sorted(arms[key].cells) if s not in had][:settings.round_size]
        if more:
            seeds[key] = more
            base = arms[key].baseline
            seeds[base] = sorted(set(seeds.get(base, [])) | {s for s in more if s not in seeds_given(state, base)})
    if not seeds:
        return None
    return {"round": len(state["rounds"]) + 1, "seeds": {k: v for k, v in seeds.items() if v}, "decided": False}


def round_cells(rnd: dict[str, Any], arms: dict[str, Arm], base: list[Cell]) -> list[Cell]:
    cells = list(base) if rnd["round"] == 1 else []
    for key, seeds in rnd["seeds"].items():
        cells += [arms[key].cells[s] for s in seeds]
    return cells


# ---------------------------------------------------------------------------------------------
# decisions


def cell_values(cell: Cell) -> dict[str, float]:
    """The cell's end-of-run benchmark numbers (``bench/key``), from its finished record."""
    path = cell.record_dir / "eval.json"
    return eval_numbers(read_json(path)) if path.exists() else {}


def arm_values(arm: Arm, seeds: list[int]) -> dict[int, dict[str, float]]:
    return {s: cell_values(arm.cells[s]) for s in seeds if cell_state(arm.cells[s]).state == FINISHED}


def interval(arm: Arm, base: Arm, metric: str, state: dict[str, Any]):
    """The confidence sequence of ``arm`` − ``base`` on ``metric`` over the seeds both have finished."""
    mine = arm_values(arm, seeds_given(state, arm.key))
    theirs = arm_values(base, seeds_given(state, base.key))
    seeds = [s for s in sorted(mine) if s in theirs and metric in mine[s] and metric in theirs[s]]
    diffs = [mine[s][metric] - theirs[s][metric] for s in seeds]
    return confidence_sequence(diffs, state["phi"], state["settings"]["alpha"]), seeds


def check_metric_benchmarks(metrics: tuple[str, ...] | list[str], arms: dict[str, Arm]) -> None:
    """Refuse a ``--metric`` whose benchmark is not an end-of-run benchmark of every arm (before any
    cell runs: an interval on a number no record has never resolves)."""
    from harness.preflight import preflight

    planned: dict[str, set[str]] = {}
    for key, arm in arms.items():
        planned[key] = set(preflight(arm.cells[min(arm.cells)].cfg, environment=False).benchmarks)
    for metric in metrics:
        bench = metric.partition("/")[0]
        lacking = [key for key, names in planned.items() if bench not in names]
        if lacking:
            have = sorted(set.intersection(*planned.values())) if planned else []
            raise GridError(f"--metric {metric}: {bench!r} is not an end-of-run benchmark of {lacking[0]}; the "
                            f"arms' common benchmarks: {', '.join(have) or '(none)'}")


def check_metric_keys(state: dict[str, Any], arms: dict[str, Arm]) -> None:
    """After the first round: refuse a ``--metric`` that none of its finished records has."""
    have = sorted({m for arm in arms.values() for v in arm_values(arm, state["first_seeds"]).values() for m in v})
    missing = [m for m in state["metrics"] if m not in have]
    if have and missing:
        raise GridError(f"--metric {missing[0]}: no record of the first round has it; their numbers: "
                        f"{', '.join(have)}")


def choose_metrics(state: dict[str, Any], arms: dict[str, Arm]) -> list[str]:
    """Every benchmark number all of the first round's finished training cells have (sorted)."""
    sets = [set(v) for arm in arms.values() for v in arm_values(arm, state["first_seeds"]).values()]
    common = sorted(set.intersection(*sets)) if sets else []
    if not common:
        raise GridError("--until-resolved: the first round's records share no end-of-run benchmark number to "
                        "compare on (give --metric BENCH/KEY)")
    return common


def decide(state: dict[str, Any], arms: dict[str, Arm], rnd: dict[str, Any]) -> dict[str, Any]:
    """The decisions after ``rnd``: for every open arm, its intervals and whether it stops."""
    settings = state["settings"]
    decisions = {}
    for key in open_arms(state, arms):
        arm, base = arms[key], arms[arms[key].baseline]
        per_metric, resolved = {}, True
        for metric in state["metrics"]:
            iv, seeds = interval(arm, base, metric, state)
            why = resolution(iv, settings["effect"])
            resolved &= why is not None
            per_metric[metric] = {"n": iv.n, "seeds": seeds, "diff": iv.diff, "lo": iv.lo, "hi": iv.hi, "p": iv.p,
                                  "sd": iv.sd, "resolved": why}
        n = len(seeds_given(state, key))
        stop = RESOLVED if resolved else (MAX_SEEDS if n >= settings["max_seeds"] else None)
        decisions[key] = {"seeds": n, "stop": stop, "metrics": per_metric}
    return decisions


# ---------------------------------------------------------------------------------------------
# the loop


def run_adaptive(spec: GridSpec, cells: list[Cell], settings: AdaptiveSettings, first: list[int],
                 run_round) -> int:
    """Rounds until every arm has stopped. ``run_round(cells) -> exit code`` runs a round's cells
    (0: every one finished); any other code stops here, the round left to a rerun."""
    arms, base = arms_of(cells, settings.baseline)
    state = load_state(spec.root, settings, first, arms)
    while True:
        rnd = state["rounds"][-1] if state["rounds"] and not state["rounds"][-1]["decided"] else None
        if rnd is None:
            code = rerun_vanished(spec, state, arms, base, None, run_round)
            if code != 0:
                return code
            rnd = plan_round(state, arms, settings)
            if rnd is None:
                break
            state["rounds"].append(rnd)
            save_state(spec.root, state)
        code = rerun_vanished(spec, state, arms, base, rnd, run_round)
        if code != 0:
            return code
        todo = [c for c in round_cells(rnd, arms, base) if cell_state(c).state != FINISHED]
        print(f"sweep {spec.name}: round {rnd['round']}: " + "; ".join(
            f"{key} seeds {','.join(map(str, seeds))}" for key, seeds in rnd["seeds"].items()))
        if todo:
            code = run_round(todo)
            if code != 0:
                return code
        if not state["metrics"]:
            state["metrics"] = choose_metrics(state, arms)
        elif rnd["round"] == 1:
            check_metric_keys(state, arms)
        rnd["decisions"] = decide(state, arms, rnd)
        rnd["decided"] = True
        save_state(spec.root, state)
        for key, d in rnd["decisions"].items():
            print(f"  {key}: {decision_text(d)}")
    print(f"sweep {spec.name}: every arm has stopped after {len(state['rounds'])} rounds "
          f"(state: {Path(spec.root) / STATE_FILE})")
    return 0


def rerun_vanished(spec: GridSpec, state: dict[str, Any], arms: dict[str, Arm], base: list[Cell],
                   current: dict[str, Any] | None, run_round) -> int:
    """Rerun, saying which, the cells of decided rounds (all but ``current``) that are no longer
    finished (a record removed or damaged since): every decision rests on every seed given so far."""
    earlier = [r for r in state["rounds"] if r is not current]
    cells = {c.id: c for rnd in earlier for c in round_cells(rnd, arms, base)}
    gone = [c for c in cells.values() if cell_state(c).state != FINISHED]
    if not gone:
        return 0
    print(f"sweep {spec.name}: {len(gone)} cells of earlier rounds are no longer finished; rerunning them first: "
          + ", ".join(c.id for c in gone))
    return run_round(gone)


def decision_text(d: dict[str, Any]) -> str:
    parts = [f"{m} {v['diff']:+.4f} [{v['lo']:+.4f}, {v['hi']:+.4f}] ({v['resolved'] or 'open'})"
             for m, v in d["metrics"].items()]
    stop = {RESOLVED: "resolved: stops", MAX_SEEDS: "not resolved at --max-seeds: stops"}.get(d["stop"], "continues")
    return f"{d['seeds']} seeds; " + "; ".join(parts) + f"; {stop}"
