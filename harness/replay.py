"""The replay engine: forward passes of the old policy over sampled responses under other contexts.

A replay job is one (context token ids, response token ids) pair. The engine returns, per job, the
final hidden states at the T positions that predict the response tokens ([T, H], the positions
``len(context) - 1 ... len(context) + T - 2``), never logits: logits are produced from those hidden
states by the LM head a chunk of positions at a time (``chunk_size``) and streamed straight into
the statistic (Jensen-Shannon distance, log-probabilities), so [T, V] is never held for a batch.

Prefix sharing. All jobs handed to :meth:`ReplayEngine.run` together (one prompt group: its G
responses under every context) share the longest common token prefix of their contexts, capped so
that every job keeps at least one context token of its own. The prefix's KV cache is computed once
(batch of one) and expanded over each batch of jobs; a batch then runs only the changed context
suffix plus the response, right-padded. Right padding needs no attention mask: with causal
attention a real token never attends to padding that follows it, and positions continue from the
prefix length. Identical jobs are computed once (P_all is shared by all rewards of a response).

P_all and the old-policy pass. P_all is replayed once per response and its logits are made once
per chunk for all of the response's rewards (:meth:`ReplayEngine.js_many`). When P_all is the
sampling prompt itself (ifollow; CoRT's x+ always), the old policy's pass over the sampled
sequence already happened during sampling: the rollout records the final hidden states that
produced each sampled token (a hook on the final norm, see :mod:`harness.backends.rollout`) and
the builders below use them instead of replaying P_all (tested equal to the replay, float32).
With one optimiser update per step the ratio's old log-probabilities are the detached current
ones, so the trainer needs no separate old-log-prob pass.

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

from algorithms.relevance import js_distance, token_logprobs

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


def head_logits(head: Any, hidden: Tensor, cap: float | None = None) -> Tensor:
    """LM-head logits of hidden states [..., H], in float32."""
    logits = head(hidden).float()
    if cap:
        logits = torch.tanh(logits / cap) * cap
    return logits


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
    @torch.no_grad()
    def run(self, jobs: Sequence[ReplayJob]) -> dict[ReplayJob, Tensor]:
        """Final hidden states [T, H] at the positions predicting each job's response tokens.

        Two levels of sharing (``share_prefix``): the group prefix P (longest common prefix of all
        contexts) is encoded once; a context used by several jobs (ifollow's P_\\k is the same for
        every response of the group) is then encoded once on top of P, up to its last token, and
        its jobs run only ``[last context token] + response``. Contexts used once run their
        remaining suffix plus the response on top of P.
        """
        unique = list(dict.fromkeys(jobs))
        if not unique:
            return {}
        for job in unique:
            if not job.context or not job.response:
                raise ValueError("a replay job needs a non-empty context and response")
        decoder, _, _ = decoder_and_head(self.model)
        by_context: dict[tuple[int, ...], list[ReplayJob]] = {}
        for job in unique:
            by_context.setdefault(job.context, []).append(job)
        out: dict[ReplayJob, Tensor] = {}
        if not self.share_prefix:
            self._batches(decoder, None, 0, [(j, list(j.context) + list(j.response), len(j.context) - 1)
                                             for j in unique], out)
            return out
        contexts = list(by_context)
        prefix_len = min(common_prefix_length(contexts), min(len(c) for c in contexts) - 1)
        prefix_cache = self._encode(decoder, None, 0, contexts[0][:prefix_len])
        singles = []
        for ctx, ctx_jobs in by_context.items():
            if len(ctx_jobs) == 1 or len(ctx) - 1 <= prefix_len:
                singles += [(j, list(ctx[prefix_len:]) + list(j.response), len(ctx) - 1 - prefix_len)
                            for j in ctx_jobs]
                continue
            cache = self._encode(decoder, prefix_cache, prefix_len, ctx[prefix_len:-1])
            rows = [(j, [ctx[-1]] + list(j.response), 0) for j in ctx_jobs]
            self._batches(decoder, cache, len(ctx) - 1, rows, out)
        self._batches(decoder, prefix_cache, prefix_len, singles, out)
        return out

    def _encode(self, decoder: Any, cache: Any, cache_len: int, tokens: Sequence[int]) -> Any:
        """The KV cache after ``tokens`` (batch of one), continuing ``cache`` (not modified)."""
        if not tokens:
            return copy.deepcopy(cache) if cache is not None else None
        ids = torch.tensor([list(tokens)], device=self.device)
        kwargs: dict[str, Any] = {"input_ids": ids, "use_cache": True}
        if cache is not None:
            kwargs[_cache_kwarg(decoder)] = copy.deepcopy(cache)
            kwargs["position_ids"] = torch.arange(cache_len, cache_len + len(tokens), device=self.device)[None]
        self.forward_tokens += len(tokens)
        return _returned_cache(decoder(**kwargs))

    def _batches(self, decoder: Any, cache: Any, cache_len: int, rows: list[tuple[ReplayJob, list[int], int]],
                 out: dict[ReplayJob, Tensor]) -> None:
        """Run right-padded rows (job, input tokens, index of the hidden state predicting the first
        response token) on top of ``cache`` (expanded over each batch) and store the hidden states."""
        rows = sorted(rows, key=lambda r: len(r[1]), reverse=True)  # similar lengths share a batch
        for start in range(0, len(rows), self.batch_size):
            batch = rows[start:start + self.batch_size]
            width = max(len(r[1]) for r in batch)
            ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long, device=self.device)
            for i, (_, tokens, _) in enumerate(batch):
                ids[i, :len(tokens)] = torch.tensor(tokens, device=self.device)
            kwargs: dict[str, Any] = {"input_ids": ids, "use_cache": cache is not None}
            if cache is not None:
                expanded = copy.deepcopy(cache)
                expanded.batch_repeat_interleave(len(batch))
                kwargs[_cache_kwarg(decoder)] = expanded
                kwargs["position_ids"] = torch.arange(cache_len, cache_len + width,
                                                      device=self.device).unsqueeze(0).expand(len(batch), -1)
            hidden = decoder(**kwargs).last_hidden_state
            self.forward_tokens += sum(len(r[1]) for r in batch)
            for i, (job, _, first) in enumerate(batch):
                out[job] = hidden[i, first:first + len(job.response)].clone()

    # -- statistics --------------------------------------------------------------------------------
    @torch.no_grad()
    def js(self, hidden_a: Tensor, hidden_b: Tensor) -> Tensor:
        """q_t = sqrt(JS(p_a,t || p_b,t) / ln 2) for every position, streamed over chunks. [T] float32."""
        _, head, cap = decoder_and_head(self.model)
        parts = []
        for s in range(0, hidden_a.shape[0], self.chunk_size):
            la = head_logits(head, hidden_a[s:s + self.chunk_size], cap)
            lb = head_logits(head, hidden_b[s:s + self.chunk_size], cap)
            parts.append(js_distance(la, lb, chunk_size=JS_ROWS))
        return torch.cat(parts) if parts else torch.zeros(0)

    @torch.no_grad()
    def js_many(self, hidden_a: Tensor, others: Sequence[Tensor]) -> list[Tensor]:
        """:meth:`js` of ``hidden_a`` against each of ``others``; the logits of ``hidden_a`` are made
        once per chunk and shared (P_all against every P_\\k of a response)."""
        _, head, cap = decoder_and_head(self.model)
        parts: list[list[Tensor]] = [[] for _ in others]
        for s in range(0, hidden_a.shape[0], self.chunk_size):
            la = head_logits(head, hidden_a[s:s + self.chunk_size], cap)
            for i, hb in enumerate(others):
                lb = head_logits(head, hb[s:s + self.chunk_size], cap)
                parts[i].append(js_distance(la, lb, chunk_size=JS_ROWS))
        return [torch.cat(p) if p else torch.zeros(0) for p in parts]

    @torch.no_grad()
    def logprobs(self, hidden: Tensor, tokens: Sequence[int]) -> Tensor:
        """log p(y_t | ...) of the given tokens, streamed over chunks. [T] float32."""
        _, head, cap = decoder_and_head(self.model)
        ids = torch.tensor(list(tokens), device=hidden.device)
        parts = []
        for s in range(0, hidden.shape[0], self.chunk_size):
            logits = head_logits(head, hidden[s:s + self.chunk_size], cap)
            parts.append(token_logprobs(logits, ids[s:s + self.chunk_size]))
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


def _sampling_hidden(rollouts: Sequence[Any], pairs: Sequence[tuple[int, ReplayJob]]) -> dict[ReplayJob, Tensor]:
    """Hidden states recorded while sampling, for the jobs whose context is the sampling prompt
    itself (ifollow's P_all, CoRT's x+): that pass already ran, so the replay skips it."""
    out = {}
    for j, job in pairs:
        r = rollouts[j]
        hidden = getattr(r, "hidden", None)
        if hidden is not None and job.context == tuple(r.prompt_ids) and hidden.shape[0] == len(job.response):
            out[job] = hidden
    return out


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
    the selection (the overhead benchmark uses it to control the replayed share).
    """
    from algorithms.base import rewards_varying_in_group

    B, K = rewards.shape
    rel = torch.full((B, K, T), float("nan"))
    varying = rewards_varying_in_group(rewards, group_ids) if pairs is None else pairs
    tokens = _Tokens(tokenizer)
    res = ReplayResult(relevance=rel, pairs_total=int((~torch.isnan(rewards)).sum()))
    for members in _groups(rollouts).values():
        plan: list[tuple[int, ReplayJob, dict[int, ReplayJob]]] = []
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
        known = _sampling_hidden(rollouts, [(j, a) for j, a, _ in plan])
        jobs = [job for _, a, w in plan for job in (a, *w.values()) if job not in known]
        hidden = {**known, **engine.run(jobs)}
        res.sequences += len(set(jobs))
        res.sampling_hidden_used += len(known)
        for j, a, without in plan:
            n = len(a.response)
            ks = list(without)
            for k, q in zip(ks, engine.js_many(hidden[a], [hidden[without[k]] for k in ks])):
                rel[j, k, :n] = q.cpu()
                res.pairs_replayed += 1
    return res


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
        known = _sampling_hidden(rollouts, [(j, a) for j, a, _ in plan])
        jobs = [job for _, a, b in plan for job in (a, b) if job not in known]
        hidden = {**known, **engine.run(jobs)}
        res.sequences += len(set(jobs))
        res.sampling_hidden_used += len(known)
        for j, a, b in plan:
            delta = engine.logprobs(hidden[a], a.response) - engine.logprobs(hidden[b], b.response)
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
