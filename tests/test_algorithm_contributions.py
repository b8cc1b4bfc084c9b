"""An algorithm's per-reward split, ``Algorithm.contributions``, is all the diagnostics read of it:
the families here are defined in this file only, and ``algorithms/diagnostics.py`` names none."""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from algorithms.base import (
    Advantages,
    Algorithm,
    Contributions,
    RolloutBatch,
    broadcast_to_tokens,
    group_standardise,
)
from harness.training.step_diagnostics import step_diagnostics

ROOT = Path(__file__).resolve().parents[1]
A = 0.5 / (math.sqrt(0.5) + 1e-6)  # the group z-score of {1, 0}: sample std 1/sqrt(2), eps 1e-6


@dataclass
class NoConfig:
    """No parameters."""


class ColumnSum(Algorithm):
    """A new family: the sum of the per-reward group z-scores, no batch rescale, on every valid token.
    Its split is each column's z-score, and its token weights are uniform (every pair "weighted")."""

    name = "column-sum"
    config_class = NoConfig

    def advantages(self, batch: RolloutBatch) -> Advantages:
        z = group_standardise(batch.rewards, batch.group_ids)
        return Advantages(broadcast_to_tokens(z.sum(1), batch.response_mask))

    def contributions(self, batch: RolloutBatch, result: Advantages) -> Contributions:
        z = group_standardise(batch.rewards, batch.group_ids)
        m = batch.response_mask.unsqueeze(1).to(torch.float32)
        per_token = z.unsqueeze(-1) * m
        return Contributions(per_token, reward_weights=torch.tensor([1.0, 0.5]),
                             token_weights=torch.ones_like(per_token),
                             relevance_weighted=torch.ones(batch.rewards.shape, dtype=torch.bool))


class SummedOnly(ColumnSum):
    """The same advantage without a split (the base class's default)."""

    def contributions(self, batch, result):
        return Algorithm.contributions(self, batch, result)


def _batch():
    # one group of two: response 0 wins "format" (length 2 tokens), response 1 wins "answer" (3 tokens)
    mask = torch.tensor([[True, True, False], [True, True, True]])
    return RolloutBatch(rewards=torch.tensor([[1.0, 0.0], [0.0, 1.0]]), group_ids=torch.tensor([0, 0]),
                        response_mask=mask, reward_names=("format", "answer"))


def _rollouts():
    return [SimpleNamespace(example=SimpleNamespace(reward_names=["format", "answer"]))] * 2


def test_a_new_family_gets_its_per_reward_diagnostics_by_writing_one_method():
    batch, algo = _batch(), ColumnSum()
    result = algo.advantages(batch)
    row = step_diagnostics(algo, batch, _rollouts(), tokenizer=None, advantages=result)
    # format: +A on response 0's 2 tokens, -A on response 1's 3 tokens, over 5 tokens
    assert row["adv/format/abs_mean"] == pytest.approx(A)
    assert row["adv/format/mean"] == pytest.approx(A * (2 - 3) / 5)
    assert row["adv/answer/mean"] == pytest.approx(A * (-2 + 3) / 5)
    assert row["reward/format/weight"] == 1.0 and row["reward/answer/weight"] == 0.5
    assert row["credit/format/top80_share"] == pytest.approx((2 / 2 + 3 / 3) / 2)  # uniform: ceil(0.8 T) / T
    assert "credit/format/q_mean" not in row  # no relevance in the batch
    parts = algo.contributions(batch, result).per_token
    assert torch.allclose(parts.sum(1), result.tokens)


def test_without_a_split_an_algorithm_gets_only_the_reward_entries():
    batch, algo = _batch(), SummedOnly()
    row = step_diagnostics(algo, batch, _rollouts(), tokenizer=None, advantages=algo.advantages(batch))
    assert row["reward/format/frac_groups_varying"] == 1.0 and "credit/format/replay_share" in row
    assert not [k for k in row if k.startswith("adv/") or k.endswith("/weight")]


def test_the_diagnostics_module_names_no_algorithm_family():
    tree = ast.parse((ROOT / "algorithms" / "diagnostics.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "collections.abc", "torch", "algorithms.base"}, imported
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "isinstance" not in calls


@pytest.mark.parametrize("kwargs, message", [
    ({"reward_weights": torch.ones(3)}, "reward_weights must be"),
    ({"token_weights": torch.ones(2, 2, 3)}, "token_weights need relevance_weighted"),
    ({"token_weights": torch.ones(2, 2, 4), "relevance_weighted": torch.ones(2, 2, dtype=torch.bool)},
     "per_token's shape"),
    ({"token_weights": torch.ones(2, 2, 3), "relevance_weighted": torch.ones(2, 3, dtype=torch.bool)},
     "relevance_weighted must be"),
])
def test_contributions_refuse_tensors_of_the_wrong_shape(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Contributions(torch.zeros(2, 2, 3), **kwargs)
    with pytest.raises(ValueError, match="per_token must be"):
        Contributions(torch.zeros(2, 3))
