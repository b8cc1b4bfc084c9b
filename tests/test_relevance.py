"""Jensen-Shannon relevance (paper Eq. 5): exactness, range, symmetry, dtypes, chunking, streams."""

from __future__ import annotations

import math

import algorithms_reference as ref
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from algorithms.relevance import (
    JSAgainst,
    JSStream,
    default_chunk_size,
    js_distance,
    js_distance_stream,
    token_logprob_delta,
    token_logprobs,
)


def reference_q(a: list[float], b: list[float]) -> float:
    """sqrt(JS / ln 2) in plain Python (float64)."""
    p, q = ref.softmax(a), ref.softmax(b)
    m = [(x + y) / 2 for x, y in zip(p, q)]
    js = 0.5 * ref.kl(p, m) + 0.5 * ref.kl(q, m)
    return math.sqrt(max(js, 0.0) / math.log(2))


def test_hand_values() -> None:
    # p = (1/2, 1/2, 0...), q = (1/2, 0, 1/2): m = (1/2, 1/4, 1/4); JS = 1/2 ln 2 -> q = sqrt(1/2)
    neg = -float("inf")
    a = torch.tensor([[0.0, 0.0, neg]])
    b = torch.tensor([[0.0, neg, 0.0]])
    assert js_distance(a, b).item() == pytest.approx(math.sqrt(0.5), abs=1e-6)
    table = [([0.0, 1.0, 2.0], [2.0, 1.0, 0.0]), ([5.0, -1.0, 0.5, 0.0], [4.9, -1.2, 0.5, 0.1]),
             ([0.0] * 5, [10.0, 0.0, 0.0, 0.0, 0.0])]
    for x, y in table:
        assert js_distance(torch.tensor([x]), torch.tensor([y])).item() == pytest.approx(reference_q(x, y), abs=1e-6)


def test_identical_is_exactly_zero_and_disjoint_is_one() -> None:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(3, 17, 1000, generator=gen) * 5
    assert torch.all(js_distance(x, x.clone()) == 0)
    assert torch.all(js_distance(x.bfloat16(), x.bfloat16()) == 0)
    neg = -float("inf")
    a = torch.full((4, 10), neg)
    b = torch.full((4, 10), neg)
    a[:, :5] = torch.randn(4, 5, generator=gen)
    b[:, 5:] = torch.randn(4, 5, generator=gen)
    assert torch.allclose(js_distance(a, b), torch.ones(4))
    a2, b2 = a.clamp_min(-1e4), b.clamp_min(-1e4)  # finite but far apart
    assert torch.allclose(js_distance(a2, b2), torch.ones(4))


def test_nearby_distributions_keep_relative_accuracy() -> None:
    """Logits 1e-3 apart: JS is ~1e-7 nats, so cancellation would show; float64 is the reference."""
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(8, 4096, generator=gen, dtype=torch.float64) * 3
    b = a + 1e-3 * torch.randn(8, 4096, generator=gen, dtype=torch.float64)
    la, lb = torch.log_softmax(a, -1), torch.log_softmax(b, -1)
    m = torch.logaddexp(la, lb) - math.log(2)
    js = 0.5 * ((la.exp() * (la - m)).sum(-1) + (lb.exp() * (lb - m)).sum(-1))
    exact_q = (js / math.log(2)).sqrt()
    rel = ((js_distance(a.float(), b.float()).double() - exact_q) / exact_q).abs().max().item()
    print(f"max relative error of q: {rel:.1e}")
    assert 0 < exact_q.min() and rel < 1e-3, rel


def test_one_reference_against_several_equals_pairwise() -> None:
    gen = torch.Generator().manual_seed(1)
    base = torch.randn(37, 500, generator=gen) * 4
    others = [base + torch.randn(37, 500, generator=gen) * s for s in (0.0, 0.1, 3.0)]
    shared = JSAgainst(base.bfloat16(), chunk_size=8)
    for o in others:
        assert torch.equal(shared.distance(o.bfloat16()), js_distance(base.bfloat16(), o.bfloat16(), chunk_size=8))
    assert torch.all(shared.distance(base.bfloat16()) == 0)
    with pytest.raises(ValueError, match="shapes differ"):
        shared.distance(base[:5])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(2, 300), st.floats(0.01, 20), st.integers(0, 2**16))
def test_range_symmetry_and_reference(n: int, V: int, scale: float, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(n, V, generator=gen, dtype=torch.float64) * scale
    b = a + torch.randn(n, V, generator=gen, dtype=torch.float64) * scale * 0.3
    q = js_distance(a, b)
    assert q.dtype == torch.float32 and q.shape == (n,)
    assert torch.all((q >= 0) & (q <= 1))
    assert torch.equal(q, js_distance(b, a))
    expected = [reference_q(a[i].tolist(), b[i].tolist()) for i in range(n)]
    assert q.tolist() == pytest.approx(expected, abs=2e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_inputs_accumulate_in_float32(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(1)
    a = (torch.randn(8, 4096, generator=gen) * 3).to(dtype)
    b = (a.float() + torch.randn(8, 4096, generator=gen)).to(dtype)
    q = js_distance(a, b)
    assert q.dtype == torch.float32
    exact = js_distance(a.double(), b.double())
    assert torch.allclose(q, exact, atol=1e-5)


def test_chunked_equals_unchunked_and_stream() -> None:
    gen = torch.Generator().manual_seed(2)
    a = torch.randn(2, 37, 500, generator=gen) * 2
    b = a + torch.randn(2, 37, 500, generator=gen)
    whole = js_distance(a, b, chunk_size=10_000)
    for chunk in (1, 7, 37, 74):
        assert torch.equal(js_distance(a, b, chunk_size=chunk), whole)
    flat_a, flat_b = a.reshape(-1, 500), b.reshape(-1, 500)
    streamed = js_distance_stream(flat_a.split(9), flat_b.split(9))
    assert torch.equal(streamed, whole.reshape(-1))
    s = JSStream(chunk_size=4)
    for x, y in zip(flat_a.split(20), flat_b.split(20)):
        s.update(x, y)
    assert torch.equal(s.result(), whole.reshape(-1))
    with pytest.raises(ValueError, match="number of chunks"):
        js_distance_stream([*flat_a.split(37), flat_a[:1]], flat_b.split(37))


def test_default_chunk_size_bounds_memory() -> None:
    assert default_chunk_size(151_936) == 27
    assert default_chunk_size(151_936) * 151_936 * 4 <= 16 * 2**20
    assert default_chunk_size(10) > 1000


def test_shape_mismatch_is_an_error() -> None:
    with pytest.raises(ValueError, match="shapes differ"):
        js_distance(torch.zeros(2, 3), torch.zeros(2, 4))


def test_token_logprob_delta() -> None:
    a = torch.tensor([[0.0, 1.0, 2.0], [1.0, 1.0, 1.0]])
    b = torch.tensor([[2.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    tokens = torch.tensor([2, 0])
    lp = [math.log(ref.softmax(a[i].tolist())[tokens[i]]) for i in range(2)]
    lq = [math.log(ref.softmax(b[i].tolist())[tokens[i]]) for i in range(2)]
    assert token_logprobs(a, tokens, chunk_size=1).tolist() == pytest.approx(lp, abs=1e-6)
    assert token_logprob_delta(a, b, tokens).tolist() == pytest.approx([x - y for x, y in zip(lp, lq)], abs=1e-6)


def test_reference_made_block_by_block_into_buffers_is_unchanged() -> None:
    """JSAgainst's log p and p, made chunk_size rows at a time into caller buffers (larger than
    needed, holding stale values), equal whole-block log_probs and exp bit for bit."""
    from algorithms.relevance import log_probs

    gen = torch.Generator().manual_seed(4)
    base = (torch.randn(21, 700, generator=gen) * 3).bfloat16()
    other = (base.float() + torch.randn(21, 700, generator=gen)).bfloat16()
    buffers = (torch.full((32, 700), 7.0), torch.full((32, 700), 7.0))
    shared = JSAgainst(base, chunk_size=4, buffers=buffers)
    whole = log_probs(base)
    assert torch.equal(shared.a, whole) and torch.equal(shared.p, whole.exp())
    assert torch.equal(shared.distance(other), js_distance(base, other, chunk_size=4))
    assert torch.equal(shared.distance(other), JSAgainst(base, chunk_size=4).distance(other))
