"""A sweep whose every cell is already finished says there is nothing to run and how to rerun into
a fresh root (the situation of ``grids/ifollow-smollm2.yaml`` over the committed reference records);
``--root`` puts the cells there."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweep_fixtures import write_grid
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import cli

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_finished_grid_says_it_has_nothing_to_run_and_how_to_rerun(tmp_path, capsys):
    grid = write_grid(tmp_path, axes={"algo.name": ["gdpo"], "seed": [0]})
    assert cli.main(["sweep", str(grid), "--executor", "inline"]) == 0
    capsys.readouterr()
    log = tmp_path / "tiny" / "sweep.json"
    before = log.read_bytes() if log.exists() else None
    assert cli.main(["sweep", str(grid), "--executor", "inline"]) == 0
    out = capsys.readouterr().out
    assert "1 cells: 1 finished" in out
    assert f"nothing to run: every cell already has a finished record under {tmp_path / 'tiny'}" in out
    assert "--root results/sweeps/tiny-rerun" in out
    assert (log.read_bytes() if log.exists() else None) == before  # nothing written either


def test_root_puts_the_cells_of_the_reference_grid_in_a_fresh_place(tmp_path, capsys):
    grid = ROOT / "grids" / "ifollow-smollm2.yaml"
    assert cli.main(["sweep", str(grid), "--root", str(tmp_path / "rerun"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) >= 9 and all(line.startswith("pending") and str(tmp_path / "rerun") in line for line in lines)


def test_the_committed_reference_records_are_the_grids_finished_cells(capsys):
    """Records written before a config field existed still match a grid that leaves it at its
    default, so the reference grid's --status shows its committed records finished."""
    assert cli.main(["sweep", str(ROOT / "grids" / "ifollow-smollm2.yaml"), "--status"]) == 0
    out = capsys.readouterr().out
    assert "0 failed" in out and "0 pending" in out and "failed " not in out.split("\n")[0]


def test_config_identity_fills_fields_added_since_a_record_was_written():
    import json

    from harness.config import resolve
    from harness.records import config_identity

    now = json.loads(resolve().to_json())
    old = json.loads(json.dumps(now))
    del old["schedule"]["log_samples"]  # as if written before the field existed (default 4)
    assert config_identity(old) == config_identity(now)
    other = json.loads(json.dumps(old))
    other["schedule"]["steps"] = 5
    assert config_identity(other) != config_identity(now)
    removed = json.loads(json.dumps(now))
    removed["schedule"]["no_such_field"] = 1  # no longer builds a config: compared as it is
    assert config_identity(removed) != config_identity(now)
