"""`base: true` in a grid: one base-model cell per task, model and benchmark settings, run through
the end-of-run evaluation path, cached as a record of its own and never rerun; the report's base
row and gain-over-base columns from a real tiny sweep."""

from __future__ import annotations

import json

import pytest
import yaml
from sweep_fixtures import write_grid
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import cli
from harness.base_model import base_identity, base_record_dir, matches
from harness.config import resolve
from harness.sweep.grid import GridError, expand, load_grid
from harness.sweep.status import status_table


def _grid(tmp_path, **extra):
    path = tmp_path / "g.yaml"
    data = {"root": str(tmp_path / "root"), "set": {"model.name": "tiny-random"},
            "grid": {"algo.name": ["gdpo", "mrtpo"], "seed": [0, 1]}, **extra}
    path.write_text(yaml.safe_dump(data))
    return path


def test_base_true_asks_for_the_base_model_and_recipe_names_the_recipe(tmp_path):
    spec = load_grid(_grid(tmp_path, base=True, recipe="ifollow-paper"))
    assert spec.base_model and spec.base == "ifollow-paper"
    old = load_grid(_grid(tmp_path, base="ifollow-paper"))  # the older spelling of the recipe
    assert not old.base_model and old.base == "ifollow-paper"
    with pytest.raises(GridError, match="names a recipe, and so does 'recipe'"):
        load_grid(_grid(tmp_path, base="ifollow-paper", recipe="toolcall-paper"))


def test_one_base_cell_per_benchmark_setting_first_in_the_sweep(tmp_path):
    cells = expand(load_grid(_grid(tmp_path, base=True)))
    base = [c for c in cells if c.kind == "base"]
    assert len(cells) == 5 and cells[0] is base[0] and base[0].run_args == ("--base-model",)
    assert base[0].id.startswith("ifollow/base/tiny-random/eval-")
    assert base[0].record_dir == base_record_dir(str(tmp_path / "root"), cells[1].cfg.to_dict())
    # a training-only axis shares the base cell; an evaluation setting makes a second one
    lr = expand(load_grid(_grid(tmp_path, base=True, grid={"optim.lr": [1e-5, 1e-6], "seed": [0]})))
    assert sum(c.kind == "base" for c in lr) == 1
    limits = expand(load_grid(_grid(tmp_path, base=True, grid={"schedule.eval_limit": [2, 4], "seed": [0]})))
    assert sum(c.kind == "base" for c in limits) == 2
    table, counts = status_table(cells)
    assert table.splitlines()[0].split()[:3] == ["pending", "eval", base[0].id] and counts["pending"] == 5
    assert not any(c.kind == "base" for c in expand(load_grid(_grid(tmp_path))))


def test_identity_and_matching():
    cfg = resolve(None, [("model", "tiny-random"), ("schedule.eval_limit", "48"), ("algo", "grpo")]).to_dict()
    ident = base_identity(cfg)
    assert ident["record"] == "base" and ident["algo"]["name"] == "base" and "optim" not in ident
    assert ident["schedule"] == {"eval_benchmarks": None, "eval_data_dir": None, "eval_limit": 48,
                                 "eval_max_new_tokens": 128}
    assert matches(ident, cfg)
    other = resolve(None, [("model", "tiny-random"), ("schedule.eval_limit", "8")]).to_dict()
    assert not matches(ident, other)
    older = json.loads(json.dumps(cfg))
    del older["backend"]["local"]["rollout_attention"]  # a record from before the field existed
    assert matches(ident, older)


def test_tiny_sweep_with_base_reports_the_base_row_and_never_reruns_it(tmp_path, one_torch_thread):  # noqa: F811
    grid = write_grid(tmp_path, axes={"algo.name": ["gdpo"], "seed": [0, 1]}, extra={"base": True})
    assert cli.main(["sweep", str(grid), "--executor", "inline"]) == 0
    root = tmp_path / "tiny"
    (base_dir,) = (root / "ifollow" / "base" / "tiny-random").iterdir()
    files = {n: ((base_dir / n).read_bytes(), (base_dir / n).stat().st_mtime_ns)
             for n in ("config.json", "provenance.json", "eval.json")}
    prov = json.loads((base_dir / "provenance.json").read_text())
    assert prov["status"] == "finished" and prov["record"] == "base"
    assert json.loads((base_dir / "eval.json").read_text())["eval_limit"] == 2
    assert cli.main(["sweep", str(grid), "--executor", "inline"]) == 0
    assert files == {n: ((base_dir / n).read_bytes(), (base_dir / n).stat().st_mtime_ns) for n in files}
    out = tmp_path / "report"
    assert cli.main(["report", "--root", str(root), "--out", str(out), "--min-seeds", "2"]) == 0
    data = json.loads((out / "leaderboard.json").read_text())
    rows = {r["label"]: r for r in data["tasks"]["ifollow"]["tables"][0]["rows"]}
    assert rows["base"]["is_base"] and rows["gdpo"]["base"] == "base"
    for col, cell in rows["gdpo"]["cells"].items():
        base_value = rows["base"]["cells"][col]["mean"]
        assert cell["gain_over_base"]["diff"] == pytest.approx(cell["mean"] - base_value)
        assert cell["gain_over_base"]["n"] == 2
    md = (out / "leaderboard.md").read_text()
    assert "| base | tiny-random | — |" in md and "Gain over the base model:" in md


def test_run_base_model_writes_the_base_record_once_and_matches_mrbench_eval(tmp_path, capsys, one_torch_thread):  # noqa: F811
    flags = ["--model", "tiny-random", "--model.dtype", "float32", "--schedule.eval_limit", "2",
             "--schedule.eval_max_new_tokens", "4", "--output.root", str(tmp_path / "r")]
    assert cli.main(["run", *flags, "--base-model"]) == 0
    cfg = resolve(None, [("model", "tiny-random"), ("model.dtype", "float32"), ("schedule.eval_limit", "2"),
                         ("schedule.eval_max_new_tokens", "4"), ("output.root", str(tmp_path / "r"))])
    path = base_record_dir(tmp_path / "r", cfg.to_dict())
    assert json.loads((path / "config.json").read_text()) == base_identity(cfg.to_dict())
    summary = json.loads((path / "eval.json").read_text())["benchmarks"]["ifollow-heldout"]["summary"]
    stamp = (path / "eval.json").stat().st_mtime_ns
    assert cli.main(["run", *flags, "--base-model"]) == 0
    assert "already finished; not rerunning" in capsys.readouterr().out
    assert (path / "eval.json").stat().st_mtime_ns == stamp
    # the same numbers as mrbench eval with the same model, precision, cases and token budget
    recipe = tmp_path / "fp32.yaml"
    recipe.write_text("model: {dtype: float32}\n")
    assert cli.main(["eval", "ifollow-heldout", "--model", "tiny-random", "--config", str(recipe), "--limit", "2",
                     "--max-new-tokens", "4", "--out", str(tmp_path / "e")]) == 0
    assert json.loads((tmp_path / "e" / "summary.json").read_text())["instruction_level"] == summary["instruction_level"]
    # a directory holding another record is refused
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text("{}")
    assert cli.main(["run", *flags, "--output.dir", str(other), "--base-model"]) == 2
    assert "holds another record than this base-model evaluation" in capsys.readouterr().err


def test_the_reference_grids_each_get_one_base_cell_and_the_first_ones_is_committed(monkeypatch):
    from pathlib import Path

    from harness.sweep.status import FINISHED, cell_state

    repo = Path(__file__).resolve().parents[1]
    monkeypatch.chdir(repo)  # the grids' roots are relative to the checkout
    grids = repo / "grids"
    for name in ("ifollow-smollm2.yaml", "ifollow-smollm2-2.yaml"):
        cells = expand(load_grid(grids / name))
        (base,) = [c for c in cells if c.kind == "base"]
        assert all(matches(base.record_config(), c.cfg.to_dict()) for c in cells if c.kind == "train")
    first = expand(load_grid(grids / "ifollow-smollm2.yaml"))
    assert cell_state(first[0]).state == FINISHED  # the committed base record: a rerun evaluates nothing
