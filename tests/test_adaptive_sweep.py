"""``mrbench sweep --until-resolved``: rounds of seeds until each arm's comparison is resolved, driven
by a fake executor that writes finished records (no training) with chosen benchmark numbers.

The arms: gdpo (the baseline), mrtpo 0.05 above it with almost no spread (its interval soon
excludes 0), grpo 0.0005 off with a spread of 0.001 (its interval soon fits within ±0.01), and
mrtpo-oracle spreading 0.05 around it (never resolved: it stops at --max-seeds). A killed sweep, rerun,
makes exactly the decisions of an uninterrupted one, and a recorded decision is replayed, not redone.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import yaml

from harness.records import atomic_write_json
from harness.sweep.command import SweepOptions, cmd_sweep
from harness.sweep.grid import GridError

METRIC = "bench/acc"
SHIFT = {"gdpo": (0.0, 0.0), "mrtpo": (0.05, 0.0005), "grpo": (0.0005, 0.001), "mrtpo-oracle": (0.0, 0.05)}


def value(arm: str, seed: int) -> float:
    """The baseline's seed effect plus the arm's shift and its own noise (fixed per arm and seed)."""
    shift, spread = SHIFT[arm]
    base = 0.5 + 0.02 * np.random.default_rng(seed).standard_normal()
    return float(base + shift + spread * np.random.default_rng(1000 + seed + 97 * list(SHIFT).index(arm)).standard_normal())


class FakeExecutor:
    """Writes a finished record per cell; raises KeyboardInterrupt (as a Ctrl-C would) before the
    ``kill_after``-th cell it would start, leaving that cell marked running by a dead process."""

    name = "fake"

    def __init__(self, kill_after: int | None = None):
        self.kill_after, self.started = kill_after, 0

    def run(self, cells, events) -> None:
        for cell in cells:
            rec = cell.record_dir
            rec.mkdir(parents=True, exist_ok=True)
            atomic_write_json(rec / "config.json", cell.record_config())
            if self.kill_after is not None and self.started >= self.kill_after:
                atomic_write_json(rec / "provenance.json", {"status": "running"})  # killed mid-run
                raise KeyboardInterrupt
            events.started(cell)
            self.started += 1
            arm = cell.cfg.algo.name
            atomic_write_json(rec / "eval.json", {"benchmarks": {"bench": {"summary": {
                "acc": value(arm, cell.cfg.seed), "n_items": 100}}}})
            (rec / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward_mean": 0.5}) + "\n")
            atomic_write_json(rec / "provenance.json", {"status": "finished"})
            events.ended(cell, 0)


def four_arm_grid(tmp_path, name: str = "ad"):
    """gdpo, grpo, mrtpo and mrtpo-oracle on tiny-random, seeds 0-3 in the first round."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "root": str(tmp_path / name), "set": {"model.name": "tiny-random", "schedule.steps": 2},
        "grid": {"seed": [0, 1, 2, 3], "algo.name": ["gdpo", "grpo", "mrtpo", "mrtpo-oracle"]},
        "when": [{"match": {"algo.name": ["mrtpo", "mrtpo-oracle"]}, "set": {"algo.warmup_steps": 0}}],
    }, sort_keys=False))
    return path


def _opts(grid, executor=None, **kw):
    return SweepOptions(grid=str(grid), until_resolved=True, metrics=[METRIC], effect=0.01, max_seeds=10,
                        round_size=2, executor_object=executor or FakeExecutor(), **kw)


def _state(tmp_path, name: str = "ad"):
    return json.loads((tmp_path / name / "adaptive.json").read_text())


def _run_to_end(grid, kill_after=None) -> int:
    """Run (killing at the given cell, then rerunning after each kill) until the sweep ends; the kills."""
    kills = 0
    while True:
        code = cmd_sweep(_opts(grid, FakeExecutor(kill_after)))
        if code == 0:
            return kills
        assert code == 130
        kills += 1


def test_an_uninterrupted_adaptive_sweep_stops_each_arm_for_its_reason(tmp_path, capsys):
    grid = four_arm_grid(tmp_path)
    assert cmd_sweep(_opts(grid)) == 0
    state = _state(tmp_path)
    rounds = state["rounds"]
    assert rounds[0]["seeds"]["ifollow/gdpo/tiny-random"] == [0, 1, 2, 3]
    stops = {key: (rnd["round"], d["stop"], d["seeds"]) for rnd in rounds
             for key, d in rnd["decisions"].items() if d["stop"]}
    assert stops["ifollow/mrtpo/tiny-random"][1:] == ("resolved", stops["ifollow/mrtpo/tiny-random"][2])
    mrtpo_round = stops["ifollow/mrtpo/tiny-random"][0]
    decided = rounds[mrtpo_round - 1]["decisions"]["ifollow/mrtpo/tiny-random"]["metrics"][METRIC]
    assert decided["resolved"] == "excludes 0" and decided["lo"] > 0
    grpo = rounds[stops["ifollow/grpo/tiny-random"][0] - 1]["decisions"]["ifollow/grpo/tiny-random"]
    assert grpo["stop"] == "resolved" and grpo["metrics"][METRIC]["resolved"] == "within ±0.01"
    assert stops["ifollow/mrtpo-oracle/tiny-random"] == (4, "max seeds", 10)  # rounds: 4 seeds, then +2 x 3
    # resolved arms got no seeds after they stopped; the baseline got seeds while any arm was open
    for key, (stopped_at, _, n) in stops.items():
        assert all(key not in rnd["seeds"] for rnd in rounds[stopped_at:])
        assert n == sum(len(rnd["seeds"].get(key, [])) for rnd in rounds)
    assert sum(len(rnd["seeds"].get("ifollow/gdpo/tiny-random", [])) for rnd in rounds) == 10
    assert (tmp_path / "ad" / "ifollow/mrtpo-oracle/tiny-random/seed9/eval.json").exists()
    assert not (tmp_path / "ad" / "ifollow/mrtpo/tiny-random/seed9").exists()
    # the status: per arm, seeds run, the interval, resolved or the seeds expected
    capsys.readouterr()
    assert cmd_sweep(replace(_opts(grid), status=True)) == 0
    out = capsys.readouterr().out
    lines = {line.split(":")[0]: line for line in out.splitlines() if line.startswith("ifollow/")}
    assert "resolved (round" in lines["ifollow/mrtpo/tiny-random"]
    assert "10 of 10 seeds finished" in lines["ifollow/mrtpo-oracle/tiny-random"]
    assert "stopped unresolved at --max-seeds 10" in lines["ifollow/mrtpo-oracle/tiny-random"]
    assert "(baseline)" in lines["ifollow/gdpo/tiny-random"]
    assert "anytime-valid" in out
    assert cmd_sweep(SweepOptions(grid=str(grid), status=True)) == 0  # the plain status points to the arms' view
    assert "add --until-resolved" in capsys.readouterr().out


@pytest.mark.parametrize("kill_after", [3, 21])
def test_a_killed_adaptive_sweep_resumes_with_the_decisions_of_an_uninterrupted_one(tmp_path, kill_after):
    whole = four_arm_grid(tmp_path, "whole")
    assert cmd_sweep(_opts(whole)) == 0
    killed = four_arm_grid(tmp_path, "killed")
    kills = _run_to_end(killed, kill_after)
    assert kills >= 1  # each run got killed at its kill_after-th cell until fewer were left
    a, b = _state(tmp_path, "whole"), _state(tmp_path, "killed")
    assert [(r["seeds"], r["decisions"]) for r in a["rounds"]] == [(r["seeds"], r["decisions"]) for r in b["rounds"]]
    assert a["metrics"] == b["metrics"] == [METRIC] and a["phi"] == b["phi"]


def test_recorded_decisions_are_replayed_not_redone(tmp_path):
    grid = four_arm_grid(tmp_path)
    assert cmd_sweep(_opts(grid, FakeExecutor(kill_after=16 + 8 + 1))) == 130  # killed in round 3
    state = _state(tmp_path)
    assert [r["decided"] for r in state["rounds"]] == [True, True, False]
    # a decision written in the file wins over what the records would give now
    state["rounds"][1]["decisions"]["ifollow/mrtpo-oracle/tiny-random"]["stop"] = "resolved"
    state["rounds"][2]["seeds"].pop("ifollow/mrtpo-oracle/tiny-random", None)
    atomic_write_json(tmp_path / "ad" / "adaptive.json", state)
    assert cmd_sweep(_opts(grid)) == 0
    after = _state(tmp_path)
    assert after["rounds"][1] == state["rounds"][1]
    assert all("ifollow/mrtpo-oracle/tiny-random" not in r["seeds"] for r in after["rounds"][2:])


def test_other_settings_than_the_recorded_ones_are_refused(tmp_path):
    grid = four_arm_grid(tmp_path)
    assert cmd_sweep(_opts(grid, FakeExecutor(kill_after=5))) == 130
    with pytest.raises(GridError, match="recorded settings"):
        cmd_sweep(replace(_opts(grid), max_seeds=20))
    with pytest.raises(GridError, match="baseline arm|--baseline"):
        cmd_sweep(replace(_opts(grid), baseline="dr_grpo", root=str(tmp_path / "other")))


def test_the_report_of_an_adaptive_sweep_gives_its_confidence_sequences_and_looks(tmp_path):
    from harness import cli

    grid = four_arm_grid(tmp_path)
    assert cmd_sweep(_opts(grid)) == 0
    state = _state(tmp_path)
    assert cli.main(["report", "--root", str(tmp_path / "ad"), "--out", str(tmp_path / "rep")]) == 0
    report = json.loads((tmp_path / "rep" / "leaderboard.json").read_text())
    assert "anytime-valid" in report["method"] and f"each of its {len(state['rounds'])} rounds" in report["method"]
    rows = {r["label"]: r for r in report["tasks"]["ifollow"]["tables"][0]["rows"]}
    last = {key: d["metrics"][METRIC] for rnd in state["rounds"] for key, d in rnd["decisions"].items()}
    for algo in ("grpo", "mrtpo", "mrtpo-oracle"):
        vs = rows[algo]["cells"][METRIC]["vs_baseline"]
        decided = last[f"ifollow/{algo}/tiny-random"]
        assert len(rows[algo]["seeds"]) == decided["n"]   # the report pairs the seeds the sweep decided on
        assert (vs["ci"][0], vs["ci"][1]) == pytest.approx((decided["lo"], decided["hi"]), abs=1e-12)
    assert rows["mrtpo"]["cells"][METRIC]["vs_baseline"]["word"] == "higher"
    assert "anytime-valid p" in rows["mrtpo"]["cells"][METRIC]["vs_baseline"]["verdict"]
    assert any("Smallest effect ruled out" in p and "anytime-valid" in p for p in report["verdict"])
