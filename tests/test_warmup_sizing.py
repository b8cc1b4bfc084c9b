"""The main job demonstrates MRTPO: without a recipe an MRTPO-family warm-up is sized to the run, so
the effective beta reaches the full beta within its steps; a run whose warm-up outlasts its steps
warns at the start and records it; the summary lists the effective beta and replay share per step."""

from __future__ import annotations

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import ToyTask, tiny_config

from algorithms import get_algorithm
from harness.backends.local import LocalBackend
from harness.config import resolve
from harness.records import RunRecord, load_record
from harness.training.relevance_guard import warmup_shortfall


@pytest.mark.parametrize("recipe, pairs, expected", [
    (None, [], 2),                                            # the main job: 4 steps
    (None, [("schedule.steps", "3")], 1),
    (None, [("schedule.steps", "1")], 1),
    (None, [("schedule.steps", "60")], 10),                   # long runs keep the paper's 10
    (None, [("algo", "mrtpo+saw")], 2),
    (None, [("algo", "mrtpo-joint")], 2),
    (None, [("algo.warmup_steps", "7")], 7),                  # an explicit value always wins
    ("ifollow-paper", [], None),                              # a recipe keeps the algorithm's default
    (None, [("algo", "gdpo")], None),                         # no warm-up to size
    (None, [("algo", "cort")], None),
])
def test_warmup_is_sized_to_the_run_without_a_recipe(recipe, pairs, expected):
    cfg = resolve(recipe, pairs)
    assert cfg.algo.params.get("warmup_steps") == expected
    get_algorithm(cfg.algo.name, **cfg.algo.params)  # the parameters are valid for that algorithm


def test_the_main_job_reaches_the_full_beta_and_replays_in_most_steps():
    cfg = resolve()
    algo = get_algorithm(cfg.algo.name, **cfg.algo.params)
    betas = [algo.effective_beta(n) for n in range(cfg.schedule.steps)]
    assert betas == [0.0, 0.25, 0.5, 0.5]
    assert sum(algo.needs_replay(n) for n in range(cfg.schedule.steps)) >= cfg.schedule.steps / 2
    assert warmup_shortfall(algo, cfg.schedule.steps) is None


@pytest.mark.parametrize("name, params, steps, short", [
    ("mrtpo", {"warmup_steps": 10}, 4, "reaches only 0.108 of 0.5"),
    ("mrtpo", {"warmup_steps": 3}, 4, None),           # step index 3 = N: full beta
    ("mrtpo", {"warmup_steps": 4}, 4, "reaches only 0.422 of 0.5"),
    ("mrtpo", {"warmup_steps": 0}, 1, None),
    ("mrtpo", {"beta": 0.0, "warmup_steps": 10}, 2, None),  # nothing to reach
    ("mrtpo+saw", {"warmup_steps": 10}, 2, "reaches only 0.014 of 0.5 by the last step, so the run trains mostly as its aggregator (SAW)"),
    ("gdpo", {}, 2, None),
    ("cort", {"warmup_steps": 10}, 2, None),            # CoRT's lambda ramp is not a beta warm-up
])
def test_warmup_shortfall(name, params, steps, short):
    message = warmup_shortfall(get_algorithm(name, **params), steps)
    if short is None:
        assert message is None
    else:
        assert short in message and "--algo.warmup_steps" in message


pytestmark_threads = pytest.mark.usefixtures("one_torch_thread")


def _train(cfg):
    rec = RunRecord.open(cfg)
    try:
        return LocalBackend(cfg, task=ToyTask()).train(rec)
    finally:
        rec.unlock()


@pytestmark_threads
def test_a_tiny_run_whose_warmup_outlasts_it_warns_and_records(tmp_path, capsys):
    cfg = tiny_config(str(tmp_path / "r"), "mrtpo", steps=2)
    cfg.algo.params["warmup_steps"] = 10
    summary = _train(cfg)
    err = capsys.readouterr().err
    assert err.count("warm-up outlasts the 2-step run") == 1
    prov = load_record(tmp_path / "r")["provenance"]
    assert "reaches only 0.014 of 0.5" in prov["warmup_warning"]
    assert summary["warmup_warning"] == prov["warmup_warning"]
    assert summary["beta_per_step"] == [0.0, 0.014]


@pytestmark_threads
def test_a_run_that_reaches_its_beta_is_quiet_and_lists_beta_and_replay(tmp_path, capsys):
    cfg = tiny_config(str(tmp_path / "r"), "mrtpo", steps=2)
    cfg.algo.params["warmup_steps"] = 1
    summary = _train(cfg)
    assert "warm-up" not in capsys.readouterr().err
    assert summary["beta_per_step"] == [0.0, 0.5] and "warmup_warning" not in summary
    assert len(summary["replay_share_per_step"]) == 2 and summary["replay_share_per_step"][0] == 0.0
    assert summary["steps_replayed"] in ("0 of 2", "1 of 2")
