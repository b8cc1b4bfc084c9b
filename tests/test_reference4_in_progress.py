"""Reference 4's adaptive sweep, carried between machines: ``results/in-progress/ifollow-smollm2-4/``
holds its state and finished records (scripts/reference_records.py), not a result. Copied back to the
grid's root at a later commit, it must still resume where it stopped: every kept record counts as
finished for its cell (same configuration), the recorded decisions stand, and the next round gives
the open arms the next seeds. A change to the configuration's schema or the cells' paths that would
make the resumed sweep rerun or refuse these cells fails here first."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.sweep.adaptive import (
    AdaptiveSettings,
    arms_of,
    load_state,
    open_arms,
    plan_round,
    round_cells,
    with_seeds,
)
from harness.sweep.adaptive_status import adaptive_status
from harness.sweep.grid import expand, load_grid
from harness.sweep.status import FINISHED, cell_state

REPO = Path(__file__).resolve().parents[1]
GRID = REPO / "grids" / "ifollow-smollm2-4.yaml"
SNAPSHOT = REPO / "results" / "in-progress" / "ifollow-smollm2-4"
SETTINGS = AdaptiveSettings(baseline="gdpo", metrics=("ifollow-heldout/instruction_level",), effect=0.01,
                            max_seeds=12, round_size=2)
ARMS = ("ifollow/gdpo/smollm2-135m", "ifollow/forking/smollm2-135m", "ifollow/gtpo/smollm2-135m",
        "ifollow/ktae/smollm2-135m")

pytestmark = pytest.mark.skipif(not (SNAPSHOT / "adaptive.json").exists(),
                                reason="reference 4 is not in progress (no sweep in progress is committed)")


def _resumed(tmp_path: Path, monkeypatch):
    """The documented resume: the carried folder copied to the grid's own root under a checkout
    (the records' ``output.dir`` names that place), the sweep run from the checkout's top."""
    spec, first = with_seeds(load_grid(GRID), SETTINGS.max_seeds)
    shutil.copytree(SNAPSHOT, tmp_path / spec.root)
    monkeypatch.chdir(tmp_path)
    return spec, first, expand(spec), Path(spec.root)


def _kept_records() -> list[Path]:
    return sorted(p.parent for p in SNAPSHOT.rglob("provenance.json"))


def test_every_kept_record_is_a_finished_cell_of_the_grid_at_this_commit(tmp_path, monkeypatch):
    spec, _, cells, root = _resumed(tmp_path, monkeypatch)
    by_dir = {Path(c.record_dir).resolve(): c for c in cells}
    kept = [root / p.relative_to(SNAPSHOT) for p in _kept_records()]
    assert kept
    for path in kept:
        cell = by_dir.get(path.resolve())
        assert cell is not None, f"{path}: no cell of the grid has this record"
        state = cell_state(cell)
        assert state.state == FINISHED, f"{cell.id}: {state}"


def test_the_recorded_decisions_stand_and_the_resumed_round_runs_only_what_is_missing(tmp_path, monkeypatch):
    spec, first, cells, root = _resumed(tmp_path, monkeypatch)
    state = load_state(root, SETTINGS, first)  # refuses other settings than the recorded ones
    arms, base = arms_of(cells, SETTINGS.baseline)
    assert set(arms) == set(ARMS)
    rounds = state["rounds"]
    assert rounds[0]["seeds"] == {key: [0, 1, 2, 3] for key in ARMS}
    decided = [r for r in rounds if r["decided"]]
    for rnd in decided:  # only the compared arms get decisions; the baseline runs as long as one is open
        assert set(rnd["decisions"]) <= set(ARMS) - {ARMS[0]}
    status = adaptive_status(spec, cells, SETTINGS, first)
    assert f"{len(decided)} of {len(rounds)} rounds decided" in status
    nxt = plan_round(state, arms, SETTINGS) if rounds[-1]["decided"] else rounds[-1]  # what a resumed sweep runs
    if nxt is None:
        return  # every arm has stopped: the sweep has finished and belongs in results/reference/
    if rounds[-1]["decided"]:
        had = {key: {s for r in decided for s in r["seeds"].get(key, [])} for key in ARMS}
        for key in open_arms(state, arms):  # an open arm gets the next seeds, and its baseline the same ones
            assert nxt["seeds"][key] == [max(had[key]) + 1, max(had[key]) + 2]
            assert set(nxt["seeds"][key]) <= set(nxt["seeds"][ARMS[0]])
    kept = {p.relative_to(SNAPSHOT) for p in _kept_records()}
    for cell in round_cells(nxt, arms, base):
        here = Path(cell.record_dir).relative_to(root) in kept
        assert (cell_state(cell).state == FINISHED) == here, cell.id  # a kept record is not run again; the rest are


def test_the_kept_records_carry_no_machine_name_or_local_path_and_ran_at_clean_commits():
    for path in _kept_records():
        prov = json.loads((path / "provenance.json").read_text())
        assert "host" not in prov and "model_source" not in prov, path
        assert prov["status"] == "finished" and prov["git"]["dirty"] is False, path
        assert (path / "eval.json").exists() and (path / "config.json").exists(), path


def test_keeping_the_records_again_changes_nothing(tmp_path):
    import runpy

    keep_records = runpy.run_path(str(REPO / "scripts" / "reference_records.py"))["keep_records"]
    kept, left = keep_records(SNAPSHOT, tmp_path / "again")
    assert (kept, left) == (len(_kept_records()), 0)
    for path in SNAPSHOT.rglob("*"):
        if path.is_file() and path.name != "README.md":
            assert (tmp_path / "again" / path.relative_to(SNAPSHOT)).read_bytes() == path.read_bytes(), path
