"""SAW shifts rewards that can be negative by their declared lower bound before the coefficient of
variation (the public SAW code's +3 on tool calling's [-3, 3] correctness reward)."""

from __future__ import annotations

import statistics
from types import SimpleNamespace

import pytest
import torch

from algorithms import RolloutBatch, get_algorithm
from harness.training.batch import reward_lows
from tasks.registry import make_task

# early tool-calling training: format often right, correctness near zero on average
REWARDS = [[1.0, -0.2], [0.0, 0.1], [1.0, 0.05], [1.0, -0.1]]


def batch(reward_low: list[float] | None) -> RolloutBatch:
    return RolloutBatch(torch.tensor(REWARDS), torch.tensor([0, 0, 1, 1]), torch.ones(4, 3, dtype=torch.bool),
                        reward_low=None if reward_low is None else torch.tensor(reward_low))


def saw_weights(columns: list[list[float]]) -> list[float]:
    cvs = [statistics.stdev(c) / (abs(statistics.mean(c)) + 1e-8) for c in columns]
    return [len(cvs) * cv / (sum(cvs) + 1e-8) for cv in cvs]


@pytest.mark.parametrize("reward_low,shift", [
    ([0.0, -3.0], [0.0, 3.0]),  # tool calling: correctness shifted by +3
    ([0.0, 0.0], [0.0, 0.0]),  # binary rewards: no shift
    ([float("nan"), -3.0], [0.0, 3.0]),  # an undeclared range: no shift for that column
    (None, [0.0, 0.0]),  # no ranges given: no shift
])
def test_shift_comes_from_declared_ranges(reward_low, shift):
    columns = [[row[k] + shift[k] for row in REWARDS] for k in range(2)]
    got = get_algorithm("saw").reward_weights(batch(reward_low))
    assert got.tolist() == pytest.approx(saw_weights(columns), rel=1e-5)


def test_without_the_shift_a_near_zero_mean_starves_format():
    unshifted = get_algorithm("saw", shift_from_ranges=False).reward_weights(batch([0.0, -3.0]))
    shifted = get_algorithm("saw").reward_weights(batch([0.0, -3.0]))
    assert float(unshifted[0]) < 0.5 and float(shifted[0]) > 1.5  # the format reward keeps its weight
    explicit = get_algorithm("saw", cv_shift=(0.0, 1.0)).reward_weights(batch([0.0, -3.0]))
    assert explicit.tolist() == pytest.approx(saw_weights([[r[0] for r in REWARDS], [r[1] + 1 for r in REWARDS]]))


def test_the_backend_reads_each_tasks_ranges():
    def rollout(names):
        return SimpleNamespace(example=SimpleNamespace(reward_names=names))

    tool = make_task("toolcall")
    assert reward_lows([rollout(["format", "correctness"])], tool, 2).tolist() == [0.0, -3.0]
    sql = make_task("text2sql")
    assert reward_lows([rollout(["format", "executable", "execution"])], sql, 3).tolist() == [0.0, 0.0, 0.0]
    ifollow = make_task("ifollow")
    lows = reward_lows([rollout(["c0:punctuation:no_comma"]), rollout(["c0:a", "c1:b"])], ifollow, 2)
    assert lows.tolist() == [0.0, 0.0]
