"""The replay engine: forward passes of the old policy over sampled responses under other contexts.

A replay job is one (context token ids, response token ids) pair. The engine returns, per job, the
final hidden states at the T positions that predict the response tokens ([T, H], the positions
``len(context) - 1 ... len(context) + T - 2``), never logits: logits are produced from those hidden
states by the LM head a chunk of positions at a time (``chunk_size``) and streamed straight into
the statistic (Jensen-Shannon distance, log-probabilities), so [T, V] is never held for a batch.

Prefix sharing. All jobs handed to :meth:`ReplayEngine.run` together (a wave of prompt groups:
their responses under every context) share the longest common token prefix of their contexts,
capped so that every context keeps at least one token of its own. That prefix's KV cache is
computed once (batch of one). Each distinct context is then encoded once on top of it, a batch of
contexts at a time, left-padded with the padding masked out; and each job runs only its context's
last token plus its response but the response's last token (T inputs for T predicted tokens), on
top of its own context's cache (gathered per row), right-padded, in batches of similar lengths. Identical jobs are computed once (P_all is shared by all rewards of
a response; ifollow's P_\\k by every response of the group).

What each algorithm asks for (leave-one-out contexts, the joint ablation, CoRT's rubric, OPSD's
teacher) is built through the task in :mod:`harness.replay_builders`.

Equivalence: the prefix-shared result equals a full-context recomputation up to floating-point
reordering (tested in float32 at 1e-5 on the JS distances).

The statistics (:meth:`ReplayEngine.js`, :meth:`~ReplayEngine.js_many`, :meth:`~ReplayEngine.logprobs`) are float32
whatever the model dtype. The head is ``get_output_embeddings()`` of the (peft-unwrapped) model;
``config.final_logit_softcapping`` is honoured where a model family defines it.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from algorithms.relevance import JSAgainst, js_distance, token_entropy, token_logprobs

if TYPE_CHECKING:
    from harness.config import ReplayConfig


def length_batches(items: Sequence[Any], length: Any, size: int) -> list[list[Any]]:
    """Items in batches of at most ``size``, longest first; a batch also ends before an item less
    than half as long as the batch's first, so that short rows are not padded to long ones."""
    ordered = sorted(items, key=length, reverse=True)
    batches: list[list[Any]] = []
    for item in ordered:
        if batches and len(batches[-1]) < size and 2 * length(item) >= length(batches[-1][0]):
            batches[-1].append(item)
        else:
            batches.append([item])
    return batches


# Sizes, by what they count. Sequences: ``batch_size`` (sequences per replay forward pass,
# ``replay.batch_size``) and ``replay_builders.WAVE_BATCHES`` (batches per wave of
# groups). Positions: ``chunk_size`` (positions per LM-head / statistics chunk,
# ``replay.chunk_size``), capped so that a [positions, V] block holds at most
# STAT_CHUNK_ELEMENTS elements, and JS_ROWS (positions per Jensen-Shannon evaluation inside a
# chunk). ``algorithms.relevance.CHUNK_ELEMENTS`` is the standalone streaming functions' own cap.

#: rows per Jensen-Shannon evaluation inside a chunk: few enough that a [rows, V] float32 block
#: stays in the CPU cache (results are row-wise, so the value does not change them)
JS_ROWS = 16


#: elements of one [positions, V] block of the statistics. :meth:`ReplayEngine.js_many` holds P_all's
#: float32 log p and p and two blocks of logits for a chunk of positions; capping the chunk at this
#: many elements bounds that memory whatever the vocabulary and the response length (82 positions
#: for V = 151,936; the configured ``chunk_size`` of 128 applies from V = 98,304 down).
#: ``bench/js_memory.py`` measures the peak (figures in ``bench/README.md``)
STAT_CHUNK_ELEMENTS = 12 * 1024 * 1024


def stat_chunk_positions(chunk_size: int, vocab_size: int) -> int:
    """Positions per LM-head / statistics chunk: ``chunk_size``, capped by :data:`STAT_CHUNK_ELEMENTS`."""
    return max(1, min(int(chunk_size), STAT_CHUNK_ELEMENTS // max(1, int(vocab_size))))


@dataclass(frozen=True)
class ReplayJob:
    context: tuple[int, ...]  # prompt token ids, ending with the assistant cue
    response: tuple[int, ...]  # the sampled response token ids (valid ones only)


def unwrap(model: Any) -> Any:
    """The transformers model under a peft wrapper (LoRA layers stay injected)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def decoder_and_head(model: Any) -> tuple[Any, Any, float | None]:
    """(decoder returning final hidden states, LM head, final logit soft-cap or None)."""
    base = unwrap(model)
    decoder = base.get_decoder() if hasattr(base, "get_decoder") else base.model
    head = base.get_output_embeddings()
    cap = getattr(base.config, "final_logit_softcapping", None)
    return decoder, head, cap


def capped(logits: Tensor, cap: float | None = None) -> Tensor:
    """Raw LM-head outputs with the model family's final soft-cap applied (in float32) when it has
    one; otherwise unchanged, in the model's dtype (the statistics upcast as they read them)."""
    if cap:
        return torch.tanh(logits.float() / cap) * cap
    return logits


def tempered(logits: Tensor, temperature: float = 1.0) -> Tensor:
    """Logits divided by the rollout temperature (in float32), as sampling used them; unchanged at 1."""
    return logits if temperature == 1.0 else logits.float() / temperature


def head_logits(head: Any, hidden: Tensor, cap: float | None = None, temperature: float = 1.0) -> Tensor:
    """LM-head logits of hidden states [..., H] at ``temperature`` (see :func:`capped` for the dtype)."""
    return tempered(capped(head(hidden), cap), temperature)


def _cache_kwarg(decoder: Any) -> str:
    """transformers 5.2x names the KV-cache argument ``cache``; older releases ``past_key_values``."""
    import inspect

    params = inspect.signature(decoder.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _returned_cache(output: Any) -> Any:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def cache_copy(cache: Any) -> Any:
    """A copy of a KV cache that later batch operations (``reorder_cache``, ``batch_repeat_interleave``)
    and forward passes may change while ``cache`` stays as it is. transformers' ``DynamicLayer``
    rebinds its key and value tensors rather than writing into them (``torch.cat``,
    ``index_select``), so copying the cache and layer objects is enough; any other cache (sliding
    windows, linear-attention states, static or quantised layers) is copied deeply."""
    try:
        from transformers.cache_utils import DynamicLayer
    except ImportError:  # a release without cache layers
        return copy.deepcopy(cache)
    layers = getattr(cache, "layers", None)
    if not isinstance(layers, list) or any(type(layer) is not DynamicLayer for layer in layers):
        return copy.deepcopy(cache)
    out = copy.copy(cache)
    out.layers = [copy.copy(layer) for layer in layers]
    return out


def common_prefix_length(seqs: Sequence[Sequence[int]]) -> int:
    if not seqs:
        return 0
    n = min(len(s) for s in seqs)
    first = seqs[0]
    for i in range(n):
        t = first[i]
        if any(s[i] != t for s in seqs):
            return i
    return n


class ReplayEngine:
    """Batched, prefix-sharing forward passes of ``model`` (the old policy, in its own dtype)."""

    def __init__(self, model: Any, batch_size: int = 8, chunk_size: int = 128, share_prefix: bool = True,
                 pad_id: int = 0, temperature: float = 1.0, head_float32: bool = False,
                 exact_batches: bool = False):
        """``temperature``: the rollout temperature; every distribution the statistics compare (the
        relevance's p and r, CoRT's log-probabilities) is the model's at that temperature, the one
        the responses were sampled from. ``head_float32``: see :meth:`_logits`; ``exact_batches``:
        see :meth:`_context_chunks`."""
        self.model = model
        self.temperature = float(temperature)
        self.head_float32 = head_float32
        self.exact_batches = exact_batches
        self._head32: tuple[Tensor, Tensor | None] | None = None
        self._buffers: dict[str, Tensor] = {}  # the statistics' reused [rows, V] blocks (see _scratch)
        self.batch_size = max(1, int(batch_size))
        self.chunk_size = max(1, int(chunk_size))
        self.share_prefix = share_prefix
        self.pad_id = int(pad_id)
        self.forward_tokens = 0  # tokens run through the model (a cost counter for benchmarks)
        self.padded_tokens = 0  # padding positions computed alongside them (right-padded response rows)

    @classmethod
    def from_config(cls, model: Any, replay: ReplayConfig, pad_id: int, temperature: float = 1.0, *,
                    head_float32: bool = False, exact_batches: bool = False) -> ReplayEngine:
        """The engine a run's ``replay`` section sets (``replay.batch_size``, ``chunk_size``,
        ``share_prefix``): how every backend, the credit explorer and the bench scripts build one."""
        return cls(model, replay.batch_size, replay.chunk_size, replay.share_prefix, pad_id, temperature=temperature,
                   head_float32=head_float32, exact_batches=exact_batches)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # -- hidden states -----------------------------------------------------------------------------
    @torch.inference_mode()
    def run(self, jobs: Sequence[ReplayJob]) -> dict[ReplayJob, Tensor]:
        """Final hidden states [T, H] at the positions predicting each job's response tokens.

        Sharing (``share_prefix``), three levels: the group prefix P (longest common prefix of all
        contexts, capped so that every context keeps one token of its own) is encoded once; each
        distinct context is encoded once on top of P, up to its last token, ``batch_size``
        contexts at a time, left-padded (the padding is masked out); each job then runs only
        ``[last context token] + response[:-1]`` on top of its own context's cache, ``batch_size`` rows
        at a time whichever contexts they belong to, so batches stay full for per-response
        contexts (one job each) as well as for one context serving a whole group (ifollow's P_\\k).
        Without sharing, or when the contexts share no token, every job runs in full, right-padded.
        """
        unique = list(dict.fromkeys(jobs))
        if not unique:
            return {}
        for job in unique:
            if not job.context or not job.response:
                raise ValueError("a replay job needs a non-empty context and response")
        decoder, _, _ = decoder_and_head(self.model)
        out: dict[ReplayJob, Tensor] = {}
        by_context: dict[tuple[int, ...], list[ReplayJob]] = {}
        for job in unique:
            by_context.setdefault(job.context, []).append(job)
        contexts = list(by_context)
        prefix_len = min(common_prefix_length(contexts), min(len(c) for c in contexts) - 1)
        if not self.share_prefix or prefix_len == 0:
            self._full_rows(decoder, unique, out)
            return out
        prefix_cache = self._encode_prefix(decoder, contexts[0][:prefix_len])
        contexts.sort(key=len)  # similar lengths share a batch (less padding)
        for chunk in self._context_chunks(contexts):
            cache, seen = self._encode_contexts(decoder, prefix_cache, prefix_len, chunk)
            rows = [(i, job) for i, ctx in enumerate(chunk) for job in by_context[ctx]]
            for batch in length_batches(rows, lambda row: len(row[1].response), self.batch_size):
                self._job_rows(decoder, cache, seen, batch, out)
        return out

    def _context_chunks(self, contexts: Sequence[tuple[int, ...]]) -> list[list[tuple[int, ...]]]:
        """Batches of at most ``batch_size`` contexts (sorted by length). With ``exact_batches`` only
        contexts of one length share a batch: then no padding sits between the shared prefix and a
        context's own keys, and every key keeps the index it has in a pass over that context alone,
        so the low-precision sums run in the same order and the replay reproduces the sampling pass
        bit for bit (padding in the middle shifts the keys and changes bf16 rounding)."""
        if not self.exact_batches:
            return [list(contexts[i:i + self.batch_size]) for i in range(0, len(contexts), self.batch_size)]
        chunks: list[list[tuple[int, ...]]] = []
        for ctx in contexts:
            if chunks and len(chunks[-1][0]) == len(ctx) and len(chunks[-1]) < self.batch_size:
                chunks[-1].append(ctx)
            else:
                chunks.append([ctx])
        return chunks

    def _encode_contexts(self, decoder: Any, prefix_cache: Any, prefix_len: int,
                         contexts: Sequence[tuple[int, ...]]) -> tuple[Any, Tensor]:
        """KV cache [len(contexts)] of each context up to (not including) its last token, on top of
        the shared prefix, and the key mask [len(contexts), cache length] (0 at left padding)."""
        middles = [c[prefix_len:-1] for c in contexts]
        width = max(len(m) for m in middles)
        count = len(contexts)
        cache = cache_copy(prefix_cache)
        cache.batch_repeat_interleave(count)
        seen = torch.ones(count, prefix_len + width, dtype=torch.long, device=self.device)
        if width == 0:
            return cache, seen
        ids = torch.full((count, width), self.pad_id, dtype=torch.long, device=self.device)
        positions = torch.full((count, width), prefix_len, dtype=torch.long, device=self.device)
        for i, mid in enumerate(middles):
            pad = width - len(mid)
            seen[i, prefix_len:prefix_len + pad] = 0
            if mid:  # the padding's positions do not matter (masked out); they stay in range
                ids[i, pad:] = torch.tensor(mid, device=self.device)
                positions[i, pad:] = torch.arange(prefix_len, prefix_len + len(mid), device=self.device)
        decoder(input_ids=ids, attention_mask=seen, position_ids=positions, use_cache=True,
                **{_cache_kwarg(decoder): cache})
        self.forward_tokens += sum(len(m) for m in middles)
        return cache, seen

    def _job_rows(self, decoder: Any, cache: Any, seen: Tensor, rows: list[tuple[int, ReplayJob]],
                  out: dict[ReplayJob, Tensor]) -> None:
        """Run ``[last context token] + response[:-1]`` (the T inputs whose outputs predict the T
        response tokens; the last response token predicts nothing the statistics read) for each
        (context index, job) row on top of that context's keys and values (gathered from ``cache``),
        right-padded; store the hidden states."""
        width = max(len(job.response) for _, job in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long, device=self.device)
        positions = torch.empty((len(rows), width), dtype=torch.long, device=self.device)
        for i, (_, job) in enumerate(rows):
            ids[i, :len(job.response)] = torch.tensor((job.context[-1], *job.response[:-1]), device=self.device)
            start = len(job.context) - 1
            positions[i] = torch.arange(start, start + width, device=self.device)
        index = torch.tensor([c for c, _ in rows], device=self.device)
        rows_cache = cache_copy(cache)
        rows_cache.reorder_cache(index)
        mask = torch.cat([seen[index], torch.ones(len(rows), width, dtype=seen.dtype, device=self.device)], dim=1)
        hidden = decoder(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                         **{_cache_kwarg(decoder): rows_cache}).last_hidden_state
        self.forward_tokens += sum(len(job.response) for _, job in rows)
        self.padded_tokens += len(rows) * width - sum(len(job.response) for _, job in rows)
        for i, (_, job) in enumerate(rows):
            out[job] = hidden[i, :len(job.response)].clone()

    def _encode_prefix(self, decoder: Any, tokens: Sequence[int]) -> Any:
        """The KV cache after ``tokens`` (batch of one)."""
        self.forward_tokens += len(tokens)
        ids = torch.tensor([list(tokens)], device=self.device)
        return _returned_cache(decoder(input_ids=ids, use_cache=True))

    def _full_rows(self, decoder: Any, jobs: Sequence[ReplayJob], out: dict[ReplayJob, Tensor]) -> None:
        """Run context + response of each job, right-padded (causal attention never looks at
        trailing padding, so no mask is needed), and store the hidden states."""
        for batch in length_batches(jobs, lambda j: len(j.context) + len(j.response), self.batch_size):
            width = max(len(j.context) + len(j.response) for j in batch)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long, device=self.device)
            for i, job in enumerate(batch):
                ids[i, :len(job.context) + len(job.response)] = torch.tensor(job.context + job.response,
                                                                             device=self.device)
            hidden = decoder(input_ids=ids, use_cache=False).last_hidden_state
            self.forward_tokens += sum(len(j.context) + len(j.response) for j in batch)
            for i, job in enumerate(batch):
                first = len(job.context) - 1
                out[job] = hidden[i, first:first + len(job.response)].clone()

    # -- statistics --------------------------------------------------------------------------------
    def _stat_chunk(self, head: Any) -> int:
        return stat_chunk_positions(self.chunk_size, head.weight.shape[0])

    def _logits(self, head: Any, hidden: Tensor, cap: float | None, out: Tensor | None = None) -> Tensor:
        """The statistics' logits of hidden states: the LM head in the model's dtype, or with
        ``head_float32`` a float32 copy of it on the (upcast) hidden states, so that the logits
        carry no bf16 output rounding (a bf16 logit of 16 is rounded to a step of 1/8). ``out``
        (float32, [len(hidden), V]): where the float32 head writes them (a reused buffer; the same
        matrix product as ``linear``); the result may then be a view of it."""
        if not self.head_float32 or head.weight.dtype == torch.float32:
            return head_logits(head, hidden, cap, self.temperature)
        if self._head32 is None or self._head32[0].device != hidden.device:
            bias = None if head.bias is None else head.bias.detach().float()
            self._head32 = (head.weight.detach().float(), bias)
        weight, bias = self._head32
        x = hidden.float()
        if out is None:
            logits = torch.nn.functional.linear(x, weight, bias)
        elif bias is None:
            logits = torch.mm(x, weight.t(), out=out)
        else:
            logits = torch.addmm(bias, x, weight.t(), out=out)
        return tempered(capped(logits, cap), self.temperature)

    def _scratch(self, name: str, rows: int, like: Tensor) -> Tensor:
        """A float32 [rows, V] tensor kept between calls (V = the vocabulary, ``like``'s head),
        grown when too small: the statistics' per-chunk blocks are written into the same memory
        each time instead of into fresh allocations of tens of MB."""
        V = like.shape[0]
        buf = self._buffers.get(name)
        if buf is None or buf.shape[0] < rows or buf.shape[1] != V or buf.device != like.device:
            buf = torch.empty(rows, V, dtype=torch.float32, device=like.device)
            self._buffers[name] = buf
        return buf[:rows]

    def _kept_or_head(self, head: Any, hidden: Tensor, logits: Tensor | None, cap: float | None,
                      out: Tensor | None = None) -> Tensor:
        """Kept sampling logits when given (and not overridden by ``head_float32``), else the head."""
        if logits is not None and not self.head_float32:
            return tempered(capped(logits, cap), self.temperature)
        return self._logits(head, hidden, cap, out)

    def refresh(self) -> None:
        """Forget the float32 head copy (call after the model's weights change)."""
        self._head32 = None

    @torch.inference_mode()
    def js(self, hidden_a: Tensor, hidden_b: Tensor) -> Tensor:
        """q_t = sqrt(JS(p_a,t || p_b,t) / ln 2) for every position, streamed over chunks. [T] float32."""
        _, head, cap = decoder_and_head(self.model)
        step = self._stat_chunk(head)
        parts = []
        for s in range(0, hidden_a.shape[0], step):
            la = self._logits(head, hidden_a[s:s + step], cap)
            lb = self._logits(head, hidden_b[s:s + step], cap)
            parts.append(js_distance(la, lb, chunk_size=JS_ROWS))
        return torch.cat(parts) if parts else torch.zeros(0)

    @torch.inference_mode()
    def js_many(self, hidden_a: Tensor, others: Sequence[Tensor], logits_a: Tensor | None = None) -> list[Tensor]:
        """:meth:`js` of ``hidden_a`` against each of ``others``; the logits and log-probabilities
        of ``hidden_a`` are made once per chunk and shared (P_all against every P_\\k of a response).
        ``logits_a`` (raw head outputs [T, V], e.g. kept from sampling) replaces the head on ``hidden_a``."""
        _, head, cap = decoder_and_head(self.model)
        step = self._stat_chunk(head)
        parts: list[list[Tensor]] = [[] for _ in others]
        rows = min(step, hidden_a.shape[0])
        buffers = (self._scratch("log_p", rows, head.weight), self._scratch("p", rows, head.weight))
        logits_out = self._scratch("logits", rows, head.weight) if self.head_float32 else None
        for s in range(0, hidden_a.shape[0], step):
            e = s + step
            n = min(e, hidden_a.shape[0]) - s
            out = None if logits_out is None else logits_out[:n]
            la = self._kept_or_head(head, hidden_a[s:e], None if logits_a is None else logits_a[s:e], cap, out)
            ref = JSAgainst(la, chunk_size=JS_ROWS, buffers=buffers)  # la is read here, then free
            for part, hb in zip(parts, others):
                part.append(ref.distance(self._logits(head, hb[s:e], cap, out)))
        return [torch.cat(p) if p else torch.zeros(0) for p in parts]

    @torch.inference_mode()
    def logprobs(self, hidden: Tensor, tokens: Sequence[int], logits: Tensor | None = None) -> Tensor:
        """log p(y_t | ...) of the given tokens, streamed over chunks. [T] float32. ``logits`` (raw
        head outputs [T, V], e.g. kept from sampling) replaces the head on ``hidden``."""
        _, head, cap = decoder_and_head(self.model)
        ids = torch.tensor(list(tokens), device=hidden.device)
        step = self._stat_chunk(head)
        parts = []
        for s in range(0, hidden.shape[0], step):
            e = s + step
            chunk = self._kept_or_head(head, hidden[s:e], None if logits is None else logits[s:e], cap)
            parts.append(token_logprobs(chunk, ids[s:e]))
        return torch.cat(parts) if parts else torch.zeros(0)


    @torch.inference_mode()
    def entropy(self, hidden: Tensor, logits: Tensor | None = None) -> Tensor:
        """The entropy of the next-token distribution at every position, streamed over chunks. [T]
        float32. ``logits`` (raw head outputs [T, V], e.g. kept from sampling) replaces the head."""
        _, head, cap = decoder_and_head(self.model)
        step = self._stat_chunk(head)
        parts = []
        for s in range(0, hidden.shape[0], step):
            e = s + step
            chunk = self._kept_or_head(head, hidden[s:e], None if logits is None else logits[s:e], cap)
            parts.append(token_entropy(chunk))
        return torch.cat(parts) if parts else torch.zeros(0)


# ----------------------------------------------------------------------------------------------
# brute force, for tests and the benchmark's naive baseline


@torch.no_grad()
def full_context_hidden(model: Any, job: ReplayJob) -> Tensor:
    """The same hidden states as :meth:`ReplayEngine.run`, from one unbatched full-sequence pass (a
    reference for the tests and ``bench/gpu_check.py``)."""
    decoder, _, _ = decoder_and_head(model)
    device = next(model.parameters()).device
    ids = torch.tensor([list(job.context) + list(job.response)], device=device)
    hidden = decoder(input_ids=ids).last_hidden_state[0]
    s = len(job.context)
    return hidden[s - 1:s - 1 + len(job.response)]


@torch.no_grad()
def full_logits_js(model: Any, job_a: ReplayJob, job_b: ReplayJob) -> Tensor:
    """Brute force: whole-model logits of both full sequences, then JS per response position (a
    reference for the tests and ``bench/gpu_check.py``)."""
    device = next(model.parameters()).device
    out = []
    for job in (job_a, job_b):
        ids = torch.tensor([list(job.context) + list(job.response)], device=device)
        logits = model(input_ids=ids).logits[0].float()
        s = len(job.context)
        out.append(logits[s - 1:s - 1 + len(job.response)])
    return js_distance(out[0], out[1])
