"""Grid files: expansion, conditional overrides, exclusions, record directories, errors, dry run and
status (no training here)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from sweep_fixtures import write_grid

from harness import cli
from harness.records import RunRecord
from harness.sweep.executors import LocalExecutor, with_threads
from harness.sweep.grid import GridError, check_cells, expand, load_grid
from harness.sweep.ray_executor import cell_resources
from harness.sweep.status import FAILED, FINISHED, INTERRUPTED, PENDING, RUNNING, cell_state


def _grid(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "g.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_product_when_and_exclude(tmp_path):
    path = write_grid(tmp_path, axes={"algo": ["grpo", "gdpo", "mrtpo"], "seed": [0, 1, 2]},
                      extra={"exclude": [{"algo.name": "grpo", "seed": [1, 2]}]})
    cells = expand(load_grid(path))
    assert len(cells) == 9 - 2
    assert {(c.cfg.algo.name, c.cfg.seed) for c in cells if c.cfg.algo.name == "grpo"} == {("grpo", 0)}
    for cell in cells:
        assert cell.cfg.schedule.steps == 2 and cell.cfg.model.name == "tiny-random"
        # the conditional override reaches mrtpo cells only
        assert ("warmup_steps" in cell.cfg.algo.params) == (cell.cfg.algo.name == "mrtpo")
        assert cell.record_dir == tmp_path / "tiny" / "ifollow" / cell.cfg.algo.name / "tiny-random" / \
            f"seed{cell.cfg.seed}"
    assert len({c.record_dir for c in cells}) == len(cells)


def test_cells_differing_only_in_beta_get_their_own_record_directories(tmp_path):
    path = write_grid(tmp_path, axes={"algo.name": ["mrtpo"], "algo.beta": [0.25, 0.5], "seed": [0]})
    a, b = expand(load_grid(path))
    assert (a.cfg.algo.params["beta"], b.cfg.algo.params["beta"]) == (0.25, 0.5)
    assert a.record_dir != b.record_dir
    assert a.record_dir.parent.name == "beta=0.25" and a.record_dir.name == "seed0"
    for cell in (a, b):  # each opens as its own record: no "different configuration" collision
        RunRecord.open(cell.cfg).unlock()


def test_long_variants_are_hashed_and_stay_distinct(tmp_path):
    long = ["x" * 90 + str(i) for i in range(2)]
    path = write_grid(tmp_path, axes={"algo.name": ["gdpo"], "task.options.tag": long})
    a, b = expand(load_grid(path))
    assert a.record_dir.parent.name.startswith("v-") and a.record_dir != b.record_dir


@pytest.mark.parametrize("data, message", [
    ({"grid": {"seed": [0]}, "axes": {}}, "unknown key 'axes'; known keys: name, base"),
    ({"grid": {"seed": 3}}, "grid.seed: expected a non-empty list"),
    ({"grid": {"seed": [0, 0]}}, "grid.seed: lists 0 twice"),
    ({"grid": {"seed": [0]}, "set": {"output.dir": "x"}}, "set.output.dir: each cell gets its own record"),
    ({"grid": {"seed": [0]}, "when": [{"match": {"algo.nme": "x"}, "set": {}}]},
     "when[0]: 'algo.params.nme' is neither an axis nor a 'set' key"),
    ({"grid": {"seed": [0, 1]}, "exclude": [{"seed": 7}]}, "exclude[0] matches no cell"),
    ({"grid": {"optim.lr": ["fast"]}}, "cell optim.lr=fast: optim.lr: expected a number"),
    ({"grid": {"model.name": ["a/m", "b/m"]}}, "share the record directory"),
])
def test_bad_grids_name_the_file_and_the_key(tmp_path, data, message):
    path = _grid(tmp_path, data)
    with pytest.raises(GridError, match="g.yaml") as err:
        expand(load_grid(path))
    assert message in str(err.value)


def test_unknown_algorithm_fails_before_running_and_lists_the_known_ones(tmp_path, capsys):
    path = write_grid(tmp_path, axes={"algo.name": ["gdpo", "nosuchalgo"]})
    assert cli.main(["sweep", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "g.yaml" not in err and "tiny.yaml" in err and "nosuchalgo" in err and "gdpo" in err
    assert not (tmp_path / "tiny").exists()


def test_dry_run_prints_one_line_per_cell_with_its_record_directory(tmp_path, capsys):
    path = write_grid(tmp_path, axes={"algo.name": ["gdpo", "mrtpo"], "seed": [0, 1, 2]})
    assert cli.main(["sweep", str(path), "--dry-run"]) == 0
    lines = capsys.readouterr().out.splitlines()
    dirs = {str(c.record_dir) for c in expand(load_grid(path))}
    assert len(lines) == 6 and {line.split()[-1] for line in lines} == dirs
    assert all(line.startswith("pending") for line in lines)
    assert not (tmp_path / "tiny").exists()  # a dry run writes nothing


def test_status_reads_pending_running_failed_and_finished(tmp_path, capsys):
    path = write_grid(tmp_path, axes={"algo.name": ["gdpo"], "seed": [0, 1, 2, 3]})
    cells = expand(load_grid(path))
    finished = RunRecord.open(cells[1].cfg)
    finished.start(seed=1, task_version="1", data_hash="x")
    finished.finish({})
    finished.unlock()
    failed = RunRecord.open(cells[2].cfg)
    failed.start(seed=2, task_version="1", data_hash="x")
    failed.fail("RuntimeError: boom")
    failed.unlock()
    running = RunRecord.open(cells[3].cfg)
    running.start(seed=3, task_version="1", data_hash="x")
    try:
        assert [cell_state(c).state for c in cells] == [PENDING, FINISHED, FAILED, RUNNING]
        assert cell_state(cells[2]).note == "RuntimeError: boom"
        assert cli.main(["sweep", str(path), "--status"]) == 0
        out = capsys.readouterr().out
        assert "4 cells: 1 pending, 1 running, 0 interrupted, 1 failed, 1 finished" in out
    finally:
        running.unlock()
    # a writer that died without finishing (its lock no longer held) shows as interrupted, to be resumed
    assert cell_state(cells[3]).state == INTERRUPTED and "stopped without finishing" in cell_state(cells[3]).note


def test_local_slots_share_the_cores_and_ray_resources_follow_the_cell(tmp_path, monkeypatch):
    path = write_grid(tmp_path, extra={"resources": {"cpus": 3}})
    cells = expand(load_grid(path))
    assert [t for t, _ in LocalExecutor(jobs=2, cores=8).slots(cells)] == [4, 4]
    assert LocalExecutor(jobs=4, cores=2).slots(cells)[0][0] == 1
    assert with_threads(cells[0], 4).backend.local.threads == 4
    chosen = with_threads(cells[0], 2)
    assert with_threads(type(cells[0])(**{**cells[0].__dict__, "cfg": chosen}), 4).backend.local.threads == 2
    res = cell_resources(cells[0], cluster_gpus=0)
    assert (res.cpus, res.gpus, res.reserved_gpus) == (3, 0, 0)
    from harness.backends.local import LocalBackend

    monkeypatch.setattr(LocalBackend, "reserved_gpus", classmethod(lambda cls, cfg: 2))
    res = cell_resources(cells[0], cluster_gpus=4)
    assert (res.cpus, res.gpus, res.reserved_gpus) == (1, 0, 2)  # its own placement groups hold the GPUs


def test_the_shipped_reference_grid_is_valid_and_sized_as_promised():
    path = Path(__file__).resolve().parents[1] / "grids" / "ifollow-smollm2.yaml"
    spec = load_grid(path)
    cells = expand(spec)
    check_cells(spec, cells)  # pre-flight: names, parameters, task/algorithm/backend fit
    by_algo: dict[str, set[int]] = {}
    for cell in cells:
        by_algo.setdefault(cell.cfg.algo.name, set()).add(cell.cfg.seed)
        cfg = cell.cfg
        assert cfg.task.name == "ifollow" and cfg.model.name == "smollm2-135m"
        assert cfg.schedule.steps >= 16 and cfg.schedule.eval_limit >= 32
        assert cfg.algo.params.get("warmup_steps", 0) < cfg.schedule.steps
        assert not Path(cfg.output.dir).is_absolute()  # records carry no machine path
    assert set(by_algo) >= {"grpo", "gdpo", "mrtpo"} and all(len(s) >= 3 for s in by_algo.values())


def test_the_second_reference_grid_adds_the_oracle_and_seeds_at_the_first_grids_size(tmp_path):
    import yaml

    grids = Path(__file__).resolve().parents[1] / "grids"
    data = yaml.safe_load((grids / "ifollow-smollm2-2.yaml").read_text())
    # the untrained model's row: `mrbench sweep` evaluates it once beside the training cells, which
    # are checked here on their own
    assert data.pop("base") is True
    path = tmp_path / "ifollow-smollm2-2.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_grid(path)
    cells = expand(spec)
    check_cells(spec, cells)
    first = expand(load_grid(grids / "ifollow-smollm2.yaml"))
    first_mrtpo = next(c.cfg for c in first if c.cfg.algo.name == "mrtpo")
    by_algo: dict[str, set[int]] = {}
    for cell in cells:
        cfg = cell.cfg
        by_algo.setdefault(cfg.algo.name, set()).add(cfg.seed)
        assert cfg.task.name == "ifollow" and cfg.model.name == "smollm2-135m"
        assert cfg.schedule.steps >= first_mrtpo.schedule.steps
        assert cfg.schedule.eval_limit >= first_mrtpo.schedule.eval_limit
        assert not Path(cfg.output.dir).is_absolute()
    assert set(by_algo) == {"grpo", "gdpo", "mrtpo", "mrtpo-oracle"} and all(len(s) >= 4 for s in by_algo.values())
    mrtpo = next(c.cfg for c in cells if c.cfg.algo.name == "mrtpo")
    oracle = next(c.cfg for c in cells if c.cfg.algo.name == "mrtpo-oracle")
    assert oracle.algo.params == mrtpo.algo.params == first_mrtpo.algo.params


def test_a_rule_may_match_what_an_earlier_rule_set(tmp_path):
    path = write_grid(tmp_path, axes={"algo.name": ["gdpo", "mrtpo"]}, extra={"when": [
        {"match": {"algo.name": "mrtpo"}, "set": {"algo.beta": 0.25}},
        {"match": {"algo.beta": 0.25}, "set": {"algo.warmup_steps": 3}}]})
    gdpo, mrtpo = expand(load_grid(path))
    assert gdpo.cfg.algo.params == {} and mrtpo.cfg.algo.params == {"beta": 0.25, "warmup_steps": 3}


@pytest.mark.parametrize("axes", [
    # the cell of 0.5 (mrtpo's default) is paired below with one that omits beta; equal values of one
    # axis ({"sampling.temperature": [1, 1.0]}) are refused earlier, by expand (test_sweep_faults)
    {"algo.beta": [0.5, 0.25]},
])
def test_two_cells_of_one_resolved_run_are_refused(tmp_path, axes):
    data = {"root": str(tmp_path / "r"), "set": {"model.name": "tiny-random", "algo.name": "mrtpo"},
            "grid": axes}
    spec = load_grid(_grid(tmp_path, data))
    cells = expand(spec)
    if "algo.beta" in axes:  # an explicit default next to the omitted one
        plain = expand(load_grid(_grid(tmp_path, {**data, "grid": {"seed": [0]}})))
        cells = [cells[0], plain[0]]
        assert cells[0].cfg.algo.params.get("beta") == 0.5 and "beta" not in plain[0].cfg.algo.params
    with pytest.raises(GridError, match="are the same run once defaults are filled in"):
        check_cells(spec, cells)
