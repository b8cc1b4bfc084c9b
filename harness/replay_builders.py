"""What each algorithm asks the replay engine for, built through the task: MRTPO's leave-one-out
contexts (Eq. 4-5), the joint ablation, CoRT's with/without-rubric log-probabilities, OPSD's
teacher hidden states, mrtpo-oracle's read-span masks (no forward pass), the old policy's entropy
(forking tokens, GTPO: from the sampling pass where the sampler recorded it), the sampled token
ids (KTAE, no forward pass) and SDPO's self-teacher log-probabilities under every verifier block. Each builder turns a
scored batch into replay jobs (:class:`harness.replay.ReplayJob`), runs them on a
:class:`harness.replay.ReplayEngine` and returns a :class:`ReplayResult` whose tensors go into
:class:`algorithms.RolloutBatch`.

P_all and the old-policy pass. P_all is replayed once per response and its logits are made once
per chunk for all of the response's rewards (:meth:`ReplayEngine.js_many`). When P_all is the
sampling prompt itself (ifollow; CoRT's x+ always), the old policy's pass over the sampled
sequence already happened during sampling: the rollout records the final hidden states that
produced each sampled token (a hook on the final norm, see :mod:`harness.backends.rollout`) and
the builders below use them instead of replaying P_all (tested equal to the replay, float32).
Where they fit the memory budget (``backend.local.sampling_logits_mb``), the sampling logits are kept
too, and the LM head is not applied to P_all again. With one optimiser update per step the
ratio's old log-probabilities are the detached current ones, so the trainer needs no separate
old-log-prob pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from harness.replay import ReplayEngine, ReplayJob
from harness.token_align import Alignment, align, touched
from mrbench_core.replay_kinds import ReplayRequest

#: sequences per replay wave, in engine batches (see :func:`leave_one_out`)
WAVE_BATCHES = 4


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
    token_entropy: Tensor | None = None
    token_ids: Tensor | None = None
    teacher_hidden: list[Tensor] | None = None
    pairs_replayed: int = 0
    pairs_total: int = 0
    sequences: int = 0
    sampling_hidden_used: int = 0  # P_all / x+ passes taken from the sampling pass

    @classmethod
    def nothing_replayed(cls, rewards: Tensor) -> ReplayResult:
        """The result of a step without replay: no statistics, every non-NaN pair counted."""
        return cls(pairs_total=int((~torch.isnan(rewards)).sum()))

    def to_batch(self, rewards: Tensor, group_ids: Tensor, response_mask: Tensor, step: int,
                 reward_low: Tensor | None = None, reward_names: tuple[str, ...] | None = None,
                 total_steps: int | None = None) -> Any:
        """The step's :class:`algorithms.RolloutBatch`: the scored batch plus this replay's statistics
        (the one place both backends build it)."""
        from algorithms import RolloutBatch

        return RolloutBatch(rewards=rewards, group_ids=group_ids, response_mask=response_mask, step=step,
                            relevance=self.relevance, joint_relevance=self.joint_relevance,
                            logprob_delta=self.logprob_delta, reward_low=reward_low, reward_names=reward_names,
                            total_steps=total_steps, token_entropy=self.token_entropy, token_ids=self.token_ids)


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


def _per_response(tokenizer: Any, rewards: Tensor, group_ids: Tensor, T: int
                  ) -> tuple[Tensor, Tensor, _Tokens, int]:
    """For builders with one statistic per response: the NaN-filled [B, T] output, which rewards
    vary in their group, a token memo and the number of (response, reward) pairs."""
    from algorithms.base import rewards_varying_in_group

    out = torch.full((rewards.shape[0], T), float("nan"))
    return out, rewards_varying_in_group(rewards, group_ids), _Tokens(tokenizer), int((~torch.isnan(rewards)).sum())


def _varying_responses(rollouts: Sequence[Any], members: Sequence[int], varying: Tensor):
    """(index, rollout) of a group's non-empty responses with some reward varying in the group
    (elsewhere every advantage is 0 and nothing needs replaying)."""
    for j in members:
        if bool(varying[j].any()) and rollouts[j].response_ids:
            yield j, rollouts[j]


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
    out, varying, tokens, total = _per_response(tokenizer, rewards, group_ids, T)
    res = ReplayResult(joint_relevance=out, pairs_total=total)
    for members in _groups(rollouts).values():
        plan = []
        for j, r in _varying_responses(rollouts, members, varying):
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
    out, varying, tokens, total = _per_response(tokenizer, rewards, group_ids, T)
    res = ReplayResult(logprob_delta=out, pairs_total=total)
    for members in _groups(rollouts).values():
        plan = []
        for j, r in _varying_responses(rollouts, members, varying):
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


def read_span_mask(alignment: Alignment, spans: Sequence[Sequence[int]], T: int) -> Tensor | None:
    """One verifier's read mask over a response's tokens (``alignment``: the response's
    :func:`harness.token_align.align`): 1.0 on the tokens its character ``spans`` touch (the tokens
    the credit page outlines, :func:`harness.token_align.touched`), 0.0 on the others, NaN past the
    response; None (uniform credit) when it reports no span, touches no token, or touches every
    token that writes text (it read the whole response)."""
    if not spans or not len(alignment):
        return None
    flags = touched(alignment, spans)
    writes = [s < e for s, e in alignment.reach]
    if not any(flags) or all(f for f, w in zip(flags, writes) if w):
        return None
    out = torch.full((T,), float("nan"))
    out[:len(flags)] = torch.tensor(flags, dtype=torch.float32)
    return out


def read_spans(engine: ReplayEngine | None, task: Any, tokenizer: Any, rollouts: Sequence[Any], rewards: Tensor,
               group_ids: Tensor, T: int) -> ReplayResult:
    """mrtpo-oracle: relevance[B,K,T] = the tokens each verifier reports it read, as 0/1 masks built
    from the verdicts' character spans; no forward pass (``engine`` is not used and may be None).
    Only pairs whose reward varies in its group are filled (others have zero advantage); a pair
    whose verifier reports no span or reads the whole response stays NaN (uniform weight). A pair
    with a mask counts as replayed. Each response is aligned with its text once."""
    from algorithms.base import rewards_varying_in_group

    B, K = rewards.shape
    rel = torch.full((B, K, T), float("nan"))
    varying = rewards_varying_in_group(rewards, group_ids)
    res = ReplayResult(relevance=rel, pairs_total=int((~torch.isnan(rewards)).sum()))
    for j, r in enumerate(rollouts):
        ks = [k for k in range(min(K, len(r.verdicts))) if bool(varying[j, k]) and r.verdicts[k].spans]
        if not ks or not r.response_ids:
            continue
        alignment = align(tokenizer, r.response_ids, r.text)
        for k in ks:
            mask = read_span_mask(alignment, r.verdicts[k].spans, T)
            if mask is not None:
                rel[j, k] = mask
                res.pairs_replayed += 1
    return res


def feedback(engine: ReplayEngine, task: Any, tokenizer: Any, rollouts: Sequence[Any], rewards: Tensor,
             group_ids: Tensor, T: int) -> ReplayResult:
    """SDPO: logprob_delta[B,T] = log pi(y_t | P_all) - log pi(y_t | P_0), the old policy with every
    verifier block of the response (the task's Eq. 4 context, SDPO's self-teacher) against the
    sampling prompt (the student; its pass is the sampler's where it was kept). Every response with
    tokens gets it, whether or not its group's rewards vary (SDPO's signal needs no group); one whose
    blocks add nothing to its prompt gets 0 without a pass. The pairs counted as replayed are every
    non-NaN pair of the responses with a delta."""
    B = len(rollouts)
    out = torch.full((B, T), float("nan"))
    tokens = _Tokens(tokenizer)
    res = ReplayResult(logprob_delta=out, pairs_total=int((~torch.isnan(rewards)).sum()))
    for members in _groups(rollouts).values():
        plan = []
        for j in members:
            r = rollouts[j]
            if not r.response_ids:
                continue
            teacher, resp = tokens(task.replay_contexts(r.example, r.verdicts, []).all), tuple(r.response_ids)
            if teacher == tuple(r.prompt_ids):
                out[j, :len(resp)] = 0.0
                continue
            plan.append((j, ReplayJob(teacher, resp), ReplayJob(tuple(r.prompt_ids), resp)))
        known, logits = _sampling_pass(rollouts, [(j, s) for j, _, s in plan])
        jobs = [job for _, t, s in plan for job in (t, s) if job not in known]
        hidden = {**known, **engine.run(jobs)}
        res.sequences += len(set(jobs))
        res.sampling_hidden_used += len(known)
        for j, t, s in plan:
            out[j, :len(t.response)] = (engine.logprobs(hidden[t], t.response)
                                        - engine.logprobs(hidden[s], s.response, logits.get(s))).cpu()
    res.pairs_replayed = int((~torch.isnan(rewards) & torch.isfinite(out).any(dim=1, keepdim=True)).sum())
    return res


def entropy(engine: ReplayEngine | None, task: Any, tokenizer: Any, rollouts: Sequence[Any], rewards: Tensor,
            group_ids: Tensor, T: int) -> ReplayResult:
    """Forking tokens, GTPO: token_entropy[B,T], the old policy's entropy at every response token. A
    response whose sampler recorded it (``Rollout.entropy``, from the logits the sampling pass already
    made) takes it as it is; the others of groups where some reward varies (elsewhere every
    advantage is 0) get one forward pass of ``engine`` over prompt + response (its LM head alone
    where the sampling pass's hidden states were kept). The pairs counted as replayed are the varying
    pairs of the responses with entropy."""
    out, varying, _, total = _per_response(tokenizer, rewards, group_ids, T)
    res = ReplayResult(token_entropy=out, pairs_total=total)
    need: list[tuple[int, ReplayJob]] = []
    for j, r in enumerate(rollouts):
        kept = getattr(r, "entropy", None)
        if kept is not None and kept.shape[0] == len(r.response_ids):
            out[j, :kept.shape[0]] = kept.to(torch.float32).cpu()
        elif bool(varying[j].any()) and r.response_ids:
            need.append((j, ReplayJob(tuple(r.prompt_ids), tuple(r.response_ids))))
    if need:
        if engine is None:
            raise ValueError(f"{len(need)} response(s) came without the sampler's entropy and no replay engine "
                             f"was given to compute it")
        known, logits = _sampling_pass(rollouts, need)
        jobs = [job for _, job in need if job not in known]
        hidden = {**known, **engine.run(jobs)}
        res.sequences += len(set(jobs))
        for j, job in need:
            out[j, :len(job.response)] = engine.entropy(hidden[job], logits.get(job)).cpu()
    res.pairs_replayed = int((varying & torch.isfinite(out).any(dim=1, keepdim=True)).sum())
    return res


def token_ids(engine: ReplayEngine | None, task: Any, tokenizer: Any, rollouts: Sequence[Any], rewards: Tensor,
              group_ids: Tensor, T: int) -> ReplayResult:
    """KTAE: token_ids[B,T], the sampled ids (0 past each response); no forward pass (``engine`` is
    not used). The pairs counted as replayed are the varying ones."""
    from algorithms.base import rewards_varying_in_group

    ids = torch.zeros(len(rollouts), T, dtype=torch.long)
    for j, r in enumerate(rollouts):
        if r.response_ids:
            ids[j, :len(r.response_ids)] = torch.tensor(r.response_ids, dtype=torch.long)
    return ReplayResult(token_ids=ids, pairs_total=int((~torch.isnan(rewards)).sum()),
                        pairs_replayed=int(rewards_varying_in_group(rewards, group_ids).sum()))


BUILDERS = {ReplayRequest.LEAVE_ONE_OUT: leave_one_out, ReplayRequest.JOINT: joint,
            ReplayRequest.RUBRIC: rubric, ReplayRequest.TEACHER: teacher, ReplayRequest.READ_SPANS: read_spans,
            ReplayRequest.ENTROPY: entropy, ReplayRequest.TOKEN_IDS: token_ids, ReplayRequest.FEEDBACK: feedback}


def replay_for(request: ReplayRequest | str, engine: ReplayEngine, task: Any, tokenizer: Any,
               rollouts: Sequence[Any], rewards: Tensor, group_ids: Tensor, T: int) -> ReplayResult:
    """Run the builder of the algorithm's replay kind (``none`` gives an empty result)."""
    kind = ReplayRequest(request)
    if kind is ReplayRequest.NONE:
        return ReplayResult.nothing_replayed(rewards)
    return BUILDERS[kind](engine, task, tokenizer, rollouts, rewards, group_ids, T)
