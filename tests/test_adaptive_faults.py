"""An adaptive sweep's faults (reliability probe 5, A4, A5, A7, A8, A9) and a grid's YAML tags (G3),
driven by the fake executor of ``test_adaptive_sweep`` (finished records, no training):

- a finished record of a decided round that disappears is rerun, and said so, before the next
  decision, so that every decision rests on every seed given (A7);
- a grid whose arms or settings changed between rounds is refused in one line naming what changed (A8);
- a damaged ``adaptive.json`` is one line naming the file (A5);
- ``--max-seeds`` beyond its bound, an unknown ``--baseline`` and a ``--metric`` of no benchmark are
  refused by a dry run in one line, at once (A9);
- differences without spread give an interval as the method's limit gives it: unbounded while the
  method has no finite interval at that many seeds (4 here), a point after (A4);
- ``!!binary`` (or any tag giving bytes, dates or sets) in a grid is one line naming the key (G3).
"""

from __future__ import annotations

import json
import math
import shutil

import pytest
import yaml
from test_adaptive_sweep import METRIC, FakeExecutor, _opts, _state, four_arm_grid

from harness import cli
from harness.report.sequential import confidence_sequence, halfwidth, prior_scale
from harness.sweep.command import cmd_sweep
from harness.sweep.grid import GridError, load_grid

GRPO = "ifollow/grpo/tiny-random"


def _after_round_one(tmp_path):
    """The four-arm sweep killed as its second round starts: round 1 decided, its records finished."""
    grid = four_arm_grid(tmp_path)
    assert cmd_sweep(_opts(grid, FakeExecutor(kill_after=16))) == 130
    state = _state(tmp_path)
    assert state["rounds"][0]["decided"] and not state["rounds"][1]["decided"]
    return grid


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_vanished_record_of_a_decided_round_is_rerun_before_the_next_decision(tmp_path, capsys):
    grid = _after_round_one(tmp_path)
    shutil.rmtree(tmp_path / "ad" / GRPO / "seed0")
    capsys.readouterr()
    assert cmd_sweep(_opts(grid)) == 0
    out = capsys.readouterr().out
    assert f"1 cells of earlier rounds are no longer finished; rerunning them first: {GRPO}/seed0" in out
    assert (tmp_path / "ad" / GRPO / "seed0" / "eval.json").exists()
    for rnd in _state(tmp_path)["rounds"]:
        for key, d in rnd["decisions"].items():  # every decision over every seed the arm was given
            assert d["metrics"][METRIC]["n"] == d["seeds"], (rnd["round"], key, d)


def test_an_arm_added_between_rounds_is_refused(tmp_path):
    grid = _after_round_one(tmp_path)
    spec = yaml.safe_load(grid.read_text())
    spec["grid"]["algo.name"].append("dara")
    grid.write_text(yaml.safe_dump(spec, sort_keys=False))
    for opts in (_opts(grid), _opts(grid, status=True), _opts(grid, dry_run=True)):
        with pytest.raises(GridError, match=r"the grid's arms changed since this adaptive sweep started \(added "
                                            r"ifollow/dara/tiny-random\)"):
            cmd_sweep(opts)


def test_a_setting_changed_between_rounds_is_named(tmp_path):
    grid = _after_round_one(tmp_path)
    spec = yaml.safe_load(grid.read_text())
    spec["set"]["schedule.steps"] = 3
    grid.write_text(yaml.safe_dump(spec, sort_keys=False))
    with pytest.raises(GridError, match=r"arm ifollow/gdpo/tiny-random: the grid changed schedule.steps \(2 -> 3\)"):
        cmd_sweep(_opts(grid, status=True))


@pytest.mark.parametrize("damage", ["half", "rounds"])
def test_a_damaged_state_is_one_line(tmp_path, capsys, damage):
    grid = _after_round_one(tmp_path)
    path = tmp_path / "ad" / "adaptive.json"
    if damage == "half":
        text = path.read_text()
        path.write_text(text[: len(text) // 2])
    else:
        path.write_text(json.dumps({**json.loads(path.read_text()), "rounds": "x"}))
    capsys.readouterr()
    code = cli.main(["sweep", str(grid), "--until-resolved", "--metric", METRIC, "--max-seeds", "10", "--status"])
    assert code == 2
    line = _one_line(capsys.readouterr().err)
    assert str(path) in line and ("corrupt JSON" in line if damage == "half" else "'rounds' is 'x'" in line)
    assert "give a fresh --root" in line


@pytest.mark.parametrize(("args", "why"), [
    (["--max-seeds", "100000"], "--max-seeds 100000: at most 100"),
    (["--baseline", "nosuch"], "--baseline nosuch: no arm to compare with it"),
    (["--metric", "nosuch/key"], "--metric nosuch/key: 'nosuch' is not an end-of-run benchmark of"),
    (["--metric", "instruction_level"], "--metric 'instruction_level': expected BENCH/KEY"),
])
def test_a_dry_run_refuses_what_the_run_would_waste_seeds_on(tmp_path, capsys, args, why):
    grid = four_arm_grid(tmp_path)
    assert cli.main(["sweep", str(grid), "--until-resolved", *args, "--dry-run"]) == 2
    assert why in _one_line(capsys.readouterr().err)


def test_differences_without_spread_follow_the_methods_limit():
    phi = prior_scale(12)
    first_finite = next(n for n in range(3, 13) if math.isfinite(halfwidth(n, 1.0, phi)))
    assert first_finite > 4  # the docs: no arm resolves at its first round of 4 seeds, whatever the spread
    for n in range(3, first_finite):
        for diff in (0.0, 0.02):
            iv = confidence_sequence([diff] * n, phi)
            assert (iv.lo, iv.hi, iv.p) == (-math.inf, math.inf, 1.0), (n, diff, iv)
    zero, shifted = confidence_sequence([0.0] * first_finite, phi), confidence_sequence([0.02] * first_finite, phi)
    assert (zero.lo, zero.hi, zero.p) == (0.0, 0.0, 1.0)
    assert (shifted.lo, shifted.hi, shifted.p) == (0.02, 0.02, 0.0)


@pytest.mark.parametrize("value", ["!!binary aGVsbG8=", "2024-01-01", "!!set {a: null}"])
def test_a_yaml_tag_that_gives_no_json_value_is_one_line(tmp_path, capsys, value):
    path = tmp_path / "g.yaml"
    path.write_text(f"root: {tmp_path / 'r'}\nset: {{model.name: tiny-random}}\ngrid:\n  algo.name: [gdpo, {value}]\n")
    with pytest.raises(GridError, match=r"g.yaml: grid.algo.name\[1\]: (bytes|date|set) value"):
        load_grid(path)
    assert cli.main(["sweep", str(path), "--dry-run"]) == 2
    assert "grid.algo.name[1]" in _one_line(capsys.readouterr().err)
