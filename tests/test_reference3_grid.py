"""The third reference comparison's grid (grids/ifollow-smollm2-3.yaml) is the second one's settings:
every finished reference-2 record of its cells (GDPO, MRTPO and MRTPO-oracle, seeds 0-3, and the base
row) is the same configuration, so ``--reuse-from results/reference/ifollow-smollm2-2`` would make them
the adaptive sweep's first round. (Reference 3 does not reuse them: the grid's header says why, a
rerun of one cell at a later commit sampled other responses.) A record of another configuration is
not reused, and the setting that differs is named."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from harness.sweep.adaptive import AdaptiveSettings, with_seeds
from harness.sweep.adaptive_status import adaptive_status
from harness.sweep.grid import expand, load_grid
from harness.sweep.reuse import matching, reuse_records

REPO = Path(__file__).resolve().parents[1]
GRID = REPO / "grids" / "ifollow-smollm2-3.yaml"
REF2 = REPO / "results" / "reference" / "ifollow-smollm2-2"
SETTINGS = AdaptiveSettings(baseline="gdpo", metrics=("ifollow-heldout/instruction_level",), effect=0.01,
                            max_seeds=12, round_size=2)

pytestmark = pytest.mark.skipif(not (REF2 / "sweep.json").exists(), reason="no committed reference 2")


def _cells(root: Path):
    spec, first = with_seeds(replace(load_grid(GRID), root=str(root)), SETTINGS.max_seeds)
    return spec, first, expand(spec)


def test_every_first_round_cell_of_reference_3_is_a_finished_reference_2_record(tmp_path):
    _, first, cells = _cells(tmp_path / "ref3")
    assert first == [0, 1, 2, 3]
    firsts = [c for c in cells if c.kind == "base" or c.cfg.seed in first]
    assert len(firsts) == 13  # 3 arms x 4 seeds and the base row
    for cell in firsts:
        ok, why = matching(REF2 / cell.id, cell)
        assert ok, f"{cell.id}: {why}"


def test_reusing_them_gives_the_adaptive_sweep_its_first_round(tmp_path):
    spec, first, cells = _cells(tmp_path / "ref3")
    copied, refused = reuse_records(REF2, cells)
    assert len(copied) == 13 and refused == []
    status = adaptive_status(spec, cells, SETTINGS, first)
    for arm in ("gdpo", "mrtpo", "mrtpo-oracle"):
        assert f"ifollow/{arm}/smollm2-135m: 4 of 4 seeds finished" in status
    provenance = json.loads((tmp_path / "ref3" / "ifollow/mrtpo/smollm2-135m/seed0/provenance.json").read_text())
    assert provenance["status"] == "finished"  # the record as it ran, at reference 2's commit


def test_a_record_of_another_configuration_is_not_reused_and_the_setting_is_named(tmp_path):
    grid = yaml.safe_load(GRID.read_text())
    grid["set"]["optim.lr"] = 2.0e-5
    grid["root"] = str(tmp_path / "ref3-lr")
    path = tmp_path / "other.yaml"
    path.write_text(yaml.safe_dump(grid))
    spec, _ = with_seeds(load_grid(path), SETTINGS.max_seeds)
    copied, refused = reuse_records(REF2, [c for c in expand(spec) if c.kind != "base"])
    assert copied == [] and refused and all("optim.lr" in line for line in refused)
