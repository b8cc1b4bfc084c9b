"""The field's per-token credit methods (forking tokens, GTPO, KTAE), per reward and summed.

Hand-computed token advantages on small batches, and the invariants: uniform entropy gives the
underlying advantage exactly (GDPO, or GRPO for the summed forms); rho = 1 gives it exactly; KTAE
with no token-outcome association adds nothing. The bounds and the fuzz over degenerate batches
are in test_algorithms_bounds.py, the declared ranges in test_algorithm_declared_ranges.py."""

from __future__ import annotations

import math

import pytest
import torch

from algorithms import RolloutBatch, get_algorithm
from algorithms.base import ConfigError, ReplayRequest
from algorithms.ktae import fisher_p, information_gain, key_token_values
from algorithms.relevance import token_entropy

NAN = float("nan")


def pair_batch(rewards, entropy=None, ids=None) -> RolloutBatch:
    """One group of len(rewards) responses, as long as the entropy or id rows (4 tokens without them)."""
    r = torch.tensor(rewards, dtype=torch.float32)
    B = r.shape[0]
    T = len(entropy[0]) if entropy is not None else len(ids[0]) if ids is not None else 4
    return RolloutBatch(rewards=r, group_ids=torch.zeros(B, dtype=torch.long),
                        response_mask=torch.ones(B, T, dtype=torch.bool), step=0,
                        token_entropy=None if entropy is None else torch.tensor(entropy),
                        token_ids=None if ids is None else torch.tensor(ids))


def gdpo_uniform(batch: RolloutBatch) -> torch.Tensor:
    return get_algorithm("gdpo").response_advantages(batch)


# -- what each asks of the step -----------------------------------------------------------------


@pytest.mark.parametrize("name, kind", [("forking", "entropy"), ("forking-summed", "entropy"), ("gtpo", "entropy"),
                                        ("gtpo-summed", "entropy"), ("ktae", "token_ids"),
                                        ("ktae-summed", "token_ids")])
def test_each_method_asks_for_its_signal(name, kind):
    algo = get_algorithm(name)
    assert algo.replay_request is ReplayRequest(kind) and algo.needs_replay(0)


@pytest.mark.parametrize("name, params", [("forking", {"rho": 1.0}), ("gtpo", {"alpha_2": 0.0}),
                                          ("ktae", {"scale": 0.0})])
def test_a_setting_that_moves_nothing_asks_for_nothing(name, params):
    assert not get_algorithm(name, **params).needs_replay(0)


def test_a_missing_signal_is_an_error_naming_the_request():
    with pytest.raises(ValueError, match="token_entropy.*entropy request"):
        get_algorithm("gtpo").token_advantages(pair_batch([[1.0], [0.0]]))
    with pytest.raises(ValueError, match="token_ids.*token_ids request"):
        get_algorithm("ktae").token_advantages(pair_batch([[1.0], [0.0]]))


# -- the entropy -----------------------------------------------------------------------------------


def test_token_entropy_by_hand():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25, 0.0], [1.0, 0.0, 0.0, 0.0], [0.25] * 4]))
    expected = [-(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25)), 0.0, math.log(4)]
    assert token_entropy(logits, chunk_size=2).tolist() == pytest.approx(expected, abs=1e-6)


# -- forking tokens ------------------------------------------------------------------------------

FORK_H = [[0.1, 2.0, 0.3, 1.0], [0.5, 0.2, 3.0, 0.4]]


@pytest.mark.parametrize("rho, kept", [(0.25, [[0, 1, 0, 0], [0, 0, 1, 0]]),  # top 2 of 8: 3.0 and 2.0
                                       (0.5, [[0, 1, 0, 1], [1, 0, 1, 0]]),  # top 4: 3.0, 2.0, 1.0, 0.5
                                       (0.3, [[0, 1, 0, 1], [0, 0, 1, 0]])])  # ceil(2.4) = 3
def test_forking_keeps_the_batch_top_rho_tokens_by_hand(rho, kept):
    batch = pair_batch([[1.0, 1.0], [0.0, 0.0]], FORK_H)
    U = gdpo_uniform(batch)
    adv = get_algorithm("forking", rho=rho).token_advantages(batch)
    expected = torch.tensor(kept, dtype=torch.float32) * U.unsqueeze(1)
    assert torch.equal(adv, expected)


def test_forking_summed_masks_grpo_advantage():
    batch = pair_batch([[1.0, 0.0], [0.0, 0.0]], FORK_H)
    U = get_algorithm("grpo").response_advantages(batch)
    adv = get_algorithm("forking-summed", rho=0.25).token_advantages(batch)
    assert torch.equal(adv, torch.tensor([[0, 1, 0, 0], [0, 0, 1, 0]], dtype=torch.float32) * U.unsqueeze(1))


def test_forking_pool_leaves_out_responses_without_signal():
    # group 1 (rewards constant) holds the highest entropies; they do not count towards the top rho
    batch = RolloutBatch(torch.tensor([[1.0], [0.0], [1.0], [1.0]]), torch.tensor([0, 0, 1, 1]),
                         torch.ones(4, 2, dtype=torch.bool), token_entropy=torch.tensor(
                             [[1.0, 2.0], [3.0, 0.5], [9.0, 9.0], [9.0, 9.0]]))
    adv = get_algorithm("forking", rho=0.5).token_advantages(batch)
    kept = (adv != 0)[:2]
    assert kept.tolist() == [[False, True], [True, False]]
    assert torch.all(adv[2:] == 0)


@pytest.mark.parametrize("name, base", [("forking", "gdpo"), ("forking-summed", "grpo")])
def test_rho_one_is_the_underlying_advantage_exactly(name, base):
    batch = pair_batch([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.1, 2.0, 0.3, 1.0]] * 3)
    assert torch.equal(get_algorithm(name, rho=1.0).token_advantages(batch),
                       get_algorithm(base).token_advantages(batch))


def test_forking_keeps_a_response_without_entropy_whole():
    batch = pair_batch([[1.0], [0.0]], [[0.1, 2.0, 0.3, 1.0], [NAN, 1.0, 1.0, 1.0]])
    adv = get_algorithm("forking", rho=0.25).token_advantages(batch)
    U = gdpo_uniform(batch)
    assert torch.equal(adv[1], U[1].expand(4))
    assert (adv[0] != 0).tolist() == [False, True, False, False]  # ceil(0.25 * 4) = 1 token of the pool


# -- GTPO -------------------------------------------------------------------------------------------


def test_gtpo_positive_and_negative_responses_by_hand():
    # response 0 is above its group in both rewards (weights H / mean H), response 1 below (inverse entropy)
    batch = pair_batch([[1.0, 1.0], [0.0, 0.0]], [[1.0, 2.0, 3.0, 2.0], [1.0, 1.0, 1.0, 0.5]])
    U = gdpo_uniform(batch)
    adv = get_algorithm("gtpo", alpha_1=1.0, alpha_2=0.1).token_advantages(batch)
    rho_pos = torch.tensor([0.5, 1.0, 1.5, 1.0])
    inv = 1 / (torch.tensor([1.0, 1.0, 1.0, 0.5]) + 1e-6)
    rho_neg = inv / inv.mean()  # about [0.8, 0.8, 0.8, 1.6]: the confident token carries the blame
    w = torch.stack([(1 + 0.1 * rho_pos) / 1.1, (1 + 0.1 * rho_neg) / 1.1])
    torch.testing.assert_close(adv, U.unsqueeze(1) * w, rtol=1e-6, atol=1e-7)
    assert int(adv[1].argmin()) == 3
    torch.testing.assert_close(adv.mean(1), U)  # each response keeps its advantage's mean


def test_gtpo_per_reward_moves_each_reward_by_its_own_sign():
    # group 0: response 0 is above the group in reward 0 and below in reward 1, response 1 the other way
    # round: GDPO's advantage is 0, but per reward the high-entropy tokens take reward 0's credit and the
    # confident ones reward 1's blame. Group 1 carries a uniform advantage, so the bound does not bite.
    H = [[0.5, 2.0, 1.0, 0.5], [2.0, 0.5, 0.5, 1.0], [1.0, 2.0, 3.0, 2.0], [1.0, 1.0, 1.0, 0.5]]
    batch = RolloutBatch(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]), torch.tensor([0, 0, 1, 1]),
                         torch.ones(4, 4, dtype=torch.bool), token_entropy=torch.tensor(H))
    U = gdpo_uniform(batch)
    assert torch.all(U[:2] == 0) and torch.all(U[2:] != 0)
    result = get_algorithm("gtpo").advantages(batch)
    assert result.metrics["bound_scale"] == 1.0
    gdpo = get_algorithm("gdpo")
    agg = gdpo.aggregate(batch)
    a = agg.reward_parts(gdpo.rescaled(agg, batch.response_mask)[2])  # group 0: [[+x, -x], [-x, +x]]
    Ht = torch.tensor(H)
    pos = (1 + 0.1 * Ht / Ht.mean(1, keepdim=True)) / 1.1
    inv = 1 / (Ht + 1e-6)
    neg = (1 + 0.1 * inv / inv.mean(1, keepdim=True)) / 1.1
    expected = torch.stack([a[0, 0] * (pos[0] - 1) + a[0, 1] * (neg[0] - 1),
                            a[1, 0] * (neg[1] - 1) + a[1, 1] * (pos[1] - 1)])
    torch.testing.assert_close(result.tokens[:2], expected, rtol=1e-5, atol=1e-7)
    assert float(result.tokens[0, 1]) > 0 > float(result.tokens[0, 0])  # H = 2 takes credit, H = 0.5 blame
    torch.testing.assert_close(result.tokens[2:], U[2:].unsqueeze(1) * torch.stack([pos[2], neg[3]]))
    # the summed form sees one reward, constant in group 0: nothing to move there
    assert torch.all(get_algorithm("gtpo-summed").token_advantages(batch)[:2] == 0)


def test_the_per_reward_forms_are_bounded_as_mrtpo_is():
    # the rewards' parts nearly cancel in every response: GDPO divides a tiny spread of S, each part is
    # about 1e5 while U is about 0.5; Eq. 8 keeps what the tokens receive within the uniform second moment
    batch = RolloutBatch(torch.tensor([[0.5, 0.0], [0.0, 1.0]]), torch.tensor([0, 0]),
                         torch.ones(2, 2, dtype=torch.bool), token_entropy=torch.tensor([[3.2, 1.1], [0.97, 3.3]]),
                         token_ids=torch.tensor([[1, 2], [3, 4]]))
    U = gdpo_uniform(batch)
    result = get_algorithm("gtpo").advantages(batch)
    assert result.metrics["bound_scale"] < 1e-3
    moved = result.tokens - U.unsqueeze(1)
    assert float((moved ** 2).sum()) <= float(2 * (U ** 2).sum()) * (1 + 1e-4)
    # KTAE's values for the two rewards mirror each other here (one response is positive in each): they cancel
    ktae = get_algorithm("ktae").advantages(batch)
    assert ktae.metrics["bound_scale"] == 1.0 and torch.equal(ktae.tokens, U.unsqueeze(1).expand(2, 2))


@pytest.mark.parametrize("name, base, params", [
    ("gtpo", "gdpo", {}), ("gtpo", "gdpo", {"alpha_1": 0.0, "alpha_2": 1.0}), ("gtpo", "gdpo", {"rescale": "trl"}),
    ("gtpo-summed", "grpo", {}), ("gtpo-summed", "grpo", {"alpha_1": 0.0, "alpha_2": 1.0})])
def test_uniform_entropy_is_the_underlying_advantage_exactly(name, base, params):
    batch = pair_batch([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.7] * 4, [0.0] * 4, [3.3] * 4])
    base_params = {k: v for k, v in params.items() if k == "rescale"}
    assert torch.equal(get_algorithm(name, **params).token_advantages(batch),
                       get_algorithm(base, **base_params).token_advantages(batch))


def test_gtpo_alpha_2_zero_is_gdpo_exactly():
    batch = pair_batch([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.7, 0.1, 2.0, 0.0]] * 3)
    assert torch.equal(get_algorithm("gtpo", alpha_2=0.0).token_advantages(batch), get_algorithm("gdpo")
                       .token_advantages(batch))


# -- KTAE --------------------------------------------------------------------------------------------

# token 7 only in the two positive responses, token 6 only in the two others; 5 everywhere; 8 and 9
# once on each side (no association)
KTAE_IDS = [[5, 7, 9], [5, 7, 8], [5, 6, 8], [5, 6, 9]]


def kt_perfect() -> float:
    """KT of a token in both positive and no other response of a group of 2 + 2, by hand: Fisher's
    two-sided p = P(0) + P(2) = 1/6 + 1/6, F = exp(-2/3); IG = 1 bit; x = asin(1) - asin(0)."""
    F, IG, x = math.exp(-2 / 3), 1.0, math.pi / 2
    z = (F + IG) * x / 2
    return math.tanh(z / 2)  # = 2 sigmoid(z) - 1


def test_the_statistics_by_hand():
    a, b, c, d = (torch.tensor([v], dtype=torch.float64) for v in (2, 0, 0, 2))
    assert float(fisher_p(a, b, c, d)) == pytest.approx(1 / 3)
    assert float(information_gain(a, b, c, d)) == pytest.approx(1.0)
    one = torch.tensor([1.0], dtype=torch.float64)
    assert float(fisher_p(one, one, one, one)) == pytest.approx(1.0)
    assert float(information_gain(one, one, one, one)) == pytest.approx(0.0, abs=1e-12)
    # a 3 x 1 against 0 x 4 table: p = 4! 4! 3! 5! / (3! 0! 1! 4! 8!) summed with the rarer tables
    a, b, c, d = (torch.tensor([v], dtype=torch.float64) for v in (3, 0, 1, 4))
    p_obs = math.comb(4, 3) * math.comb(4, 0) / math.comb(8, 3)
    assert float(fisher_p(a, b, c, d)) == pytest.approx(2 * p_obs)  # the table and its mirror


def test_key_token_values_by_hand():
    values = key_token_values(torch.tensor(KTAE_IDS), torch.ones(4, 3, dtype=torch.bool),
                              torch.tensor([True, True, False, False]), 1.0, 1.0, 1.0)
    k = kt_perfect()
    torch.testing.assert_close(values, torch.tensor([[0, k, 0], [0, k, 0], [0, -k, 0], [0, -k, 0]]), atol=1e-6,
                               rtol=0)


def test_ktae_per_reward_by_hand():
    batch = pair_batch([[1.0, 1.0], [1.0, 1.0], [0.0, 1.0], [0.0, 1.0]], ids=KTAE_IDS)  # reward 1 constant
    gdpo = get_algorithm("gdpo")
    agg = gdpo.aggregate(batch)
    U, _, scale = gdpo.rescaled(agg, batch.response_mask)
    k = kt_perfect()
    kt = torch.tensor([[0, k, 0], [0, k, 0], [0, -k, 0], [0, -k, 0]], dtype=torch.float32)
    algo = get_algorithm("ktae")
    result = algo.advantages(batch)
    torch.testing.assert_close(result.tokens, U.unsqueeze(1) + kt / scale, rtol=1e-6, atol=1e-6)
    parts = algo.contributions(batch, result).per_token
    assert torch.all(parts[:, 1] == 0)  # reward 1 does not vary: no part, no key tokens
    torch.testing.assert_close(parts.sum(1), result.tokens)


def test_ktae_summed_by_hand():
    batch = pair_batch([[1.0], [1.0], [0.0], [0.0]], ids=KTAE_IDS)
    U = get_algorithm("grpo").response_advantages(batch)  # +-0.866, no batch rescale
    k = kt_perfect()
    kt = torch.tensor([[0, k, 0], [0, k, 0], [0, -k, 0], [0, -k, 0]], dtype=torch.float32)
    torch.testing.assert_close(get_algorithm("ktae-summed").token_advantages(batch), U.unsqueeze(1) + kt,
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name, base, rewards, ids", [
    # reward 0 splits the group {0, 1} / {2, 3}, reward 1 {1, 3} / {0, 2}: tokens 8 and 2 sit in 0 and 3,
    # tokens 9 and 3 in 1 and 2, so each is in one response of each side of both splits
    ("ktae", "gdpo", [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.0, 1.0]], [[5, 8, 2], [5, 9, 3], [5, 9, 3], [5, 8, 2]]),
    ("ktae-summed", "grpo", [[1.0], [1.0], [0.0], [0.0]], [[5, 8], [5, 9], [5, 8], [5, 9]]),
])
def test_ktae_without_association_adds_nothing(name, base, rewards, ids):
    # every token is as frequent among the positive responses as among the others
    batch = pair_batch(rewards, ids=ids)
    assert torch.equal(get_algorithm(name).token_advantages(batch), get_algorithm(base).token_advantages(batch))


# -- parameters --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name, params, message", [
    ("gtpo", {"alpha_1": 0.0, "alpha_2": 0.0}, "alpha_1 \\+ --algo.alpha_2 must be > 0"),
    ("ktae", {"fisher_weight": 0.0, "ig_weight": 0.0}, "fisher_weight \\+ --algo.ig_weight must be > 0"),
    ("forking", {"rho": 0.0}, "--algo.rho: must be > 0 and <= 1"),
    ("forking", {"beta": 0.5}, "unknown config key"),
])
def test_bad_parameters_are_refused_naming_them(name, params, message):
    with pytest.raises(ConfigError, match=message):
        get_algorithm(name, **params)


@pytest.mark.parametrize("name, keys", [("forking", {"rho", "eps", "rescale", "rescale_eps", "weights"}),
                                        ("gtpo-summed", {"alpha_1", "alpha_2", "eps", "weights"}),
                                        ("ktae", {"fisher_weight", "ig_weight", "scale", "eps", "rescale",
                                                  "rescale_eps", "weights"})])
def test_the_underlying_method_parameters_are_taken(name, keys):
    assert set(get_algorithm(name).config_dict()) == keys
