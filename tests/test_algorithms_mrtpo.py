"""MRTPO: hand-computed token advantages on the fixture batch, and invariants over random batches."""

from __future__ import annotations

import statistics

import algorithms_reference as ref
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_algorithms_hand import assert_tokens, fixture_batch

from algorithms import RolloutBatch, get_algorithm
from algorithms.base import masked_mean
from algorithms.mrtpo import relevance_weights

NAN = float("nan")


def fixture_relevance(peaked: bool = False) -> list[list[list[float]]]:
    """q[b][k][t]; NaN beyond each response's length (must be ignored), a NaN row for a varying
    reward (row 2, reward 1: not replayed), an all-zero row (row 4, reward 1). ``peaked``: every
    reward's relevance on the last token only (the bound becomes active)."""
    q = []
    for b, n in enumerate(ref.LENGTHS):
        rows = []
        for k in range(ref.K):
            if peaked:
                vals = [1.0 if t == n - 1 else 0.0 for t in range(n)]  # all rewards on the last token
            else:
                vals = [((b + 1) * (k + 2) * (t + 3) % 7) / 7 for t in range(n)]
            rows.append(vals + [NAN] * (ref.T - n))
        q.append(rows)
    if not peaked:
        q[2][1] = [NAN] * ref.T
        q[4][1] = [0.0] * ref.LENGTHS[4] + [NAN] * (ref.T - ref.LENGTHS[4])
    return q


def batch_with(q: list, step: int = 50) -> RolloutBatch:
    batch = fixture_batch(step)
    batch.relevance = torch.tensor(q, dtype=torch.float32)
    return batch


@pytest.mark.parametrize("peaked,beta,bound", [(False, 0.5, True), (True, 0.9, True), (True, 0.9, False)])
def test_mrtpo_hand(peaked: bool, beta: float, bound: bool) -> None:
    q = fixture_relevance(peaked)
    expected, s = ref.mrtpo_tokens(ref.per_reward_z(), q, beta, bound)
    if peaked and bound:
        assert s < 0.9  # the bound is active in this case
    algo = get_algorithm("mrtpo", beta=beta, bound=bound)
    batch = batch_with(q)
    assert_tokens(algo.token_advantages(batch), expected)
    assert algo.advantages(batch).metrics["bound_scale"] == pytest.approx(s, rel=1e-5)


def test_mrtpo_literal_weights() -> None:
    # row 0 (4 tokens), reward 0: q = [(1*2*t+6) % 7 / 7] = [6, 1, 3, 5]/7, mean 15/28
    # q / mean = [24, 4, 12, 20] / 15, so w = .5 + .5 * that
    w, has = relevance_weights(torch.tensor(fixture_relevance()), batch_with(fixture_relevance()).response_mask, 0.5)
    assert w[0, 0].tolist() == pytest.approx([0.5 + 0.5 * 24 / 15, 0.5 + 0.5 * 4 / 15, 0.5 + 0.5 * 12 / 15,
                                              0.5 + 0.5 * 20 / 15], rel=1e-6)
    assert not has[2, 1] and not has[4, 1] and has[0, 0]
    assert torch.all(w[2, 1] == 1) and torch.all(w[4, 1] == 1)


def test_mrtpo_saw_hand() -> None:
    cvs = []
    for k in range(ref.K):
        col = [v for v in ref.reward_column(k) if not ref.isnan(v)]
        cvs.append(statistics.stdev(col) / (abs(statistics.mean(col)) + 1e-8))
    c = [3 * cv / (sum(cvs) + 1e-8) for cv in cvs]
    C = [[ck * a for ck, a in zip(c, row)] for row in ref.per_reward_z()]
    expected, _ = ref.mrtpo_tokens(C, fixture_relevance(), 0.5, True)
    assert_tokens(get_algorithm("mrtpo+saw").token_advantages(batch_with(fixture_relevance())), expected)


def test_mrtpo_joint_hand() -> None:
    S = [[sum(row)] for row in ref.per_reward_z()]
    qj = [[[(t * 3 + b) % 5 / 4 for t in range(n)] + [NAN] * (ref.T - n)] for b, n in enumerate(ref.LENGTHS)]
    expected, _ = ref.mrtpo_tokens(S, qj, 0.5, True)
    batch = fixture_batch(50)
    batch.joint_relevance = torch.tensor([row[0] for row in qj])
    algo = get_algorithm("mrtpo-joint")
    assert algo.replay_request == "joint"
    assert_tokens(algo.token_advantages(batch), expected)


def test_warmup_schedule() -> None:
    algo = get_algorithm("mrtpo", beta=0.5, warmup_steps=10)
    table = [(0, 0.0), (5, 0.5 * 0.5), (10, 0.5), (11, 0.5), (1000, 0.5), (2, 0.5 * ref.smoothstep(0.2))]
    for step, beta in table:
        assert algo.effective_beta(step) == pytest.approx(beta)
    assert not algo.needs_replay(0) and algo.needs_replay(1)
    assert get_algorithm("mrtpo", warmup_steps=0).effective_beta(0) == 0.5
    betas = [algo.effective_beta(n) for n in range(12)]
    assert betas == sorted(betas)


def test_step_zero_equals_gdpo_without_relevance() -> None:
    batch = fixture_batch(0)  # relevance None is allowed while beta_n = 0
    assert torch.equal(get_algorithm("mrtpo").token_advantages(batch), get_algorithm("gdpo").token_advantages(batch))
    with pytest.raises(ValueError, match="relevance"):
        get_algorithm("mrtpo").token_advantages(fixture_batch(3))


def test_shuffled_permutes_within_responses() -> None:
    batch = batch_with(fixture_relevance())
    plain = get_algorithm("mrtpo").token_advantages(batch)
    algo = get_algorithm("mrtpo-shuffled", seed=3)
    shuffled = algo.token_advantages(batch)
    assert torch.equal(shuffled, algo.token_advantages(batch))  # deterministic per (seed, step)
    for b, n in enumerate(ref.LENGTHS):
        assert torch.allclose(shuffled[b, :n].sort().values, plain[b, :n].sort().values, atol=1e-6)
        assert torch.all(shuffled[b, n:] == 0)
    assert not torch.allclose(shuffled, plain)
    other = get_algorithm("mrtpo-shuffled", seed=4).token_advantages(batch)
    assert not torch.equal(other, shuffled)


# -- invariants over random batches ---------------------------------------------------------------


@st.composite
def random_batches(draw):
    n_groups = draw(st.integers(1, 4))
    sizes = [draw(st.integers(1, 4)) for _ in range(n_groups)]
    K = draw(st.integers(1, 4))
    T = draw(st.integers(1, 6))
    B = sum(sizes)
    value = st.one_of(st.sampled_from([0.0, 1.0, 0.5, -3.0, 3.0, NAN]), st.floats(-3, 3))
    rewards = [[draw(value) for _ in range(K)] for _ in range(B)]
    lengths = [draw(st.integers(0, T)) for _ in range(B)]
    seed = draw(st.integers(0, 2**16))
    gen = torch.Generator().manual_seed(seed)
    q = torch.rand(B, K, T, generator=gen) ** 3
    kinds = torch.randint(0, 6, (B, K), generator=gen)
    q[kinds == 0] = NAN  # not replayed
    q[kinds == 1] = 0.0  # no change under replay
    groups = [g * 11 for g, size in enumerate(sizes) for _ in range(size)]
    perm = torch.randperm(B, generator=gen)
    mask = torch.tensor([[t < n for t in range(T)] for n in lengths])
    return RolloutBatch(torch.tensor(rewards)[perm], torch.tensor(groups)[perm], mask[perm], q[perm],
                        draw(st.integers(0, 30)))


@settings(max_examples=150, deadline=None)
@given(random_batches(), st.sampled_from(["paper", "verl", "trl", "none"]))
def test_beta_zero_equals_gdpo(batch: RolloutBatch, rescale: str) -> None:
    a = get_algorithm("mrtpo", beta=0.0, rescale=rescale).token_advantages(batch)
    b = get_algorithm("gdpo", rescale=rescale).token_advantages(batch)
    assert torch.allclose(a, b, atol=1e-6, rtol=0)
    c = get_algorithm("mrtpo+saw", beta=0.0).token_advantages(batch)
    assert torch.allclose(c, get_algorithm("saw").token_advantages(batch), atol=1e-6, rtol=0)


@settings(max_examples=150, deadline=None)
@given(random_batches(), st.floats(0.0, 0.99))
def test_weights_average_to_one(batch: RolloutBatch, beta: float) -> None:
    w, has = relevance_weights(batch.relevance, batch.response_mask, beta)
    assert torch.all(w >= 1 - beta - 1e-6)
    valid = batch.response_mask.unsqueeze(1).expand_as(w)
    mean = (w * valid).sum(-1) / valid.sum(-1).clamp_min(1)
    nonempty = valid.any(-1)
    assert torch.allclose(mean[nonempty], torch.ones_like(mean[nonempty]), atol=1e-5)
    assert torch.all(w[~has] == 1)


@settings(max_examples=150, deadline=None)
@given(random_batches(), st.floats(0.05, 0.99), st.sampled_from(["mrtpo", "mrtpo+saw", "mrtpo-shuffled", "mrtpo+gd2po"]))
def test_bound_keeps_response_means_and_second_moment(batch: RolloutBatch, beta: float, name: str) -> None:
    algo = get_algorithm(name, beta=beta, warmup_steps=0)
    out = algo.compute(batch)
    mask = batch.response_mask
    uniform = algo.aggregator.token_advantages(batch)
    per_response = masked_mean(out.tokens, mask, dim=1)
    assert torch.allclose(per_response, masked_mean(uniform, mask, dim=1), atol=1e-4, rtol=1e-4)
    U = out.uniform
    uniform_sq = float((mask.sum(1) * U * U).sum())
    realloc_sq = float((out.bound_scale * out.reallocated).pow(2).sum())
    assert realloc_sq <= uniform_sq * (1 + 1e-4) + 1e-6
    assert 0.0 <= float(out.bound_scale) <= 1.0
    assert torch.all(out.tokens[~mask] == 0)


def test_metrics() -> None:
    batch = batch_with(fixture_relevance(), step=5)
    m = get_algorithm("mrtpo").advantages(batch).metrics
    # 11 varying (response, reward) pairs; row 2 reward 1 is not replayed and row 4 reward 1 is all zero
    assert m["relevance_coverage"] == pytest.approx(9 / 11)
    assert m["beta_eff"] == pytest.approx(0.25)
    assert m["bound_scale"] == 1.0 and 0 < m["realloc_ratio"] < 1
    assert get_algorithm("mrtpo").advantages(fixture_batch(0)).metrics["relevance_coverage"] == 0.0


@settings(max_examples=100, deadline=None)
@given(st.floats(0.0, 0.99), st.integers(1, 60), st.integers(0, 200))
def test_warmup_invariants(beta: float, N: int, step: int) -> None:
    algo = get_algorithm("mrtpo", beta=beta, warmup_steps=N)
    assert algo.effective_beta(0) == 0.0
    assert algo.effective_beta(N + step) == pytest.approx(beta, abs=1e-12)
    assert 0.0 <= algo.effective_beta(step) <= algo.effective_beta(step + 1) <= beta + 1e-12
