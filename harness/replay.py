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
last token plus its response, on top of its own context's cache (gathered per row), right-padded,
in batches of similar lengths. Identical jobs are computed once (P_all is shared by all rewards of
a response; ifollow's P_\\k by every response of the group).

P_all and the old-policy pass. P_all is replayed once per response and its logits are made once
per chunk for all of the response's rewards (:meth:`ReplayEngine.js_many`). When P_all is the
sampling prompt itself (ifollow; CoRT's x+ always), the old policy's pass over the sampled
sequence already happened during sampling: the rollout records the final hidden states that
produced each sampled token (a hook on the final norm, see :mod:`harness.backends.rollout`) and
the builders below use them instead of replaying P_all (tested equal to the replay, float32).
Where they fit the memory budget (``backend.sampling_logits_mb``), the sampling logits are kept
too, and the LM head is not applied to P_all again. With one optimiser update per step the
ratio's old log-probabilities are the detached current ones, so the trainer needs no separate
old-log-prob pass.

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
from typing import Any

import torch
from torch import Tensor

from algorithms.relevance import JSAgainst, js_distance, token_logprobs

#: sequences per replay wave, in engine batches (see :func:`leave_one_out`)
WAVE_BATCHES = 4


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


#: rows per Jensen-Shannon evaluation inside a chunk: 16 x V float32 stays cache-resident, which
#: measured about 30% faster than 64 rows for V = 49,152 on one CPU thread (results are row-wise,
#: so the value does not change them)
JS_ROWS = 16


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


def head_logits(head: Any, hidden: Tensor, cap: float | None = None) -> Tensor:
    """LM-head logits of hidden states [..., H] (see :func:`capped` for the dtype)."""
    return capped(head(hidden), cap)


def _cache_kwarg(decoder: Any) -> str:
    """transformers 5.2x names the KV-cache argument ``cache``; older releases ``past_key_values``."""
    import inspect

    params = inspect.signature(decoder.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def _returned_cache(output: Any) -> Any:
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


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

    def __init__(self, model: Any, batch_size: int = 8, chunk_size: int = 64, share_prefix: bool = True,
                 pad_id: int = 0):
        self.model = model
        self.batch_size = max(1, int(batch_size))
        self.chunk_size = max(1, int(chunk_size))
        self.share_prefix = share_prefix
        self.pad_id = int(pad_id)
        self.forward_tokens = 0  # tokens run through the model (a cost counter for benchmarks)

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
        ``[last context token] + response`` on top of its own context's cache, ``batch_size`` rows
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
        for start in range(0, len(contexts), self.batch_size):
            chunk = contexts[start:start + self.batch_size]
            cache, seen = self._encode_contexts(decoder, prefix_cache, prefix_len, chunk)
            rows = [(i, job) for i, ctx in enumerate(chunk) for job in by_context[ctx]]
            for batch in length_batches(rows, lambda row: len(row[1].response), self.batch_size):
                self._job_rows(decoder, cache, seen, batch, out)
        return out

    def _encode_contexts(self, decoder: Any, prefix_cache: Any, prefix_len: int,
                         contexts: Sequence[tuple[int, ...]]) -> tuple[Any, Tensor]:
        """KV cache [len(contexts)] of each context up to (not including) its last token, on top of
        the shared prefix, and the key mask [len(contexts), cache length] (0 at left padding)."""
        middles = [c[prefix_len:-1] for c in contexts]
        width = max(len(m) for m in middles)
        count = len(contexts)
        cache = copy.deepcopy(prefix_cache)
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
        """Run ``[last context token] + response`` for each (context index, job) row on top of that
        context's keys and values (gathered from ``cache``), right-padded; store the hidden states."""
        width = 1 + max(len(job.response) for _, job in rows)
        ids = torch.full((len(rows), width), self.pad_id, dtype=torch.long, device=self.device)
        positions = torch.empty((len(rows), width), dtype=torch.long, device=self.device)
        for i, (_, job) in enumerate(rows):
            ids[i, :1 + len(job.response)] = torch.tensor((job.context[-1], *job.response), device=self.device)
            start = len(job.context) - 1
            positions[i] = torch.arange(start, start + width, device=self.device)
        index = torch.tensor([c for c, _ in rows], device=self.device)
        rows_cache = copy.deepcopy(cache)
        rows_cache.reorder_cache(index)
        mask = torch.cat([seen[index], torch.ones(len(rows), width, dtype=seen.dtype, device=self.device)], dim=1)
        hidden = decoder(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                         **{_cache_kwarg(decoder): rows_cache}).last_hidden_state
        self.forward_tokens += sum(1 + len(job.response) for _, job in rows)
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
    @torch.inference_mode()
    def js(self, hidden_a: Tensor, hidden_b: Tensor) -> Tensor:
        """q_t = sqrt(JS(p_a,t || p_b,t) / ln 2) for every position, streamed over chunks. [T] float32."""
        _, head, cap = decoder_and_head(self.model)
        parts = []
        for s in range(0, hidden_a.shape[0], self.chunk_size):
            la = head_logits(head, hidden_a[s:s + self.chunk_size], cap)
            lb = head_logits(head, hidden_b[s:s + self.chunk_size], cap)
            parts.append(js_distance(la, lb, chunk_size=JS_ROWS))
        return torch.cat(parts) if parts else torch.zeros(0)

    @torch.inference_mode()
    def js_many(self, hidden_a: Tensor, others: Sequence[Tensor], logits_a: Tensor | None = None) -> list[Tensor]:
        """:meth:`js` of ``hidden_a`` against each of ``others``; the logits and log-probabilities
        of ``hidden_a`` are made once per chunk and shared (P_all against every P_\\k of a response).
        ``logits_a`` (raw head outputs [T, V], e.g. kept from sampling) replaces the head on ``hidden_a``."""
        _, head, cap = decoder_and_head(self.model)
        parts: list[list[Tensor]] = [[] for _ in others]
        for s in range(0, hidden_a.shape[0], self.chunk_size):
            e = s + self.chunk_size
            la = capped(logits_a[s:e], cap) if logits_a is not None else head_logits(head, hidden_a[s:e], cap)
            ref = JSAgainst(la, chunk_size=JS_ROWS)
            for part, hb in zip(parts, others):
                part.append(ref.distance(head_logits(head, hb[s:e], cap)))
        return [torch.cat(p) if p else torch.zeros(0) for p in parts]

    @torch.inference_mode()
    def logprobs(self, hidden: Tensor, tokens: Sequence[int], logits: Tensor | None = None) -> Tensor:
        """log p(y_t | ...) of the given tokens, streamed over chunks. [T] float32. ``logits`` (raw
        head outputs [T, V], e.g. kept from sampling) replaces the head on ``hidden``."""
        _, head, cap = decoder_and_head(self.model)
        ids = torch.tensor(list(tokens), device=hidden.device)
        parts = []
        for s in range(0, hidden.shape[0], self.chunk_size):
            e = s + self.chunk_size
            chunk = capped(logits[s:e], cap) if logits is not None else head_logits(head, hidden[s:e], cap)
            parts.append(token_logprobs(chunk, ids[s:e]))
        return torch.cat(parts) if parts else torch.zeros(0)


# ----------------------------------------------------------------------------------------------
# brute force, for tests and the benchmark's naive baseline


@torch.no_grad()
def full_context_hidden(model: Any, job: ReplayJob) -> Tensor:
    """The same hidden states as :meth:`ReplayEngine.run`, from one unbatched full-sequence pass."""
    decoder, _, _ = decoder_and_head(model)
    device = next(model.parameters()).device
    ids = torch.tensor([list(job.context) + list(job.response)], device=device)
    hidden = decoder(input_ids=ids).last_hidden_state[0]
    s = len(job.context)
    return hidden[s - 1:s - 1 + len(job.response)]


@torch.no_grad()
def full_logits_js(model: Any, job_a: ReplayJob, job_b: ReplayJob) -> Tensor:
    """Brute force: whole-model logits of both full sequences, then JS per response position."""
    device = next(model.parameters()).device
    out = []
    for job in (job_a, job_b):
        ids = torch.tensor([list(job.context) + list(job.response)], device=device)
        logits = model(input_ids=ids).logits[0].float()
        s = len(job.context)
        out.append(logits[s - 1:s - 1 + len(job.response)])
    return js_distance(out[0], out[1])


# ----------------------------------------------------------------------------------------------
# what each algorithm asks for, built through the task


@dataclass
class ReplayResult:
    """Statistics for a :class:`algorithms.RolloutBatch` plus cost counters.

    ``pairs_replayed`` / ``pairs_total``: (response, reward) pairs replayed / with a non-NaN reward.
    ``teacher_hidden``: OPSD's teacher hidden states [T_j, H] per response (logits are made from
    them a micro-batch at a time during the update).
    """

    relevance: Tensor | None = None
    joint_relevance: Tensor | None = None
    logprob_delta: Tensor | None = None
    teacher_hidden: list[Tensor] | None = None
    pairs_replayed: int = 0
    pairs_total: int = 0
    sequences: int = 0
    sampling_hidden_used: int = 0  # P_all / x+ passes taken from the sampling pass


class _Tokens:
    """Chat-template token ids of message lists, memoised within one step."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.memo: dict[str, tuple[int, ...]] = {}

    def __call__(self, messages: list[dict[str, str]]) -> tuple[int, ...]:
        import json

        from harness.models import chat_prompt_ids

        key = json.dumps(messages, sort_keys=True)
        if key not in self.memo:
            self.memo[key] = tuple(chat_prompt_ids(self.tokenizer, messages))
        return self.memo[key]


def _sampling_pass(rollouts: Sequence[Any], pairs: Sequence[tuple[int, ReplayJob]]
                   ) -> tuple[dict[ReplayJob, Tensor], dict[ReplayJob, Tensor]]:
    """Hidden states and, where kept, logits recorded while sampling, for the jobs whose context is
    the sampling prompt itself (ifollow's P_all, CoRT's x+): that pass already ran, so the replay
    skips it (and, with the logits, skips the LM head too)."""
    hidden_out, logits_out = {}, {}
    for j, job in pairs:
        r = rollouts[j]
        hidden = getattr(r, "hidden", None)
        if hidden is not None and job.context == tuple(r.prompt_ids) and hidden.shape[0] == len(job.response):
            hidden_out[job] = hidden
            logits = getattr(r, "logits", None)
            if logits is not None and logits.shape[0] == len(job.response):
                logits_out[job] = logits
    return hidden_out, logits_out


def _groups(rollouts: Sequence[Any]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for i, r in enumerate(rollouts):
        out.setdefault(r.group, []).append(i)
    return out


def leave_one_out(engine: ReplayEngine, task: Any, tokenizer: Any, rollouts: Sequence[Any], rewards: Tensor,
                  group_ids: Tensor, T: int, pairs: Tensor | None = None) -> ReplayResult:
    """MRTPO (Eq. 4-5): relevance[B,K,T], NaN except for the replayed (response, reward) pairs.

    A pair is replayed when its reward varies within the group (others have zero advantage) and
    the task builds a P_\\k for it (the default task hook skips rewards whose verdict has no block).
    P_all is replayed once per response and shared by its rewards. ``pairs`` (bool[B, K]) overrides
    the selection (the overhead benchmark uses it to control the replayed share). Groups are
    replayed in waves of about ``WAVE_BATCHES`` batches of sequences (one engine run each), which
    keeps batches full across small groups and bounds the hidden states held at once.
    """
    from algorithms.base import rewards_varying_in_group

    B, K = rewards.shape
    rel = torch.full((B, K, T), float("nan"))
    varying = rewards_varying_in_group(rewards, group_ids) if pairs is None else pairs
    tokens = _Tokens(tokenizer)
    res = ReplayResult(relevance=rel, pairs_total=int((~torch.isnan(rewards)).sum()))
    plan: list[tuple[int, ReplayJob, dict[int, ReplayJob]]] = []
    for members in _groups(rollouts).values():
        for j in members:
            ks = [k for k in range(K) if bool(varying[j, k])]
            r = rollouts[j]
            if not ks or not r.response_ids:
                continue
            ctx = task.replay_contexts(r.example, r.verdicts, ks)
            if not ctx.without:
                continue
            resp = tuple(r.response_ids)
            plan.append((j, ReplayJob(tokens(ctx.all), resp),
                         {k: ReplayJob(tokens(m), resp) for k, m in ctx.without.items()}))
        if sum(1 + len(w) for _, _, w in plan) >= WAVE_BATCHES * engine.batch_size:
            _leave_one_out_wave(engine, rollouts, plan, rel, res)
            plan = []
    _leave_one_out_wave(engine, rollouts, plan, rel, res)
    return res


def _leave_one_out_wave(engine: ReplayEngine, rollouts: Sequence[Any],
                        plan: list[tuple[int, ReplayJob, dict[int, ReplayJob]]], rel: Tensor,
                        res: ReplayResult) -> None:
    """Replay one wave of groups together (their contexts and rows share batches) and fill in the
    relevance of its pairs."""
    if not plan:
        return
    known, logits = _sampling_pass(rollouts, [(j, a) for j, a, _ in plan])
    jobs = [job for _, a, w in plan for job in (a, *w.values()) if job not in known]
    hidden = {**known, **engine.run(jobs)}
    res.sequences += len(set(jobs))
    res.sampling_hidden_used += len(known)
    for j, a, without in plan:
        n = len(a.response)
        ks = list(without)
        for k, q in zip(ks, engine.js_many(hidden[a], [hidden[without[k]] for k in ks], logits.get(a))):
            rel[j, k, :n] = q.cpu()
            res.pairs_replayed += 1


def joint(engine: ReplayEngine, task: Any, tokenizer: Any, rollouts: Sequence[Any], rewards: Tensor,
          group_ids: Tensor, T: int) -> ReplayResult:
    """mrtpo-joint: joint_relevance[B,T] = JS between P_0 + every block and P_0, for responses of groups
    where some reward varies; the pairs counted as replayed are all varying pairs of those responses."""
    from algorithms.base import rewards_varying_in_group

    B, _K = rewards.shape
    out = torch.full((B, T), float("nan"))
    varying = rewards_varying_in_group(rewards, group_ids)
    tokens = _Tokens(tokenizer)
    res = ReplayResult(joint_relevance=out, pairs_total=int((~torch.isnan(rewards)).sum()))
    for members in _groups(rollouts).values():
        plan = []
        for j in members:
            r = rollouts[j]
            if not bool(varying[j].any()) or not r.response_ids:
                continue
            with_blocks, plain = task.joint_context(r.example, r.verdicts)
            a, b = tokens(with_blocks), tokens(plain)
            if a == b:
                continue
            resp = tuple(r.response_ids)
            plan.append((j, ReplayJob(a, resp), ReplayJob(b, resp)))
        hidden = engine.run([job for _, a, b in plan for job in (a, b)])
        res.sequences += len(hidden)
        for j, a, b in plan:
            out[j, :len(a.response)] = engine.js(hidden[a], hidden[b]).cpu()
            res.pairs_replayed += int(varying[j].sum())
    return res


def rubric(engine: ReplayEngine, task: Any, tokenizer: Any, rollouts: Sequence[Any], rewards: Tensor,
           group_ids: Tensor, T: int) -> ReplayResult:
    """CoRT: logprob_delta[B,T] = log pi(y_t | x+) - log pi(y_t | x-), x+ the sampling prompt and x-
    ``task.without_rubric``; only for groups where some reward varies (elsewhere the advantage is 0)."""
    from algorithms.base import rewards_varying_in_group

    B, _K = rewards.shape
    out = torch.full((B, T), float("nan"))
    varying = rewards_varying_in_group(rewards, group_ids)
    tokens = _Tokens(tokenizer)
    res = ReplayResult(logprob_delta=out, pairs_total=int((~torch.isnan(rewards)).sum()))
    for members in _groups(rollouts).values():
        plan = []
        for j in members:
            r = rollouts[j]
            if not bool(varying[j].any()) or not r.response_ids:
                continue
            resp = tuple(r.response_ids)
            plan.append((j, ReplayJob(tuple(r.prompt_ids), resp),
                         ReplayJob(tokens(task.without_rubric(r.example)), resp)))
        known, logits = _sampling_pass(rollouts, [(j, a) for j, a, _ in plan])
        jobs = [job for _, a, b in plan for job in (a, b) if job not in known]
        hidden = {**known, **engine.run(jobs)}
        res.sequences += len(set(jobs))
        res.sampling_hidden_used += len(known)
        for j, a, b in plan:
            delta = (engine.logprobs(hidden[a], a.response, logits.get(a))
                     - engine.logprobs(hidden[b], b.response))
            out[j, :len(a.response)] = delta.cpu()
            res.pairs_replayed += int(varying[j].sum())
    return res


def teacher(engine: ReplayEngine, task: Any, tokenizer: Any, rollouts: Sequence[Any], rewards: Tensor,
            group_ids: Tensor, T: int) -> ReplayResult:
    """OPSD: the teacher's (``engine`` runs the initial model) hidden states on the student's tokens
    under ``task.teacher_messages``, for every response."""
    tokens = _Tokens(tokenizer)
    res = ReplayResult(teacher_hidden=[], pairs_total=int((~torch.isnan(rewards)).sum()))
    jobs: list[ReplayJob | None] = []
    for r in rollouts:
        jobs.append(ReplayJob(tokens(task.teacher_messages(r.example)), tuple(r.response_ids))
                    if r.response_ids else None)
    for members in _groups(rollouts).values():
        engine_jobs = [jobs[j] for j in members if jobs[j] is not None]
        hidden = engine.run(engine_jobs)  # type: ignore[arg-type]
        res.sequences += len(hidden)
        for j in members:
            job = jobs[j]
            res.teacher_hidden.append(hidden[job] if job is not None else torch.zeros(0))  # type: ignore[union-attr]
    # members of _groups are visited in rollout order (groups are consecutive), so the list is aligned
    res.pairs_replayed = res.pairs_total
    return res


BUILDERS = {"leave_one_out": leave_one_out, "joint": joint, "rubric": rubric, "teacher": teacher}


def replay_for(request: str, engine: ReplayEngine, task: Any, tokenizer: Any, rollouts: Sequence[Any],
               rewards: Tensor, group_ids: Tensor, T: int) -> ReplayResult:
    """Dispatch on the algorithm's ``replay_request`` value ("none" gives an empty result)."""
    request = getattr(request, "value", request)
    if request == "none":
        return ReplayResult(pairs_total=int((~torch.isnan(rewards)).sum()))
    if request not in BUILDERS:
        raise ValueError(f"unknown replay request {request!r}; known: none, {', '.join(BUILDERS)}")
    return BUILDERS[request](engine, task, tokenizer, rollouts, rewards, group_ids, T)
