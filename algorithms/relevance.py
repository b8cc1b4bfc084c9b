"""Per-token statistics between two replays of the same response, computed in chunks of positions.

MRTPO's relevance (paper Eq. 5, App. D) is the normalised Jensen-Shannon distance over the full
vocabulary:

    q_t = sqrt(JS(p_t || r_t) / ln 2) in [0, 1],
    JS(p || r) = 1/2 KL(p || m) + 1/2 KL(r || m),  m = (p + r) / 2.

Numerics. With log-probabilities a = log p, b = log r, s = |b - a| and
u(s) = log((1 + e^-s) / 2) in [-ln 2, 0], the two halves of JS per vocabulary entry sum to

    p log(2p / (p + r)) + r log(2r / (p + r)) = -(p + r) u(s) - min(p, r) s,

(from log((p + r) / 2) = max(a, b) + u(s)), evaluated per entry before the row sum, with
u(s) = log1p(expm1(-s) / 2). u(0) is exactly 0, so identical inputs give exactly q = 0; the
logarithms are of numbers near 1 rather than of probabilities, so nothing large cancels; no branch
is needed for large s (u tends to -ln 2). Log-probabilities are clamped at -1e4 (their probability
is already 0 in float32), which keeps -inf logits (disjoint supports) finite: disjoint supports
give JS = ln 2, q = 1. JS is clamped to [0, ln 2] before the square root. All arithmetic is float32
whatever the input dtype (bf16 / fp16 logits are upcast one chunk at a time). Against a float64
reference on nearby distributions (logits 1e-3 apart) the relative error of JS is about 1e-4.

Sharing. :class:`JSAgainst` compares one block of distributions with several (P_all against
every P_\\k of a response): log p and p are made once per block and reused.

Memory. Only ``chunk_size`` positions are processed at once; the extra memory is about six
float32 [chunk_size, V] tensors, independent of the sequence length. The default chunk keeps one
such tensor at or under 16 MiB (27 positions for V = 151,936: about 100 MB peak).

Intended use by the replay engine: run the two forward passes over the same response tokens,
produce logits for a chunk of response positions at a time (e.g. apply the LM head to a slice of
hidden states), and either call :func:`js_distance` per chunk or feed both chunk streams to
:func:`js_distance_stream` / :class:`JSStream`. Never materialise [T, V] for a whole batch.

One-distribution statistics live here too: CoRT's :func:`token_logprobs` and the entropy-based
credit methods' :func:`token_entropy`.
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


def log_probs(logits: Tensor) -> Tensor:
    """float32 log-softmax over the last dim, clamped at ``LOGPROB_FLOOR`` (keeps -inf finite)."""
    return torch.log_softmax(logits, dim=-1, dtype=torch.float32).clamp_min_(LOGPROB_FLOOR)


def _js_rows_against(a: Tensor, p: Tensor, logits_q: Tensor) -> Tensor:
    """JS divergence (nats) per row between p = exp(a) (``a``: :func:`log_probs` of an [n, V] block,
    left unchanged) and softmax(logits_q)."""
    b = log_probs(logits_q)
    s = b - a
    r = b.exp_()
    low = torch.minimum(p, r)
    s.abs_()
    low.mul_(s)  # min(p, r) s
    u = s.neg_().expm1_().mul_(0.5).log1p_()  # log((1 + e^-s) / 2)
    per_entry = low.addcmul_(r.add_(p), u)  # (p + r) u + min(p, r) s = -2 JS per entry
    return per_entry.sum(dim=-1).mul_(-0.5).clamp_(0.0, LN2)


def _js_rows(logits_p: Tensor, logits_q: Tensor) -> Tensor:
    """JS divergence (nats) for each row of two [n, V] logit blocks, float32."""
    a = log_probs(logits_p)
    return _js_rows_against(a, a.exp(), logits_q)


def _check_chunk(chunk_size: int | None, V: int) -> int:
    step = chunk_size or default_chunk_size(V)
    if step < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    return step


def _as_distance(js: Tensor) -> Tensor:
    return js.div_(LN2).sqrt_().add_(0.0)  # + 0.0 turns -0.0 into 0.0


class JSAgainst:
    """One [n, V] block of reference logits, compared with any number of other [n, V] blocks:
    log p and p are computed once (two float32 [n, V] tensors) and reused by :meth:`distance`.

    >>> ref = JSAgainst(logits_all)                  # P_all, one chunk of positions
    >>> q_k = [ref.distance(l) for l in logits_without]  # each P_\\k, same positions
    """

    def __init__(self, logits_p: Tensor, chunk_size: int | None = None,
                 buffers: tuple[Tensor, Tensor] | None = None):
        """``buffers``: two float32 tensors of at least [n, V] to hold log p and p (a caller that
        compares many blocks reuses them instead of allocating 2 x [n, V] per block). Log p and p
        are made ``chunk_size`` rows at a time, so each row block is read while it is in cache;
        the values are the same as whole-block :func:`log_probs` and ``exp`` (row-wise ops)."""
        if logits_p.dim() != 2:
            raise ValueError(f"expected [n, V] logits, got shape {tuple(logits_p.shape)}")
        self.shape = tuple(logits_p.shape)
        n, V = self.shape
        self.step = _check_chunk(chunk_size, V)
        if buffers is None:
            self.a = torch.empty(n, V, dtype=torch.float32, device=logits_p.device)
            self.p = torch.empty_like(self.a)
        else:
            self.a, self.p = (b[:n] for b in buffers)
        for start in range(0, n, self.step):
            end = start + self.step
            a = torch.log_softmax(logits_p[start:end], dim=-1, dtype=torch.float32, out=self.a[start:end])
            torch.exp(a.clamp_min_(LOGPROB_FLOOR), out=self.p[start:end])

    def distance(self, logits_q: Tensor) -> Tensor:
        """q per row, float32 [n]."""
        if tuple(logits_q.shape) != self.shape:
            raise ValueError(f"logits shapes differ: {self.shape} vs {tuple(logits_q.shape)}")
        n, step = self.shape[0], self.step
        out = torch.empty(n, dtype=torch.float32, device=logits_q.device)
        for start in range(0, n, step):
            end = start + step
            out[start:end] = _js_rows_against(self.a[start:end], self.p[start:end], logits_q[start:end])
        return _as_distance(out)


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
    step = _check_chunk(chunk_size, V)
    out = torch.empty(n, dtype=torch.float32, device=logits_p.device)
    for start in range(0, n, step):
        out[start:start + step] = _js_rows(p[start:start + step], q[start:start + step])
    return _as_distance(out).reshape(lead)


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
    """Distances for two equally chunked logit streams, concatenated along positions (a reference:
    the tests check the streamed and shared-P_all forms against it)."""
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
    """CoRT's delta_t = log pi(y_t | x+, y<t) - log pi(y_t | x-, y<t) for the sampled tokens, from
    whole logits (a reference: the replay computes it from hidden states, and the tests compare)."""
    return token_logprobs(logits_with, tokens, chunk_size) - token_logprobs(logits_without, tokens, chunk_size)


def token_entropy(logits: Tensor, chunk_size: int | None = None) -> Tensor:
    """H = -sum_v p_v log p_v (nats) of softmax(logits) over the last dim, in float32, chunked over
    positions; logits [..., V] (already divided by the temperature), result [...]. A zero-probability
    entry adds exactly 0 (its log-probability is clamped at ``LOGPROB_FLOOR``), so -inf logits are
    fine; a one-hot distribution gives 0."""
    if logits.dim() == 0:
        raise ValueError("logits need a vocabulary dimension")
    V = logits.shape[-1]
    flat = logits.reshape(-1, V)
    step = chunk_size or default_chunk_size(V)
    out = torch.empty(flat.shape[0], dtype=torch.float32, device=logits.device)
    for start in range(0, flat.shape[0], step):
        log_p = log_probs(flat[start:start + step])
        out[start:start + step] = (log_p.exp() * log_p).sum(-1).neg().clamp_min(0.0) + 0.0  # no -0.0
    return out.reshape(logits.shape[:-1])
