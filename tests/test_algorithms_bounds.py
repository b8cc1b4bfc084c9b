"""Every registered algorithm gives finite, bounded token advantages on every batch.

The batches include the degenerate shapes training produces: empty responses, NaN rewards,
groups of one, rewards constant everywhere, every response dropped by GD2PO, relevance rows of
zeros, NaN or infinities, uniform advantages that are all zero, and token entropies that are the
same on every token, zero, nearly zero, NaN or infinite. The bound each family
guarantees is stated in its module docstring (MRTPO: ``algorithms/mrtpo.py``).

The default suite runs these with the conftest's hypothesis profile (derandomized under CI);
the slow suite runs 1,000 examples per algorithm.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from algorithms import RolloutBatch, get_algorithm, list_algorithms
from algorithms.base import broadcast_to_tokens, masked_mean
from algorithms.cort import CoRT
from algorithms.entropy_credit import GTPO, Forking
from algorithms.gdpo import Reweighter
from algorithms.grpo import GRPO
from algorithms.mrtpo import MRTPO, MRTPOJoint
from algorithms.opsd import OPSD
from algorithms.sdpo import SDPO
from algorithms.token_credit import TokenCredit

NAN = float("nan")
INF = float("inf")
NAMES = list_algorithms()
COMPOSITES = [n for n in NAMES if "+" in n]  # mrtpo+X, mrtpo-oracle+X

# The batch of the advantage blow-up issue: one group of four, three responses with no valid
# token; under GD2PO only response 0 is kept, its uniform advantage is 0, and the reallocation
# used to reach its tokens divided by the "trl" epsilon (about +-1414).
ISSUE_BATCH = RolloutBatch(
    rewards=torch.tensor([[0.0, 1, 0, 0], [0, 0, 0, -1], [0, 0, 0, 0], [-1, 0, 0, 0]]),
    group_ids=torch.tensor([0, 0, 0, 0]),
    response_mask=torch.tensor([[True, True], [False, False], [False, False], [False, False]]),
    relevance=torch.tensor([[[0.33958, 0.51202], [0.0041756, 0.02249], [0.31667, 0.76655], [0.0, 0.0]]]
                           + [[[0.0, 0.0]] * 4] * 3),
    step=0,
    joint_relevance=torch.tensor([[0.3, 0.7], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),
    logprob_delta=torch.tensor([[0.5, -2.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),
    token_entropy=torch.tensor([[0.2, 1.5], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]),
    token_ids=torch.tensor([[3, 4], [0, 0], [0, 0], [0, 0]]),
)


@st.composite
def degenerate_batches(draw) -> RolloutBatch:
    sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    B, K, T = sum(sizes), draw(st.integers(1, 4)), draw(st.integers(1, 6))
    reward_mode = draw(st.sampled_from(["mixed", "binary", "constant", "all_nan", "tiny"]))
    value = {
        "mixed": st.one_of(st.sampled_from([0.0, 1.0, -1.0, 0.5, 3.0, -3.0, NAN]), st.floats(-3, 3)),
        "binary": st.sampled_from([0.0, 1.0]),
        "constant": st.just(draw(st.sampled_from([0.0, 1.0, -3.0]))),
        "all_nan": st.just(NAN),
        "tiny": st.sampled_from([0.0, 1e-7, -1e-7, 3e-8]),  # rounding-sized differences
    }[reward_mode]
    rewards = torch.tensor([[draw(value) for _ in range(K)] for _ in range(B)], dtype=torch.float32)
    lengths = [draw(st.integers(0, T)) for _ in range(B)]
    mask = torch.tensor([[t < n for t in range(T)] for n in lengths], dtype=torch.bool)
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**16)))
    q = torch.rand(B, K, T, generator=gen) ** 3
    if draw(st.booleans()):  # 0/1 read masks, as mrtpo-oracle gets them
        q = (q > 0.3).float()
    kinds = torch.randint(0, 7, (B, K), generator=gen)
    q[kinds == 0] = NAN  # not replayed
    q[kinds == 1] = 0.0  # no change under replay
    q[kinds == 2] = q[kinds == 2] * 1e-12  # rounding-sized relevance
    q[kinds == 3, 0] = draw(st.sampled_from([NAN, INF, -1.0, 1e30]))  # one bad token
    joint = torch.rand(B, T, generator=gen)
    joint[torch.rand(B, generator=gen) < 0.3] = NAN
    delta = torch.randn(B, T, generator=gen) * 5
    delta[torch.rand(B, T, generator=gen) < 0.2] = draw(st.sampled_from([NAN, INF, -INF]))
    groups = torch.tensor([g * 7 for g, n in enumerate(sizes) for _ in range(n)])
    entropy = torch.rand(B, T, generator=gen) * 4
    rows = torch.randint(0, 6, (B,), generator=gen)
    entropy[rows == 0] = 0.7  # the same on every token
    entropy[rows == 1] = 0.0  # sampled with certainty
    entropy[rows == 2, 0] = draw(st.sampled_from([NAN, INF, 1e-12]))  # not supplied, or nearly certain
    ids = torch.randint(0, draw(st.integers(1, 5)), (B, T), generator=gen)
    perm = torch.randperm(B, generator=gen)
    return RolloutBatch(rewards[perm], groups[perm], mask[perm], q[perm], draw(st.integers(0, 30)),
                        joint[perm], delta[perm], token_entropy=entropy[perm], token_ids=ids[perm])


def mrtpo_shares(algo: MRTPO, batch: RolloutBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """(U[B], a[B,K']): the aggregator's response advantage and each reward's part of it before
    the shift (a_{j,k} = C_k rs_j / scale), as the MRTPO docstring's bound uses them."""
    agg = algo.aggregator.aggregate(batch)
    U, _, scale = algo.aggregator.rescaled(agg, batch.response_mask)
    contrib = agg.uniform.unsqueeze(1) if isinstance(algo, MRTPOJoint) else agg.contributions
    return U, contrib.float() / scale * agg.response_scale.float().unsqueeze(1)


def check_mrtpo_bound(algo: MRTPO, batch: RolloutBatch, adv: torch.Tensor) -> None:
    mask = batch.response_mask
    U, a = mrtpo_shares(algo, batch)
    beta = algo.effective_beta(batch.step)
    T = mask.sum(1).float()
    per_token = beta * (T - 1).clamp_min(0) * a.abs().sum(1)
    batch_cap = torch.sqrt((T * U * U).sum())
    cap = torch.minimum(per_token, batch_cap).unsqueeze(1).expand_as(adv)
    dev = (adv - U.unsqueeze(1)).abs()
    tol = 1e-4 * (cap + U.abs().unsqueeze(1)) + 1e-5
    assert torch.all(dev[mask] <= cap[mask] + tol[mask]), (dev, cap)
    has_tokens = mask.any(1)
    means = masked_mean(adv, mask, dim=1)
    assert torch.allclose(means[has_tokens], U[has_tokens], rtol=1e-4, atol=1e-5)
    if bool(torch.all(U == 0)):
        assert torch.all(adv == 0)


def check_token_credit(algo: TokenCredit, batch: RolloutBatch, adv: torch.Tensor) -> None:
    """The bounds of algorithms/README.md for forking tokens, GTPO and KTAE around their underlying U."""
    mask = batch.response_mask
    base = algo.underlying(batch)
    U = base.uniform.unsqueeze(1).expand_as(adv)
    dev = (adv - U).abs()
    if isinstance(algo, Forking):
        assert torch.all((adv[mask] == 0) | (adv[mask] == U[mask]))
        return
    T = mask.sum(1, keepdim=True).float()
    if isinstance(algo, GTPO):
        c = algo.config
        cap = c.alpha_2 / (c.alpha_1 + c.alpha_2) * (T - 1).clamp_min(0) * base.parts.abs().sum(1, keepdim=True)
        has = mask.any(1)
        scale = base.uniform.abs().amax() + base.parts.abs().amax() * 1e-6 if base.uniform.numel() else 0.0
        torch.testing.assert_close(masked_mean(adv, mask, dim=1)[has], base.uniform[has], rtol=1e-4,
                                   atol=1e-5 * (1 + float(scale)))
    else:
        cap = algo.config.scale * base.unit.abs().sum(1, keepdim=True)
    if algo.per_reward:  # Eq. 8: at most the uniform advantage's second moment over the batch
        cap = torch.minimum(cap, torch.sqrt((T.squeeze(1) * base.uniform ** 2).sum()))
        if bool(torch.all(base.uniform == 0)):
            assert torch.all(adv == 0)
    cap = cap.expand_as(adv)
    assert torch.all(dev[mask] <= cap[mask] * (1 + 1e-4) + 1e-5), (dev, cap)


def check_bounded(name: str, batch: RolloutBatch) -> None:
    algo = get_algorithm(name)
    adv = algo.token_advantages(batch)
    mask = batch.response_mask
    assert adv.shape == mask.shape and adv.dtype == torch.float32
    assert bool(torch.isfinite(adv).all()), f"{name}: non-finite token advantages {adv}"
    assert torch.all(adv[~mask] == 0)
    if isinstance(algo, MRTPO):
        check_mrtpo_bound(algo, batch, adv)
    elif isinstance(algo, (Reweighter, GRPO)):
        assert torch.equal(adv, broadcast_to_tokens(algo.response_advantages(batch), mask))
    elif isinstance(algo, CoRT):
        eta = algo.config.eta
        uniform = broadcast_to_tokens(algo.aggregator.response_advantages(batch), mask).abs()
        assert torch.all(adv.abs() <= uniform * (1 + eta / 2) / (1 - eta / 2) * (1 + 1e-5) + 1e-6)
    elif isinstance(algo, TokenCredit):
        check_token_credit(algo, batch, adv)
    elif isinstance(algo, SDPO):  # the clipped teacher-student log-ratio, 0 where not replayed or not finite
        delta = batch.logprob_delta
        assert torch.equal(adv, torch.where(torch.isfinite(delta) & mask, delta, torch.zeros_like(delta)))
    elif isinstance(algo, OPSD):
        expected = GRPO().token_advantages(batch) if algo.config.advantage == "grpo" else torch.zeros_like(adv)
        assert torch.equal(adv, expected)


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=40)
@given(batch=degenerate_batches())
@example(batch=ISSUE_BATCH)
def test_token_advantages_finite_and_bounded(name: str, batch: RolloutBatch) -> None:
    check_bounded(name, batch)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=1000)
@given(batch=degenerate_batches())
@example(batch=ISSUE_BATCH)
def test_token_advantages_finite_and_bounded_thorough(name: str, batch: RolloutBatch) -> None:
    check_bounded(name, batch)


# -- the issue's example, literally --------------------------------------------------------------


def issue_batch(step: int = 0) -> RolloutBatch:
    return RolloutBatch(ISSUE_BATCH.rewards, ISSUE_BATCH.group_ids, ISSUE_BATCH.response_mask,
                        ISSUE_BATCH.relevance, step)


def test_issue_example_gd2po_gives_zero() -> None:
    adv = get_algorithm("mrtpo+gd2po", beta=0.5, warmup_steps=0).token_advantages(issue_batch())
    assert adv[0].tolist() == [0.0, 0.0]
    assert torch.all(adv == 0)


@pytest.mark.parametrize("name", COMPOSITES + ["mrtpo", "mrtpo-shuffled"])
@pytest.mark.parametrize("rescale", ["paper", "trl", "verl", "none"])
def test_issue_example_every_reweighter(name: str, rescale: str) -> None:
    algo = get_algorithm(name, beta=0.5, warmup_steps=0, rescale=rescale)
    batch = issue_batch()
    adv = algo.token_advantages(batch)
    assert bool(torch.isfinite(adv).all())
    check_mrtpo_bound(algo, batch, adv)
    uniform = algo.aggregator.response_advantages(batch)
    assert float(adv.abs().max()) <= math.sqrt(2) * float(uniform.abs().max()) + 1e-6


# -- the rescale at or below its epsilon ---------------------------------------------------------


@pytest.mark.parametrize("rescale", ["paper", "trl", "verl"])
def test_rescale_does_not_divide_a_spread_below_eps(rescale: str) -> None:
    # GD2PO keeps one response: S has no spread. "paper" used to give S / 1e-6.
    batch = issue_batch()
    adv = get_algorithm("gd2po", rescale=rescale).response_advantages(batch)
    agg = get_algorithm("gd2po").aggregate(batch)
    expected = float(agg.uniform[0] * agg.response_scale[0]) if rescale == "paper" else 0.0
    assert expected != 0.0 or rescale != "paper"
    assert adv.tolist() == pytest.approx([expected, 0.0, 0.0, 0.0], abs=1e-6)
