"""Per-reward diagnostics (algorithms/diagnostics.py) on hand-built batches with hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from algorithms import RolloutBatch, get_algorithm
from algorithms.diagnostics import batch_diagnostics, name_index, reward_contributions, top_mass_share
from harness.metric_names import reward_mean_name

A = 1 / math.sqrt(2)  # the group z-score of {1, 0} with the sample std


def _mask(lengths, T):
    return torch.tensor([[t < n for t in range(T)] for n in lengths])


def test_gdpo_contributions_group_shares_and_std_by_hand():
    # three groups of two; group 0: only "format" varies; group 1: both vary; group 2: nothing varies
    rewards = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]])
    batch = RolloutBatch(rewards=rewards, group_ids=torch.tensor([0, 0, 1, 1, 2, 2]),
                         response_mask=_mask([2, 2, 3, 1, 1, 1], 3), reward_names=("format", "correctness"))
    algo = get_algorithm("gdpo")
    ids, names = name_index([["format", "correctness"]] * 6, 2)
    out = batch_diagnostics(batch, ids, names, reward_contributions(algo, batch))
    # S = [A, -A, 2A, -2A, 0, 0]; paper rescale: sample std over 6 responses = sqrt(5 A^2 ... ) by hand:
    # sum S^2 = A^2 (1 + 1 + 4 + 4) = 5, mean 0 -> std = sqrt(5 / 5) = 1
    scale = 1.0 + 1e-6
    tokens = 2 + 2 + 3 + 1 + 1 + 1
    assert out["adv/format/abs_mean"] == pytest.approx(A * (2 + 2 + 3 + 1) / scale / tokens)
    assert out["adv/format/mean"] == pytest.approx(A * (2 - 2 + 3 - 1) / scale / tokens)
    assert out["adv/correctness/abs_mean"] == pytest.approx(A * (3 + 1) / scale / tokens)
    assert out["adv/correctness/mean"] == pytest.approx(A * (3 - 1) / scale / tokens)
    assert out["reward/format/frac_groups_varying"] == pytest.approx(2 / 3)
    assert out["reward/correctness/frac_groups_varying"] == pytest.approx(1 / 3)
    assert out["reward/correctness/frac_groups_no_signal"] == pytest.approx(2 / 3)
    assert out["frac_groups_no_signal"] == pytest.approx(1 / 3)
    assert out["reward/format/std"] == pytest.approx(torch.tensor([1.0, 0, 1, 0, 1, 1]).std().item())
    assert out["reward/format/weight"] == 1.0
    assert out["credit/format/replay_share"] == 0.0
    # the parts add up to the advantage (the paper's rescale has no shift)
    adv = algo.token_advantages(batch)
    assert torch.allclose(reward_contributions(algo, batch).per_token.sum(1), adv, atol=1e-6)


def test_grpo_parts_add_up_to_its_advantage():
    rewards = torch.tensor([[1.0, 0.5], [0.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    batch = RolloutBatch(rewards=rewards, group_ids=torch.tensor([0, 0, 0, 0]), response_mask=_mask([2, 3, 1, 2], 3))
    algo = get_algorithm("grpo")
    parts = reward_contributions(algo, batch).per_token
    assert torch.allclose(parts.sum(1), algo.token_advantages(batch), atol=1e-6)
    # reward 0's part of response 0: (1 - mean(1, 0, 1, 0)) / std(S), S = [1.5, 0, 2, 1]
    std_s = torch.tensor([1.5, 0.0, 2.0, 1.0]).std().item()
    assert parts[0, 0, 0].item() == pytest.approx(0.5 / (std_s + 1e-6))


def test_mrtpo_credit_mass_on_read_tokens_relevance_and_concentration_by_hand():
    # one group of two, one reward; q puts the first response's relevance on token 0, the second's on 2-3
    relevance = torch.tensor([[[1.0, 0.0, 0.0, 0.0]], [[0.0, 0.0, 1.0, 1.0]]])
    batch = RolloutBatch(rewards=torch.tensor([[1.0], [0.0]]), group_ids=torch.tensor([0, 0]),
                         response_mask=torch.ones(2, 4, dtype=torch.bool), relevance=relevance)
    algo = get_algorithm("mrtpo", beta=0.5, warmup_steps=0, bound=False)
    c = reward_contributions(algo, batch)
    # w = 0.5 + 0.5 q / qbar: [2.5, .5, .5, .5] and [.5, .5, 1.5, 1.5]; S = [A, -A], std_B(S) = 1
    w = torch.tensor([[2.5, 0.5, 0.5, 0.5], [0.5, 0.5, 1.5, 1.5]])
    assert torch.allclose(c.token_weights[:, 0], w)
    scale = 1.0 + 1e-6
    assert torch.allclose(c.per_token[:, 0], torch.tensor([[A], [-A]]) / scale * w, atol=1e-6)
    assert torch.allclose(c.per_token.sum(1), algo.token_advantages(batch), atol=1e-6)
    read = torch.tensor([[[True, False, False, False]], [[False, False, True, True]]])
    ids, names = name_index([["correctness"]] * 2, 1)
    out = batch_diagnostics(batch, ids, names, c, read, torch.ones(2, 1, dtype=torch.bool))
    assert out["credit/correctness/read_mass"] == pytest.approx((2.5 + 3.0) / 8)
    assert out["credit/correctness/read_tokens"] == pytest.approx(3 / 8)
    assert out["credit/correctness/q_mean"] == pytest.approx(3 / 8)
    assert out["credit/correctness/top80_share"] == pytest.approx(3 / 4)
    assert out["credit/correctness/replay_share"] == 1.0
    assert out["adv/correctness/abs_mean"] == pytest.approx(A / scale)  # weights average to 1


def test_pairs_not_replayed_are_left_out_of_the_credit_entries():
    relevance = torch.tensor([[[1.0, 0.0]], [[float("nan")] * 2]])
    batch = RolloutBatch(rewards=torch.tensor([[1.0], [0.0]]), group_ids=torch.tensor([0, 0]),
                         response_mask=torch.ones(2, 2, dtype=torch.bool), relevance=relevance)
    c = reward_contributions(get_algorithm("mrtpo", warmup_steps=0), batch)
    ids, names = name_index([["r"]] * 2, 1)
    out = batch_diagnostics(batch, ids, names, c)
    assert out["credit/r/replay_share"] == 0.5 and out["credit/r/q_mean"] == pytest.approx(0.5)
    assert "credit/r/read_mass" not in out  # no verifier spans given


@pytest.mark.parametrize("w, expected", [
    ([1.0, 1.0, 1.0, 1.0, 1.0], 0.8),  # uniform: 4 of 5 tokens hold 80%
    ([4.0, 0.25, 0.25, 0.25, 0.25], 0.2),  # one token holds 80%
    ([2.0, 2.0, 0.5, 0.5, 0.0], 0.4),  # 2 + 2 = 4 = 0.8 * 5: two tokens suffice
    ([2.0, 1.5, 1.0, 0.5, 0.0], 0.6),  # 2 + 1.5 < 4: a third token is needed
])
def test_top_mass_share_table(w, expected):
    share = top_mass_share(torch.tensor([[w]]), torch.ones(1, 5, dtype=torch.bool))
    assert share.item() == pytest.approx(expected)


def test_names_aggregate_by_family_across_columns():
    # instruction following: column k holds different constraints in different prompts
    rewards = torch.tensor([[1.0, 0.0], [0.0, 0.0], [1.0, float("nan")], [1.0, float("nan")]])
    batch = RolloutBatch(rewards=rewards, group_ids=torch.tensor([0, 0, 1, 1]), response_mask=_mask([1, 1, 1, 1], 1))
    ids, names = name_index([["a", "b"], ["a", "b"], ["b"], ["b"]], 2)
    out = batch_diagnostics(batch, ids, names)
    assert out["reward/a/frac_groups_varying"] == 1.0
    assert out["reward/b/frac_groups_varying"] == 0.0  # constant in both groups that hold it
    assert out["frac_groups_no_signal"] == 0.5


@pytest.mark.parametrize("key, name", [("reward/format", "format"), ("reward/format/std", None),
                                       ("reward/punctuation:no_comma", "punctuation:no_comma"),
                                       ("reward/format/frac_groups_no_signal", None), ("reward_mean", None),
                                       ("adv/format/mean", None)])
def test_reward_mean_keys(key, name):
    assert reward_mean_name(key) == name


class _ReadingToy:
    """The toy task with the "short" verifier reporting that it read the first 4 characters, and the
    "format" verifier reporting no spans at all."""

    def __new__(cls):
        from toy_task import ToyTask

        class Reading(ToyTask):
            def score(self, example, response):
                verdicts = super().score(example, response)
                for v in verdicts:
                    if v.reward == "short" and response:
                        v.spans = [(0, min(4, len(response)))]
                    elif v.reward == "format":
                        v.spans = []
                return verdicts

        return Reading()


@pytest.mark.usefixtures("one_torch_thread")
def test_a_local_mrtpo_step_logs_every_diagnostic_family(tmp_path):
    from toy_task import tiny_config

    from harness.backends.local import LocalBackend
    from harness.records import RunRecord

    cfg = tiny_config(str(tmp_path / "m"), "mrtpo", steps=1)
    rec = RunRecord.open(cfg)
    try:
        LocalBackend(cfg, task=_ReadingToy()).train(rec)
    finally:
        rec.unlock()
    (row,) = rec.metrics()
    assert row["frac_groups_no_signal"] < 1.0
    for name in ("format", "short"):
        assert {f"reward/{name}/std", f"adv/{name}/abs_mean", f"credit/{name}/replay_share"} <= set(row)
    assert row["credit/short/replay_share"] > 0 and 0 < row["credit/short/q_mean"] <= 1
    assert 0 < row["credit/short/top80_share"] <= 1  # uniform: ceil(0.8 T) / T
    assert 0 <= row["credit/short/read_mass"] <= 1 and 0 < row["credit/short/read_tokens"] <= 1
    assert "credit/format/read_mass" not in row  # its verifier reports no spans
