"""Response-level algorithms against hand-computed numbers on the fixture batch of
``algorithms_reference`` (two interleaved groups, a constant reward, a NaN-padded reward)."""

from __future__ import annotations

import math
import statistics

import algorithms_reference as ref
import pytest
import torch

from algorithms import RolloutBatch, get_algorithm
from algorithms.base import group_standardise, rewards_varying_in_group


def fixture_batch(step: int = 0) -> RolloutBatch:
    rewards = torch.tensor([r for _, r, _ in ref.ROWS], dtype=torch.float32)
    mask = torch.tensor([[t < n for t in range(ref.T)] for n in ref.LENGTHS])
    return RolloutBatch(rewards, torch.tensor(ref.GROUPS), mask, None, step)


def assert_tokens(actual: torch.Tensor, expected: list[list[float]], tol: float = 1e-5) -> None:
    assert actual.shape == (len(expected), len(expected[0]))
    for b, row in enumerate(expected):
        for t, value in enumerate(row):
            assert actual[b, t].item() == pytest.approx(value, abs=tol), (b, t)


# -- literal values worked out on paper (see the derivation in each comment) ---------------------

# group 7 (rows 0, 2, 4): r0 = [1, 0, 1]: mean 2/3, sample std sqrt(1/3) -> [.57735, -1.1547, .57735]
#                         r1 = [.5, 0, 1]: mean .5, sample std .5        -> [0, -1, 1]
# group 3 (rows 1, 3, 5): r0 constant -> 0; r1 = [0, 1, 0] -> [-.57735, 1.1547, -.57735]
#                         r2 = [1, NaN, 0]: mean .5, std sqrt(.5) -> [.70711, 0, -.70711]
GDPO_S = [0.57735, 0.12976, -2.15470, 1.15470, 1.57735, -1.28446]
GRPO_A = [0.32026, 0.57735, -1.12090, 0.57735, 0.80064, -1.15470]  # sums [1.5,0,2] and [2,2,1]


def test_group_standardise_literal_values() -> None:
    A = group_standardise(fixture_batch().rewards, torch.tensor(ref.GROUPS))
    expected = [[0.57735, 0.0, 0.0], [0.0, -0.57735, 0.70711], [-1.15470, -1.0, 0.0],
                [0.0, 1.15470, 0.0], [0.57735, 1.0, 0.0], [0.0, -0.57735, -0.70711]]
    assert_tokens(A, expected, tol=1e-4)
    assert A[3, 0].item() == 0.0 and A[1, 0].item() == 0.0  # constant reward: exactly 0


def test_group_standardise_edge_cases() -> None:
    table = [  # (rewards, groups, expected)
        ([[1.0], [2.0], [3.0]], [0, 1, 2], [0.0, 0.0, 0.0]),  # groups of one
        ([[0.1], [0.1], [0.1]], [0, 0, 0], [0.0, 0.0, 0.0]),  # constant, not exactly representable
        ([[ref.NAN], [1.0], [3.0]], [5, 5, 5], [0.0, -0.70711, 0.70711]),
        ([[ref.NAN], [ref.NAN]], [0, 0], [0.0, 0.0]),
    ]
    for rewards, groups, expected in table:
        A = group_standardise(torch.tensor(rewards), torch.tensor(groups))
        assert A[:, 0].tolist() == pytest.approx(expected, abs=1e-4)


def test_varying_pairs() -> None:
    v = rewards_varying_in_group(fixture_batch().rewards, torch.tensor(ref.GROUPS))
    expected = [[True, True, False], [False, True, True], [True, True, False],
                [False, True, False], [True, True, False], [False, True, True]]
    assert v.tolist() == expected


def test_grpo_literal() -> None:
    adv = get_algorithm("grpo").token_advantages(fixture_batch())
    assert_tokens(adv, ref.tokens(GRPO_A), tol=1e-4)


@pytest.mark.parametrize("mode", ["paper", "verl", "trl", "none"])
def test_gdpo_rescale_modes(mode: str) -> None:
    A = ref.per_reward_z()
    S = [sum(row) for row in A]
    assert S == pytest.approx(GDPO_S, abs=1e-4)
    shift, scale = ref.rescale(S, mode)
    adv = get_algorithm("gdpo", rescale=mode).token_advantages(fixture_batch())
    assert_tokens(adv, ref.tokens([(s - shift) / scale for s in S]))


def test_gdpo_paper_rescale_literal_denominator() -> None:
    sd = statistics.stdev(GDPO_S)  # 1.2786 by hand from the six S values
    adv = get_algorithm("gdpo").token_advantages(fixture_batch())
    assert adv[2, 0].item() == pytest.approx(-2.15470 / sd, abs=1e-4)
    assert adv[2, 2].item() == 0.0 and adv[5, 1].item() == 0.0  # masked tokens


def test_gdpo_custom_weights() -> None:
    A = ref.per_reward_z()
    c = [2.0, 0.5, 1.0]
    S = [sum(ci * a for ci, a in zip(c, row)) for row in A]
    adv = get_algorithm("gdpo", weights=c).token_advantages(fixture_batch())
    assert_tokens(adv, ref.tokens([s / (statistics.stdev(S) + 1e-6) for s in S]))


def test_saw() -> None:
    cvs = []
    for k in range(ref.K):
        col = [v for v in ref.reward_column(k) if not ref.isnan(v)]
        cvs.append(statistics.stdev(col) / (abs(statistics.mean(col)) + 1e-8))
    w = [3 * cv / (sum(cvs) + 1e-8) for cv in cvs]
    assert sum(w) == pytest.approx(3.0)
    S = [sum(wk * a for wk, a in zip(w, row)) for row in ref.per_reward_z()]
    algo = get_algorithm("saw")
    assert algo.reward_weights(fixture_batch()).tolist() == pytest.approx(w, rel=1e-5)
    assert_tokens(algo.token_advantages(fixture_batch()), ref.tokens([s / (statistics.stdev(S) + 1e-6) for s in S]))


def test_saw_all_constant_falls_back_to_equal_weights() -> None:
    batch = RolloutBatch(torch.ones(4, 2), torch.tensor([0, 0, 1, 1]), torch.ones(4, 3, dtype=torch.bool))
    assert get_algorithm("saw").reward_weights(batch).tolist() == [1.0, 1.0]


def test_saw_shift() -> None:
    # correctness in [-3, 3] shifted by +3 before the CV: column [-3, 3] -> [0, 6], CV = 4.2426 / 3
    batch = RolloutBatch(torch.tensor([[0.0, -3.0], [1.0, 3.0]]), torch.tensor([0, 0]), torch.ones(2, 1, dtype=torch.bool))
    w = get_algorithm("saw", cv_shift=(0.0, 3.0)).reward_weights(batch)
    cv = [math.sqrt(0.5) / 0.5, math.sqrt(18) / 3]
    assert w.tolist() == pytest.approx([2 * c / sum(cv) for c in cv], rel=1e-5)


def test_dara() -> None:
    # reward 0 varies in 1 of 2 groups (d = .5), rewards 1 and 2 in all groups where present (d = 1)
    lam = [2.0, 1.0, 1.0]
    algo = get_algorithm("dara")
    assert algo.reward_weights(fixture_batch()).tolist() == pytest.approx(lam)
    S = [sum(a + (lk - 1) * max(a, 0.0) for lk, a in zip(lam, row)) for row in ref.per_reward_z()]
    assert_tokens(algo.token_advantages(fixture_batch()), ref.tokens([s / (statistics.stdev(S) + 1e-6) for s in S]))
    capped = get_algorithm("dara", cap=1.5).reward_weights(fixture_batch())
    assert capped.tolist() == pytest.approx([1.5, 1.0, 1.0])


def test_dvao() -> None:
    adv = [0.0] * ref.B
    for members in ref.group_members().values():
        mus, sigmas = [], []
        for k in range(ref.K):
            vals = [ref.ROWS[i][1][k] for i in members if not ref.isnan(ref.ROWS[i][1][k])]
            mus.append(statistics.mean(vals) if vals else 0.0)
            sigmas.append(statistics.pstdev(vals) if vals else 0.0)
        w = [s / sum(sigmas) for s in sigmas]
        denom = sum(wk * s for wk, s in zip(w, sigmas)) + 1e-8
        for i in members:
            r = ref.ROWS[i][1]
            adv[i] = sum(w[k] * (r[k] - mus[k]) for k in range(ref.K) if not ref.isnan(r[k])) / denom
    assert_tokens(get_algorithm("dvao").token_advantages(fixture_batch()), ref.tokens(adv))


def test_gd2po() -> None:
    A = ref.per_reward_z()
    keep = [not (any(a > 0 for a in row) and any(a < 0 for a in row)) for row in A]
    assert keep == [True, False, True, True, True, True]  # row 1: r1 below its mean, r2 above
    S = [sum(row) for row in A]
    kept = [s for s, k in zip(S, keep) if k]
    mu, sd = statistics.mean(kept), statistics.stdev(kept)
    share = {7: 1.0, 3: 2 / 3}
    adv = [((s - mu) / (sd + 1e-4)) * share[g] if k else 0.0 for s, k, g in zip(S, keep, ref.GROUPS)]
    assert_tokens(get_algorithm("gd2po").token_advantages(fixture_batch()), ref.tokens(adv))


def test_sa_mrpo() -> None:
    c = []
    for k in range(ref.K):
        col = [v for v in ref.reward_column(k) if not ref.isnan(v)]
        c.append(1 - 0.5 * (statistics.mean(col) - min(col)) / (max(col) - min(col)))
    assert c == pytest.approx([1 - 0.5 * 5 / 6, 1 - 0.5 * 2.5 / 6, 0.75])
    S = [sum(ck * a for ck, a in zip(c, row)) for row in ref.per_reward_z()]
    algo = get_algorithm("sa-mrpo")
    assert_tokens(algo.token_advantages(fixture_batch()), ref.tokens([s / (statistics.stdev(S) + 1e-6) for s in S]))
    ranged = get_algorithm("sa-mrpo", low=(0.0, 0.0, 0.0), high=(2.0, 2.0, 2.0)).reward_weights(fixture_batch())
    assert ranged.tolist() == pytest.approx([1 - 0.25 * 5 / 6, 1 - 0.25 * 2.5 / 6, 0.875], rel=1e-5)


@pytest.mark.parametrize("name", ["grpo", "gdpo", "saw", "dara", "dvao", "gd2po", "sa-mrpo"])
def test_response_level_share_one_value_per_response(name: str) -> None:
    batch = fixture_batch()
    adv = get_algorithm(name).token_advantages(batch)
    assert adv.dtype == torch.float32
    assert torch.all(adv[~batch.response_mask] == 0)
    for b, n in enumerate(ref.LENGTHS):
        assert torch.all(adv[b, :n] == adv[b, 0])
    assert get_algorithm(name).replay_request == "none"
