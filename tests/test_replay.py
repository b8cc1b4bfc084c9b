"""The replay engine on the tiny random model: prefix sharing and batching change nothing but speed."""

from __future__ import annotations

import math

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import ToyTask

from harness.models import chat_prompt_ids, load_model
from harness.replay import (
    ReplayEngine,
    ReplayJob,
    common_prefix_length,
    full_context_hidden,
    full_logits_js,
    length_batches,
    stat_chunk_positions,
)
from harness.replay_builders import leave_one_out, replay_for
from harness.training.batch import Rollout
from tasks.base import Verdict
from tasks.data_source import load_examples

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def tiny():
    return load_model("tiny-random", dtype="float32")


def _contexts(tok):
    base = "Write a poem. Rule A: use commas. Rule B: end with 'bye'. Rule C: all lowercase."
    variants = [base, base.replace(" Rule B: end with 'bye'.", ""), base.replace(" Rule A: use commas.", ""),
                base + " Rule D: be brief."]
    return [tuple(chat_prompt_ids(tok, [{"role": "user", "content": v}])) for v in variants]


def _responses(n_tokens=(1, 5, 17, 30), seed=0):
    g = torch.Generator().manual_seed(seed)
    return [tuple(torch.randint(0, 256, (n,), generator=g).tolist()) for n in n_tokens]


@pytest.mark.parametrize("batch_size,share_prefix,chunk", [(1, True, 1), (3, True, 4), (16, True, 64),
                                                           (3, False, 7)])
def test_prefix_shared_batched_replay_equals_brute_force(tiny, batch_size, share_prefix, chunk):
    ctxs, resps = _contexts(tiny.tokenizer), _responses()
    jobs = [ReplayJob(c, r) for c in ctxs for r in resps]
    engine = ReplayEngine(tiny.model, batch_size=batch_size, chunk_size=chunk, share_prefix=share_prefix)
    hidden = engine.run(jobs)
    worst, checked = 0.0, 0
    for r in resps:
        a = ReplayJob(ctxs[0], r)
        for c in ctxs[1:]:
            b = ReplayJob(c, r)
            q = engine.js(hidden[a], hidden[b])
            q_ref = full_logits_js(tiny.model, a, b)
            assert q.shape == (len(r),)
            worst = max(worst, float((q - q_ref).abs().max()))
            checked += len(r)
    print(f"batch={batch_size} share_prefix={share_prefix} chunk={chunk}: {checked} positions, "
          f"max |q - q_brute| = {worst:.2e}")
    assert worst <= 1e-5
    # the contexts do change the predictions (otherwise the test would be vacuous)
    q = engine.js(hidden[ReplayJob(ctxs[0], resps[-1])], hidden[ReplayJob(ctxs[1], resps[-1])])
    assert float(q.max()) > 0.01


def test_hidden_states_match_full_pass_and_prefix_is_computed_once(tiny):
    ctxs, resps = _contexts(tiny.tokenizer), _responses((4, 9))
    jobs = [ReplayJob(c, r) for c in ctxs for r in resps] * 2  # duplicates are computed once
    engine = ReplayEngine(tiny.model, batch_size=4, share_prefix=True)
    hidden = engine.run(jobs)
    assert len(hidden) == len(ctxs) * len(resps)
    for job, h in hidden.items():
        assert torch.allclose(h, full_context_hidden(tiny.model, job), atol=1e-5)
    # group prefix once, each context's remainder once (all but its last token), then per job
    # only [last context token] + response[:-1] (the inputs that predict the response tokens)
    prefix = common_prefix_length(ctxs)
    expected = prefix + sum(len(c) - 1 - prefix for c in ctxs) + sum(len(r) for _ in ctxs for r in resps)
    naive = sum(len(j.context) + len(j.response) for j in set(jobs))
    assert engine.forward_tokens == expected
    print(f"tokens through the model: {expected} shared vs {naive} naive")
    assert expected < 0.5 * naive


@pytest.mark.parametrize("lengths,size,expected", [
    ([5, 4, 3, 2, 1, 100], 3, [[100], [5, 4, 3], [2, 1]]),  # short rows are not padded to long ones
    ([97] * 7 + [6], 8, [[97] * 7, [6]]),
    ([10, 9, 8, 7], 2, [[10, 9], [8, 7]]),
    ([], 4, []),
])
def test_length_batches(lengths, size, expected):
    assert length_batches(lengths, lambda n: n, size) == expected


def test_identical_contexts_give_zero_relevance(tiny):
    ctx, (resp,) = _contexts(tiny.tokenizer)[0], _responses((12,))
    engine = ReplayEngine(tiny.model)
    h = engine.run([ReplayJob(ctx, resp)])[ReplayJob(ctx, resp)]
    assert torch.equal(engine.js(h, h), torch.zeros(12))


@pytest.mark.parametrize("seqs,expected", [([[1, 2, 3], [1, 2, 4]], 2), ([[1, 2], [1, 2, 3]], 2), ([[5], [6]], 0),
                                           ([[1, 2, 3]], 3), ([], 0)])
def test_common_prefix_length(seqs, expected):
    assert common_prefix_length(seqs) == expected


def _rollouts(tok, task, texts_per_group):
    """Rollouts of the toy task with given response texts (token ids from the byte tokenizer)."""
    examples = load_examples(task)
    out = []
    for g, texts in enumerate(texts_per_group):
        ex = examples[g * 2]  # even ids: three rewards (format, short, letter)
        prompt = chat_prompt_ids(tok, ex.messages)
        for text in texts:
            ids = tok.encode(text, add_special_tokens=False) + [tok.eos_token_id]
            r = Rollout(ex, g, prompt, ids, text, False)
            r.verdicts = task.score(ex, text)
            out.append(r)
    return out


def test_leave_one_out_replays_exactly_the_varying_pairs_with_blocks(tiny):
    task, tok = ToyTask(), tiny.tokenizer
    # group 0: format varies (first char), short varies, letter constant (all have letters)
    # group 1: every reward constant -> nothing replayed
    rollouts = _rollouts(tok, task, [["ab", "\x01xyzuvwabc", "cdefghijk", "\x02z"], ["aaaa", "bbbb", "cccc", "dddd"]])
    rewards = torch.tensor([[v.value for v in r.verdicts] for r in rollouts])
    group_ids = torch.tensor([r.group for r in rollouts])
    T = max(len(r.response_ids) for r in rollouts)
    engine = ReplayEngine(tiny.model, batch_size=3, chunk_size=5)
    res = leave_one_out(engine, task, tok, rollouts, rewards, group_ids, T)
    replayed = ~torch.isnan(res.relevance).all(-1)
    # format (k=0) has a block only when it failed (responses 1 and 3); short (k=1) always has one
    expected = torch.zeros(8, 3, dtype=torch.bool)
    expected[1, 0] = expected[3, 0] = True
    expected[0:4, 1] = True
    assert torch.equal(replayed, expected)
    assert res.pairs_replayed == 6 and res.pairs_total == 24
    for j in range(4):
        n = len(rollouts[j].response_ids)
        for k in range(3):
            if expected[j, k]:
                row = res.relevance[j, k]
                assert not torch.isnan(row[:n]).any() and torch.isnan(row[n:]).all()
                assert float(row[:n].min()) >= 0.0 and float(row[:n].max()) <= 1.0
    # the same pairs by brute force: P_all and P_\k from the task, whole-model logits
    r = rollouts[1]
    ctx = task.replay_contexts(r.example, r.verdicts, [0, 1])
    a = ReplayJob(tuple(chat_prompt_ids(tok, ctx.all)), tuple(r.response_ids))
    b = ReplayJob(tuple(chat_prompt_ids(tok, ctx.without[1])), tuple(r.response_ids))
    assert float((res.relevance[1, 1, :len(r.response_ids)] - full_logits_js(tiny.model, a, b)).abs().max()) <= 1e-5


def test_other_requests_fill_their_statistics(tiny):
    task, tok = ToyTask(), tiny.tokenizer
    rollouts = _rollouts(tok, task, [["ab", "\x01xyzuvwabc", "cdefghijk", "\x02z"]])
    rewards = torch.tensor([[v.value for v in r.verdicts] for r in rollouts])
    group_ids = torch.zeros(4, dtype=torch.long)
    T = max(len(r.response_ids) for r in rollouts)
    engine = ReplayEngine(tiny.model)
    joint = replay_for("joint", engine, task, tok, rollouts, rewards, group_ids, T)
    cort = replay_for("rubric", engine, task, tok, rollouts, rewards, group_ids, T)
    opsd = replay_for("teacher", engine, task, tok, rollouts, rewards, group_ids, T)
    none = replay_for("none", engine, task, tok, rollouts, rewards, group_ids, T)
    for j, r in enumerate(rollouts):
        n = len(r.response_ids)
        assert not torch.isnan(joint.joint_relevance[j, :n]).any()
        assert not torch.isnan(cort.logprob_delta[j, :n]).any()
        assert opsd.teacher_hidden[j].shape == (n, tiny.model.config.hidden_size)
    assert none.relevance is None and none.pairs_replayed == 0 and none.pairs_total == 12
    with pytest.raises(ValueError, match="known: none, leave_one_out"):
        replay_for("bogus", engine, task, tok, rollouts, rewards, group_ids, T)
    assert math.isfinite(float(cort.logprob_delta[0, 0]))


def test_verdict_without_block_is_not_replayed(tiny):
    task, tok = ToyTask(), tiny.tokenizer
    rollouts = _rollouts(tok, task, [["ab", "abcdefghij"]])
    for r in rollouts:  # strip every block: nothing can be replayed
        r.verdicts = [Verdict(v.reward, v.value, v.reason, None) for v in r.verdicts]
    rewards = torch.tensor([[v.value for v in r.verdicts] for r in rollouts])
    res = leave_one_out(ReplayEngine(tiny.model), task, tok, rollouts, rewards, torch.zeros(2, dtype=torch.long),
                        11)
    assert res.pairs_replayed == 0 and torch.isnan(res.relevance).all()


class _RulesInPrompt(ToyTask):
    """Like ifollow: the rules are in the prompt; P_all is the prompt, P_\\k drops rule k."""

    def replay_contexts(self, example, verdicts, rewards):
        from toy_task import RULES

        from tasks.base import ReplayContexts

        def without(k):
            text = example.messages[-1]["content"].replace(" " + RULES[example.reward_names[k]], "")
            return [{"role": "user", "content": text}]

        return ReplayContexts(all=example.messages, without={k: without(k) for k in rewards})


@pytest.mark.parametrize("keep_logits", [False, True])
def test_sampling_hidden_states_stand_in_for_p_all(tiny, keep_logits):
    """When P_all is the sampling prompt, the hidden states (and, within the memory budget, the
    logits) recorded during generation replace the P_all pass: same relevance (fp32, <= 1e-5),
    fewer sequences."""
    from harness.backends.rollout import rollouts_for
    from harness.config import SamplingConfig

    task, tok = _RulesInPrompt(), tiny.tokenizer
    torch.manual_seed(3)
    cost: dict[str, float] = {}
    rollouts = rollouts_for(tiny.model, tok, load_examples(task)[:2], 4, [tok.eos_token_id],
                            SamplingConfig(max_new_tokens=10), keep_hidden=True,
                            logits_budget=(1 << 30) if keep_logits else 0, keep_cost=cost)
    assert cost["seconds"] > 0  # the time spent keeping is measured ...
    plain: dict[str, float] = {}
    rollouts_for(tiny.model, tok, load_examples(task)[:2], 4, [tok.eos_token_id], SamplingConfig(max_new_tokens=10),
                 keep_cost=plain)
    assert plain == {"seconds": 0.0}  # ... and is nothing when nothing is kept
    head = tiny.model.get_output_embeddings()
    for r in rollouts:
        r.verdicts = task.score(r.example, r.text)
        assert r.hidden is not None and r.hidden.shape == (len(r.response_ids), tiny.model.config.hidden_size)
        if keep_logits:  # the sampling distributions are the head's outputs on those hidden states
            assert r.logits is not None and torch.allclose(r.logits, head(r.hidden), atol=1e-5)
        else:
            assert r.logits is None
    rewards = torch.tensor([[v.value for v in r.verdicts] + [float("nan")] * (3 - len(r.verdicts))
                            for r in rollouts])
    group_ids = torch.tensor([r.group for r in rollouts])
    pairs = ~torch.isnan(rewards)  # replay everything
    T = max(len(r.response_ids) for r in rollouts)
    with_hidden = leave_one_out(ReplayEngine(tiny.model), task, tok, rollouts, rewards, group_ids, T, pairs)
    for r in rollouts:
        r.hidden = r.logits = None
    recomputed = leave_one_out(ReplayEngine(tiny.model), task, tok, rollouts, rewards, group_ids, T, pairs)
    both = ~torch.isnan(recomputed.relevance)
    assert torch.equal(both, ~torch.isnan(with_hidden.relevance)) and bool(both.any())
    diff = float((with_hidden.relevance[both] - recomputed.relevance[both]).abs().max())
    print(f"P_all from sampling vs recomputed: max |dq| = {diff:.2e}; sequences {with_hidden.sequences} "
          f"vs {recomputed.sequences}")
    assert diff <= 1e-5
    assert with_hidden.sequences == recomputed.sequences - len(rollouts)


@pytest.mark.parametrize("chunk,vocab,expected", [
    (128, 49_152, 128),    # SmolLM2: the configured chunk
    (128, 98_304, 128),    # the largest vocabulary the configured chunk serves
    (128, 151_936, 82),    # Qwen2.5: capped, so P_all's float32 log p and p stay near 100 MB
    (128, 262_144, 48),
    (16, 151_936, 16),     # a smaller configured chunk is kept
    (128, 50_000_000, 1),  # never zero
])
def test_statistics_chunk_is_capped_by_vocabulary(chunk, vocab, expected):
    assert stat_chunk_positions(chunk, vocab) == expected


def test_exact_batches_reproduce_each_context_replayed_alone_in_bf16(tiny):
    """With contexts of one length per batch, no padding sits between the shared prefix and a
    context's keys, and the bf16 replay of a batch equals each context's replay alone bit for bit
    (the sampling pass's path). On SmolLM2-135M padded batches differ from it by q of about 1e-2
    (bench/relevance_floor.py); the tiny model is too small to show that."""
    import copy

    from harness.attention import use_for_rollout

    model = copy.deepcopy(tiny.model).to(torch.bfloat16).eval()
    use_for_rollout(model, "grouped_matmul")  # the CPU rollout attention
    ctxs, resps = _contexts(tiny.tokenizer), _responses((9, 14))
    jobs = [ReplayJob(c, r) for c in ctxs for r in resps]
    assert len({len(c) for c in ctxs}) > 1  # contexts of several lengths, so padded batches pad
    batched = ReplayEngine(model, batch_size=8, exact_batches=True).run(jobs)
    alone = {j: ReplayEngine(model, batch_size=1).run([j])[j] for j in jobs}
    assert all(torch.equal(batched[j], alone[j]) for j in jobs)


@torch.no_grad()
def _reference_js_many(model, hidden_a, others, head_float32, chunk):
    """The statistics the straightforward way: fresh logits (``linear``) per chunk of positions,
    whole-block log p and p, one Jensen-Shannon distance per pair (``js_many`` at a4ce79c)."""
    from algorithms.relevance import js_distance
    from harness.replay import JS_ROWS

    head = model.get_output_embeddings()

    def logits(h):
        return torch.nn.functional.linear(h.float(), head.weight.float()) if head_float32 else head(h)

    return [torch.cat([js_distance(logits(hidden_a[s:s + chunk]), logits(hb[s:s + chunk]), chunk_size=JS_ROWS)
                       for s in range(0, len(hb), chunk)]) for hb in others]


@pytest.mark.parametrize("head_float32,chunk", [(True, 128), (True, 7), (False, 5)])
def test_js_many_with_reused_buffers_equals_the_straightforward_statistics(tiny, head_float32, chunk):
    """P_all's log p and p made block by block into reused buffers, and the float32 head written
    into a reused buffer, give the same distances bit for bit as whole-block tensors."""
    import copy

    model = copy.deepcopy(tiny.model).to(torch.bfloat16).eval()
    ctxs, resps = _contexts(tiny.tokenizer), _responses((30, 3))
    engine = ReplayEngine(model, batch_size=4, chunk_size=chunk, head_float32=head_float32)
    hidden = engine.run([ReplayJob(c, r) for c in ctxs for r in resps])
    for r in resps:  # the second, shorter response reuses the first one's (larger) buffers
        a, others = hidden[ReplayJob(ctxs[0], r)], [hidden[ReplayJob(c, r)] for c in ctxs[1:]]
        got = engine.js_many(a, others)
        expected = _reference_js_many(model, a, others, head_float32, chunk)
        assert all(torch.equal(g, e) for g, e in zip(got, expected))
        assert max(float(g.max()) for g in got) > 0.01  # the contexts do change the predictions


def test_cache_copy_leaves_the_original_cache_unchanged(tiny):
    from harness.replay import _cache_kwarg, cache_copy, decoder_and_head

    decoder, _, _ = decoder_and_head(tiny.model)
    with torch.no_grad():
        cache = decoder(input_ids=torch.tensor([[1, 2, 3, 4]]), use_cache=True).past_key_values
        before = [(layer.keys.clone(), layer.values.clone()) for layer in cache.layers]
        other = cache_copy(cache)
        assert other.layers[0] is not cache.layers[0] and other.layers[0].keys is cache.layers[0].keys  # no copy
        other.batch_repeat_interleave(2)
        decoder(input_ids=torch.tensor([[5], [6]]), use_cache=True, **{_cache_kwarg(decoder): other})
    assert other.get_seq_length() == 5 and cache.get_seq_length() == 4
    for layer, (k, v) in zip(cache.layers, before):
        assert layer.keys.shape[0] == 1 and torch.equal(layer.keys, k) and torch.equal(layer.values, v)
