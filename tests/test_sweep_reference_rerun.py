"""``mrbench sweep grids/ifollow-smollm2.yaml`` over the committed reference records says there is
nothing to run and how to rerun into a fresh root; ``--root`` puts the cells there."""

from __future__ import annotations

from pathlib import Path

from harness import cli

ROOT = Path(__file__).resolve().parent.parent
GRID = ROOT / "grids" / "ifollow-smollm2.yaml"


def test_the_reference_grid_says_it_has_nothing_to_run(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    assert cli.main(["sweep", "grids/ifollow-smollm2.yaml", "--executor", "inline"]) == 0
    out = capsys.readouterr().out
    assert "9 cells: 9 finished" in out
    assert "nothing to run: every cell already has a finished record under results/reference/ifollow-smollm2" in out
    assert "--root results/sweeps/ifollow-smollm2-rerun" in out


def test_root_puts_the_cells_in_a_fresh_place(tmp_path, capsys):
    assert cli.main(["sweep", str(GRID), "--root", str(tmp_path / "rerun"), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 9 and all(line.startswith("pending") and str(tmp_path / "rerun") in line for line in lines)
