"""The fourth reference comparison's grid (grids/ifollow-smollm2-4.yaml) runs on reference 3's settings:
its GDPO cells are the configuration of reference 3's GDPO records (so the two differ only by the
commit, which the grid's header says is why nothing is reused), each new arm differs from GDPO in
the algorithm alone, and every arm is an algorithm the registry knows in its per-reward form."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from algorithms import get_algorithm
from harness.sweep.adaptive import AdaptiveSettings, with_seeds
from harness.sweep.grid import expand, load_grid
from harness.sweep.reuse import matching

REPO = Path(__file__).resolve().parents[1]
GRID = REPO / "grids" / "ifollow-smollm2-4.yaml"
REF3 = REPO / "results" / "reference" / "ifollow-smollm2-3"
ARMS = ("gdpo", "forking", "gtpo", "ktae")


def _cells(root: Path):
    settings = AdaptiveSettings(baseline="gdpo", metrics=("ifollow-heldout/instruction_level",), effect=0.01,
                                max_seeds=12, round_size=2)
    spec, first = with_seeds(replace(load_grid(GRID), root=str(root)), settings.max_seeds)
    return first, expand(spec)


def test_the_first_round_is_four_seeds_of_each_arm_and_the_base_row(tmp_path):
    first, cells = _cells(tmp_path)
    assert first == [0, 1, 2, 3]
    firsts = [c for c in cells if c.kind == "base" or c.cfg.seed in first]
    assert len(firsts) == 17 and sum(c.kind == "base" for c in firsts) == 1
    assert {c.cfg.algo.name for c in firsts if c.kind != "base"} == set(ARMS)


@pytest.mark.skipif(not (REF3 / "ifollow" / "gdpo").exists(), reason="no committed reference 3")
def test_its_gdpo_cells_are_reference_3s_configuration(tmp_path):
    first, cells = _cells(tmp_path)
    for cell in cells:
        if cell.kind == "base" or cell.cfg.algo.name != "gdpo" or cell.cfg.seed not in first:
            continue
        ok, why = matching(REF3 / cell.id, cell)
        assert ok, f"{cell.id}: {why}"


def test_each_new_arm_differs_from_gdpo_only_in_its_algorithm(tmp_path):
    _, cells = _cells(tmp_path)
    by_arm = {(c.cfg.algo.name, c.cfg.seed): c for c in cells if c.kind != "base"}
    for arm in ARMS[1:]:
        assert get_algorithm(arm).per_reward  # the per-reward form, not the paper's summed one
        theirs, ours = by_arm[(arm, 0)].cfg, by_arm[("gdpo", 0)].cfg
        assert replace(theirs, algo=ours.algo, output=ours.output) == replace(ours, output=ours.output)
