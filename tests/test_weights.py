"""Reward-weight schedules (algorithms/weights.py): values by hand, the advantages that use them,
and the pre-flight refusals."""

from __future__ import annotations

import pytest
import torch

from algorithms import RolloutBatch, get_algorithm
from algorithms.base import ConfigError
from algorithms.diagnostics import batch_diagnostics, name_index, reward_contributions
from algorithms.weights import parse_schedule
from harness.config import resolve
from harness.preflight import PreflightError, preflight

NAMES = ("format", "correctness")


def _batch(step, total=5):
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 3.0], [1.0, -1.0]])
    return RolloutBatch(rewards=rewards, group_ids=torch.tensor([0, 0, 1, 1]),
                        response_mask=torch.ones(4, 3, dtype=torch.bool), step=step, reward_names=NAMES,
                        total_steps=total)


@pytest.mark.parametrize("spec, expected", [
    ({"linear": [1.0, 0.2]}, [1.0, 0.8, 0.6, 0.4, 0.2]),
    ({"linear": [0.0, 1.0, 3]}, [0.0, 0.5, 1.0, 1.0, 1.0]),  # its own horizon, then the end value
    ({"cosine": [1.0, 0.0]}, [1.0, 0.8535534, 0.5, 0.1464466, 0.0]),
    ({"step": [[1, 1.0], [3, 0.5]]}, [1.0, 1.0, 0.5, 0.5, 0.5]),
    ({"step": {"2": 2.0, "4": 0.0}}, [2.0, 2.0, 2.0, 0.0, 0.0]),  # before the first breakpoint: its value
    ({"constant": 0.3}, [0.3] * 5),
    (0.7, [0.7] * 5),
])
def test_schedule_values(spec, expected):
    assert [parse_schedule(spec, "w").at(n, 5) for n in range(5)] == pytest.approx(expected)


@pytest.mark.parametrize("algo", ["gdpo", "grpo", "mrtpo"])
def test_linear_over_five_steps_logs_the_five_weights_and_the_advantages_use_them(algo):
    extra = {"warmup_steps": 0, "beta": 0.0} if algo == "mrtpo" else {}
    scheduled = get_algorithm(algo, weights='{"format": {"linear": [1.0, 0.2]}, "correctness": 1.0}', **extra)
    ids, names = name_index([list(NAMES)] * 4, 2)
    logged = []
    for n, w in enumerate([1.0, 0.8, 0.6, 0.4, 0.2]):
        batch = _batch(n)
        out = batch_diagnostics(batch, ids, names, reward_contributions(scheduled, batch))
        logged.append(out["reward/format/weight"])
        fixed = get_algorithm(algo, weights=[w, 1.0], **extra)
        assert torch.allclose(scheduled.token_advantages(batch), fixed.token_advantages(batch)), (n, w)
    assert logged == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2])
    assert not torch.allclose(get_algorithm(algo, **extra).token_advantages(_batch(4)),
                              scheduled.token_advantages(_batch(4)))  # the weights matter on this batch


@pytest.mark.parametrize("spec, message", [
    ('{"format": {"linear": [1.0]}}', r"weights.format.linear: expected \[start, end\]"),
    ('{"format": {"ramp": [1, 0]}}', r"weights.format: expected a number or one of \{constant, linear, cosine, step"),
    ('{"format": "high"}', "weights.format: expected a finite number"),
    ('{"format": {"step": [[0, 1.0]]}}', "steps are 1-based"),
    ('{"format": {"step": [[3, 1.0], [2, 0.5]]}}', "breakpoints must increase"),
    ("[1, 2, oops", "weights: not JSON or YAML"),
    ('{"format": [1, 2]}', "weights.format: expected a finite number"),
])
def test_malformed_weights_are_config_errors_naming_the_reward(spec, message):
    with pytest.raises(ConfigError, match=message):
        get_algorithm("gdpo", weights=spec)


def _cfg(task, algo, weights):
    return resolve(None, [("task", task), ("model", "tiny-random"), ("algo", algo), ("algo.weights", weights)])


def test_preflight_refuses_an_unknown_reward_listing_the_known_ones():
    with pytest.raises(PreflightError, match="unknown reward 'formatt' for task 'toolcall'; known rewards: "
                                             "format, correctness"):
        preflight(_cfg("toolcall", "mrtpo", '{"formatt": 0.5}'), environment=False)
    with pytest.raises(PreflightError, match=r"weights.format.linear: expected \[start, end\]"):
        preflight(_cfg("toolcall", "grpo", '{"format": {"linear": "up"}}'), environment=False)
    assert preflight(_cfg("toolcall", "gdpo", '{"format": {"cosine": [1, 0.5]}}'), environment=False)


def test_the_cli_parses_the_issue_example_into_the_config():
    cfg = _cfg("toolcall", "gdpo", '{"format": {"linear": [1.0, 0.2]}, "correctness": 1.0}')
    algo = preflight(cfg, environment=False).algorithm
    assert algo.config.weights == {"format": {"linear": [1.0, 0.2]}, "correctness": 1.0}


def test_weights_by_name_need_column_names():
    batch = RolloutBatch(rewards=torch.tensor([[1.0], [0.0]]), group_ids=torch.tensor([0, 0]),
                         response_mask=torch.ones(2, 1, dtype=torch.bool))
    with pytest.raises(ValueError, match="need the batch's column names"):
        get_algorithm("gdpo", weights={"format": 2.0}).advantages(batch)
