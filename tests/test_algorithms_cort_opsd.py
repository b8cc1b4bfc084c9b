"""CoRT token weights and the OPSD distillation loss against plain-Python arithmetic."""

from __future__ import annotations

import math
import statistics

import algorithms_reference as ref
import pytest
import torch
from test_algorithms_hand import assert_tokens, fixture_batch

from algorithms import get_algorithm
from algorithms.opsd import generalized_jsd

DELTA = [[0.5, -1.0, 2.0, 0.0], [1.0, 0.0, -0.5, 9.0], [-2.0, 0.3, 0.0, 0.0],
         [0.1, 0.2, float("nan"), 0.4], [3.0, -3.0, 1.0, 0.0], [-0.7, 5.0, 5.0, 5.0]]


def cort_expected(step: int, tau: float, bias: float, eta: float, ramp: int, A: list[float]) -> list[list[float]]:
    lam = ref.smoothstep(step / ramp) if ramp else 1.0
    out = []
    for b, n in enumerate(ref.LENGTHS):
        s = [0.0 if ref.isnan(d) else ref.sigmoid(tau * (d - bias)) - 0.5 for d in DELTA[b][:n]]
        wt = [1 + eta * lam * x for x in s]
        mean = sum(wt) / n
        out.append([A[b] * w / mean for w in wt] + [0.0] * (ref.T - n))
    return out


@pytest.mark.parametrize("step,tau,bias,eta", [(50, 1.0, 0.0, 1.0), (5, 2.0, 0.5, 1.5), (0, 1.0, 0.0, 1.0)])
def test_cort_on_gdpo(step: int, tau: float, bias: float, eta: float) -> None:
    S = [sum(row) for row in ref.per_reward_z()]
    A = [s / (statistics.stdev(S) + 1e-6) for s in S]
    batch = fixture_batch(step)
    batch.logprob_delta = torch.tensor(DELTA)
    algo = get_algorithm("cort", tau=tau, bias=bias, eta=eta)
    assert algo.replay_request == "rubric"
    assert_tokens(algo.token_advantages(batch), cort_expected(step, tau, bias, eta, 10, A))


def test_cort_on_grpo_and_weights_detached() -> None:
    from test_algorithms_hand import GRPO_A

    batch = fixture_batch(40)
    delta = torch.tensor(DELTA, requires_grad=True)
    batch.logprob_delta = delta
    adv = get_algorithm("cort", aggregate="grpo").token_advantages(batch)
    assert not adv.requires_grad
    assert_tokens(adv, cort_expected(40, 1.0, 0.0, 1.0, 10, GRPO_A), tol=1e-4)


def test_cort_config_errors() -> None:
    for bad in ({"eta": 2.0}, {"aggregate": "sum"}, {"aggregate": "grpo", "rescale": "verl"}):
        with pytest.raises(ValueError):
            get_algorithm("cort", **bad)


def jsd_reference(s_logits: list[float], t_logits: list[float], beta: float) -> float:
    S, Tt = ref.softmax(s_logits), ref.softmax(t_logits)
    if beta == 0.0:
        return ref.kl(Tt, S)
    if beta == 1.0:
        return ref.kl(S, Tt)
    M = [beta * t + (1 - beta) * s for s, t in zip(S, Tt)]
    return beta * ref.kl(Tt, M) + (1 - beta) * ref.kl(S, M)


@pytest.mark.parametrize("beta", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_generalized_jsd(beta: float) -> None:
    gen = torch.Generator().manual_seed(3)
    s = torch.randn(6, 7, generator=gen) * 2
    t = torch.randn(6, 7, generator=gen) * 2
    got = generalized_jsd(s, t, beta)
    expected = [jsd_reference(s[i].tolist(), t[i].tolist(), beta) for i in range(6)]
    assert got.tolist() == pytest.approx(expected, abs=1e-5)
    assert torch.all(generalized_jsd(s, s, beta).abs() < 1e-6)
    if beta == 0.5:  # symmetric in the middle, and at most ln 2
        assert torch.allclose(got, generalized_jsd(t, s, beta), atol=1e-6)
        assert torch.all(got <= math.log(2) + 1e-6)


def test_opsd_loss_mean_over_valid_tokens_and_gradient() -> None:
    gen = torch.Generator().manual_seed(4)
    batch = fixture_batch()
    V = 5
    student = torch.randn(ref.B, ref.T, V, generator=gen, requires_grad=True)
    teacher = torch.randn(ref.B, ref.T, V, generator=gen, requires_grad=True)
    algo = get_algorithm("opsd", loss_coef=2.0, chunk_size=3)
    loss = algo.distillation_loss(student, teacher, batch.response_mask)
    values = [jsd_reference(student[b, t].tolist(), teacher[b, t].tolist(), 0.5)
              for b, n in enumerate(ref.LENGTHS) for t in range(n)]
    assert loss.item() == pytest.approx(2.0 * sum(values) / len(values), abs=1e-5)
    loss.backward()
    assert student.grad is not None and teacher.grad is None  # the teacher is detached
    assert torch.all(student.grad[~batch.response_mask] == 0)
    assert algo.has_loss and algo.replay_request == "teacher"
    assert torch.all(algo.token_advantages(batch) == 0)
    from test_algorithms_hand import GRPO_A

    assert_tokens(get_algorithm("opsd", advantage="grpo").token_advantages(batch), ref.tokens(GRPO_A), tol=1e-4)


@pytest.mark.parametrize("rescale", ["paper", "verl", "trl", "none"])
def test_cort_without_strength_is_its_aggregator(rescale: str) -> None:
    batch = fixture_batch(50)
    batch.logprob_delta = torch.tensor(DELTA)
    cort = get_algorithm("cort", eta=0.0, rescale=rescale)
    assert not cort.needs_replay(50)
    assert torch.allclose(cort.token_advantages(batch), get_algorithm("gdpo", rescale=rescale).token_advantages(batch),
                          atol=1e-6)
    early = get_algorithm("cort", warmup_steps=100)
    assert torch.equal(early.token_advantages(batch), get_algorithm("gdpo").token_advantages(batch))
