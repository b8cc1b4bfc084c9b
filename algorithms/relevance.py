"""Per-token statistics between two replays of the same response, computed in chunks of positions.

MRTPO's relevance (paper Eq. 5, App. D) is the normalised Jensen-Shannon distance over the full
vocabulary:

    q_t = sqrt(JS(p_t || r_t) / ln 2) in [0, 1],
    JS(p || r) = 1/2 KL(p || m) + 1/2 KL(r || m),  m = (p + r) / 2.

Numerics. With log-probabilities a = log p, b = log r and d = b - a we use, per vocabulary entry,
    p log(2p / (p + r)) = -p g(d),   r log(2r / (p + r)) = -r g(-d),   g(d) = log((1 + e^d) / 2),
and evaluate g(d) = log1p(expm1(d) / 2) (for d > 20: d - ln 2 + log1p(e^-d)). g(0) is exactly 0,
so identical inputs give exactly q = 0, and small differences keep their relative accuracy (no
cancellation of two large logarithms). Log-probabilities are clamped at -1e4 (their probability
is already 0 in float32), which keeps -inf logits (disjoint supports) finite: disjoint supports
give JS = ln 2, q = 1. JS is clamped to [0, ln 2] before the square root. All arithmetic is float32
whatever the input dtype (bf16 / fp16 logits are upcast one chunk at a time).

Memory. Only ``chunk_size`` positions are processed at once; the extra memory is about six
float32 [chunk_size, V] tensors, independent of the sequence length. The default chunk keeps one
such tensor at or under 16 MiB (27 positions for V = 151,936: about 100 MB peak).

Intended use by the replay engine: run the two forward passes over the same response tokens,
produce logits for a chunk of response positions at a time (e.g. apply the LM head to a slice of
hidden states), and either call :func:`js_distance` per chunk or feed both chunk streams to
:func:`js_distance_stream` / :class:`JSStream`. Never materialise [T, V] for a whole batch.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor

LN2 = math.log(2.0)
LOGPROB_FLOOR = -1e4
CHUNK_ELEMENTS = 4 * 1024 * 1024  # elements of one float32 [chunk, V] tensor (16 MiB)


def default_chunk_size(vocab_size: int) -> int:
    """Positions per chunk so that one float32 [chunk, V] tensor stays within 16 MiB."""
    return max(1, CHUNK_ELEMENTS // max(1, vocab_size))


def _half_log_mix(d: Tensor) -> Tensor:
    """g(d) = log((1 + e^d) / 2), accurate near 0 and exactly 0 at 0."""
    out = torch.expm1(d.clamp(max=20.0)).mul_(0.5).log1p_()
    big = d > 20.0
    if bool(big.any()):
        db = d[big]
        out[big] = db - LN2 + torch.log1p(torch.exp(-db))
    return out


def _js_rows(logits_p: Tensor, logits_q: Tensor) -> Tensor:
    """JS divergence (nats) for each row of two [n, V] logit blocks, float32."""
    a = torch.log_softmax(logits_p.to(torch.float32), dim=-1).clamp_min_(LOGPROB_FLOOR)
    b = torch.log_softmax(logits_q.to(torch.float32), dim=-1).clamp_min_(LOGPROB_FLOOR)
    d = b - a
    term = _half_log_mix(d).mul_(a.exp_())  # p g(d); a now holds p
    total = term.sum(dim=-1)
    del term, a
    term = _half_log_mix(d.neg_()).mul_(b.exp_())  # r g(-d)
    total += term.sum(dim=-1)
    return (-0.5 * total).clamp_(0.0, LN2)


def js_distance(logits_p: Tensor, logits_q: Tensor, chunk_size: int | None = None) -> Tensor:
    """q = sqrt(JS(softmax(logits_p) || softmax(logits_q)) / ln 2) over the last (vocabulary) dim.

    logits_p, logits_q: [..., V], same shape, any float dtype. Returns float32 [...], in [0, 1],
    symmetric, exactly 0 where the two rows are identical. Rows are processed ``chunk_size`` at a
    time (default: :func:`default_chunk_size`).
    """
    if logits_p.shape != logits_q.shape:
        raise ValueError(f"logits shapes differ: {tuple(logits_p.shape)} vs {tuple(logits_q.shape)}")
    if logits_p.dim() == 0:
        raise ValueError("logits need a vocabulary dimension")
    lead = logits_p.shape[:-1]
    V = logits_p.shape[-1]
    p = logits_p.reshape(-1, V)
    q = logits_q.reshape(-1, V)
    n = p.shape[0]
    step = chunk_size or default_chunk_size(V)
    if step < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    out = torch.empty(n, dtype=torch.float32, device=logits_p.device)
    for start in range(0, n, step):
        out[start:start + step] = _js_rows(p[start:start + step], q[start:start + step])
    return out.div_(LN2).sqrt_().add_(0.0).reshape(lead)


class JSStream:
    """Accumulate relevance over a stream of position chunks of two replays.

    >>> stream = JSStream()
    >>> for lp, lq in zip(chunks_all, chunks_without_k):   # each [n_i, V], same n_i
    ...     stream.update(lp, lq)
    >>> q = stream.result()                                  # float32 [sum n_i]

    Each chunk is reduced to its per-position distances immediately; only those are kept.
    """

    def __init__(self, chunk_size: int | None = None):
        self.chunk_size = chunk_size
        self._parts: list[Tensor] = []

    def update(self, logits_p: Tensor, logits_q: Tensor) -> Tensor:
        """Add one chunk ([n, V] each); returns its distances [n]."""
        q = js_distance(logits_p, logits_q, self.chunk_size)
        self._parts.append(q.reshape(-1))
        return q

    def result(self) -> Tensor:
        if not self._parts:
            return torch.empty(0, dtype=torch.float32)
        return torch.cat(self._parts)


def js_distance_stream(chunks_p: Iterable[Tensor], chunks_q: Iterable[Tensor],
                       chunk_size: int | None = None) -> Tensor:
    """Distances for two equally chunked logit streams, concatenated along positions."""
    stream = JSStream(chunk_size)
    sentinel = object()
    it_p, it_q = iter(chunks_p), iter(chunks_q)
    while True:
        a, b = next(it_p, sentinel), next(it_q, sentinel)
        if a is sentinel and b is sentinel:
            return stream.result()
        if a is sentinel or b is sentinel:
            raise ValueError("the two logit streams have a different number of chunks")
        stream.update(a, b)


def token_logprobs(logits: Tensor, tokens: Tensor, chunk_size: int | None = None) -> Tensor:
    """log softmax(logits)[..., tokens] in float32, chunked over positions; logits [..., V],
    tokens [...] (long)."""
    if logits.shape[:-1] != tokens.shape:
        raise ValueError(f"tokens shape {tuple(tokens.shape)} does not match logits {tuple(logits.shape)}")
    V = logits.shape[-1]
    flat = logits.reshape(-1, V)
    ids = tokens.reshape(-1, 1).to(torch.long)
    step = chunk_size or default_chunk_size(V)
    out = torch.empty(flat.shape[0], dtype=torch.float32, device=logits.device)
    for start in range(0, flat.shape[0], step):
        block = flat[start:start + step].to(torch.float32)
        out[start:start + step] = (block.gather(1, ids[start:start + step]) - torch.logsumexp(block, 1, True))[:, 0]
    return out.reshape(tokens.shape)


def token_logprob_delta(logits_with: Tensor, logits_without: Tensor, tokens: Tensor,
                        chunk_size: int | None = None) -> Tensor:
    """CoRT's delta_t = log pi(y_t | x+, y<t) - log pi(y_t | x-, y<t) for the sampled tokens."""
    return token_logprobs(logits_with, tokens, chunk_size) - token_logprobs(logits_without, tokens, chunk_size)
