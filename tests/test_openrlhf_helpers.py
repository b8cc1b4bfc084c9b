"""The openrlhf backend's pure helpers, without OpenRLHF: the label codec, the frame scatter, the
replay shards and the argument builder."""

from __future__ import annotations

import math

import pytest
import torch

from harness.backends.openrlhf.argv import openrlhf_argv, topology, train_batch_size
from harness.backends.openrlhf.cell import CellPaths
from harness.backends.openrlhf.frame import FrameError, gather_rows, response_columns, scatter_rows, split_sequence
from harness.backends.openrlhf.labels import Label, LabelError, decode_label, encode_label, scalar_reward
from harness.backends.openrlhf.shards import ShardResult, merge_shards, plan_shards
from harness.backends.openrlhf.step import update_stats
from harness.config import resolve
from tasks.base import Example, Verdict

# -- labels --------------------------------------------------------------------------------------------

EXAMPLE = Example(id="ex-1", messages=[{"role": "user", "content": "Say hi — in ünïcode."}],
                  reward_names=["format", "short", "letter"], meta={"db": "a/b.sqlite", "n": 3})


def test_label_round_trip_carries_rewards_blocks_and_nan():
    verdicts = [Verdict("format", 1.0, "ok"), Verdict("short", float("nan"), "n/a", block="Keep it short."),
                Verdict("letter", 0.0, "none", block="Use a letter.", spans=[(0, 3)], detail={"k": [1, 2]})]
    label = Label("toy", {"x": 1}, EXAMPLE, stop=[2, 7], max_new_tokens=12)
    plain = decode_label(encode_label(label))
    assert plain.example == EXAMPLE and plain.stop == [2, 7] and not plain.scored
    scored = decode_label(encode_label(label.with_verdicts(verdicts, "hi", truncated=True, seconds=0.5)))
    assert scored.text == "hi" and scored.truncated is True and scored.score_seconds == 0.5
    values = scored.rewards()
    assert values[0] == 1.0 and math.isnan(values[1]) and values[2] == 0.0
    assert [v.block for v in scored.verdicts] == [None, "Keep it short.", "Use a letter."]
    assert scored.verdicts[2].spans == [(0, 3)] and scored.verdicts[2].detail == {"k": [1, 2]}
    assert scalar_reward(values) == 0.5 and scalar_reward([float("nan")]) == 0.0
    with pytest.raises(LabelError, match="no verdicts"):
        plain.rewards()


@pytest.mark.parametrize("text,message", [
    ("not json", "not JSON"),
    ('{"v": 99}', "version 1"),
    ('"a string"', "version 1"),
    ('{"v": 1, "task": "toy"}', "missing or malformed"),
])
def test_bad_labels_say_what_is_wrong(text, message):
    with pytest.raises(LabelError, match=message):
        decode_label(text)


# -- the frame -------------------------------------------------------------------------------------------

def frame(prompts, responses, pad=0):
    """Right-padded (sequences [b, L], action_mask [b, L-1], attention_mask [b, L]) as OpenRLHF builds them."""
    width = max(len(p) + len(r) for p, r in zip(prompts, responses))
    seqs = torch.full((len(prompts), width), pad)
    action = torch.zeros((len(prompts), width - 1), dtype=torch.long)
    attention = torch.zeros((len(prompts), width), dtype=torch.long)
    for i, (p, r) in enumerate(zip(prompts, responses)):
        seqs[i, :len(p) + len(r)] = torch.tensor(p + r)
        attention[i, :len(p) + len(r)] = 1
        action[i, len(p) - 1:len(p) - 1 + len(r)] = 1
    return seqs, action, attention


PROMPTS = [[1, 2, 3], [4, 5, 6, 7, 8, 9], [10]]
RESPONSES = [[11, 12], [13], [14, 15, 16, 17]]


def test_response_columns_follow_each_prompt_length():
    _, action, _ = frame(PROMPTS, RESPONSES)
    first, length = response_columns(action)
    assert first.tolist() == [2, 5, 0] and length.tolist() == [2, 1, 4]
    empty = torch.zeros((1, 4), dtype=torch.long)
    assert [t.tolist() for t in response_columns(empty)] == [[0], [0]]
    with pytest.raises(FrameError, match="row 0: the response is not one contiguous run"):
        response_columns(torch.tensor([[0, 1, 0, 1]]))


def test_split_sequence_gives_back_prompt_and_response():
    seqs, action, attention = frame(PROMPTS, RESPONSES)
    for i in range(3):
        assert split_sequence(seqs[i], action[i], attention[i]) == (PROMPTS[i], RESPONSES[i])
    seqs, action, attention = frame([[1, 2]], [[]])
    assert split_sequence(seqs[0], action[0], attention[0]) == ([1, 2], [])


@pytest.mark.parametrize("index", [[0, 1, 2], [2, 0, 1]])
def test_scatter_puts_each_samples_tokens_at_its_own_columns(index):
    adv = torch.arange(1, 3 * 5 + 1, dtype=torch.float32).reshape(3, 5)  # [B=3, T=5]
    prompts = [PROMPTS[i] for i in index]
    responses = [RESPONSES[i] for i in index]
    _, action, _ = frame(prompts, responses)
    out = scatter_rows(adv, index, action)
    assert out.shape == action.shape and bool((out[action == 0] == 0).all())
    for r, i in enumerate(index):
        c0, n = len(PROMPTS[i]) - 1, len(RESPONSES[i])
        assert out[r, c0:c0 + n].tolist() == adv[i, :n].tolist()
    mask = torch.zeros(3, 5, dtype=torch.bool)
    for r, i in enumerate(index):
        mask[r, :len(RESPONSES[i])] = True
    assert torch.equal(gather_rows(out, action, 5), adv[index] * mask)


def test_scatter_refuses_a_response_longer_than_the_batch():
    _, action, _ = frame(PROMPTS, RESPONSES)
    with pytest.raises(FrameError, match="T=3"):
        scatter_rows(torch.zeros(3, 3), [0, 1, 2], action)
    with pytest.raises(FrameError, match="2 sample indices for 3 rows"):
        scatter_rows(torch.zeros(3, 5), [0, 1], action)


# -- shards ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("costs,n,expected", [
    ([5, 1, 1, 1], 2, [[0], [1, 2, 3]]),
    ([1, 1, 1], 1, [[0, 1, 2]]),
    ([3, 3], 4, [[0], [1], [], []]),
    ([], 2, [[], []]),
    ([2, 7, 4, 4, 1], 2, [[0, 1], [2, 3, 4]]),  # loads 9 and 9
])
def test_plan_shards_deals_whole_groups_by_cost(costs, n, expected):
    shards = plan_shards(costs, n)
    assert shards == expected
    assert sorted(g for s in shards for g in s) == list(range(len(costs)))


def test_plan_shards_needs_a_shard():
    with pytest.raises(ValueError, match="at least one shard"):
        plan_shards([1], 0)


def test_merge_shards_puts_rows_back_and_rejects_overlap():
    rewards = torch.tensor([[1.0, 0.0], [0.0, float("nan")], [1.0, 1.0], [0.0, 1.0]])
    a = ShardResult(rows=[2, 3], relevance=torch.full((2, 2, 3), 0.5), pairs_replayed=3, sequences=4)
    b = ShardResult(rows=[0, 1], relevance=torch.full((2, 2, 3), 0.25), pairs_replayed=1, sequences=2)
    merged = merge_shards([a, ShardResult(rows=[]), b], rewards, 3)
    assert merged.relevance[:2].eq(0.25).all() and merged.relevance[2:].eq(0.5).all()
    assert merged.pairs_replayed == 4 and merged.sequences == 6 and merged.pairs_total == 7
    assert merged.joint_relevance is None
    with pytest.raises(ValueError, match="same batch row"):
        merge_shards([a, a], rewards, 3)


# -- the argument builder -------------------------------------------------------------------------------------

def _flags(argv):
    out, i = {}, 0
    while i < len(argv):
        values = []
        j = i + 1
        while j < len(argv) and not argv[j].startswith("--"):
            values.append(argv[j])
            j += 1
        out[argv[i]] = values
        i = j
    return out


@pytest.mark.parametrize("recipe,overrides,expect", [
    (None, [], {"--rollout.n_samples_per_prompt": ["8"], "--rollout.batch_size": ["2"], "--train.batch_size": ["16"],
                "--data.max_len": ["4192"], "--algo.kl.init_coef": ["0.0"], "--ckpt.save_steps": ["-1"],
                "--vllm.num_engines": ["1"], "--actor.adam.betas": ["0.9", "0.999"]}),
    ("toolcall-paper", [("model.train_dtype", "bfloat16")],  # the recipe's float32 update: refused on openrlhf
     {"--train.batch_size": ["512"], "--rollout.batch_size": ["512"], "--actor.adam.lr": ["1e-06"],
      "--data.max_len": ["3072"], "--ckpt.save_steps": ["10"], "--ds.param_dtype": ["bf16"]}),
    (None, [("optim.kl_coef", "0.05"), ("schedule.checkpoint_every", "1")],
     {"--algo.kl.use_loss": [], "--algo.kl.estimator": ["k3"], "--ckpt.save_steps": ["1"]}),
    (None, [("backend.openrlhf.gpus_per_node", "4"), ("backend.openrlhf.vllm_tensor_parallel", "2")],
     {"--vllm.num_engines": ["2"], "--vllm.tensor_parallel_size": ["2"], "--actor.num_gpus_per_node": ["4"]}),
    (None, [("backend.openrlhf.colocate", "false")], {"--vllm.num_engines": ["1"]}),
    (None, [("model.lora", "true"), ("backend.openrlhf.extra_args", "[--vllm.enforce_eager]")],
     {"--ds.lora.rank": ["16"], "--ds.lora.alpha": ["32"], "--vllm.enforce_eager": []}),
])
def test_argv_maps_the_run_config(tmp_path, recipe, overrides, expect):
    cfg = resolve(recipe, [("backend", "openrlhf"), *overrides])
    argv = openrlhf_argv(cfg, CellPaths(tmp_path), "/m")
    flags = _flags(argv)
    for flag, values in expect.items():
        assert flags.get(flag) == values, flag
    assert flags["--actor.lr_scheduler"] == ["constant"] and flags["--algo.advantage.estimator"] == ["group_norm"]
    colocated = "--train.colocate_all" in flags
    assert colocated == cfg.backend.openrlhf.colocate
    top = topology(cfg.backend.openrlhf)
    if colocated:  # OpenRLHF's own invariant for colocated engines
        assert top.actors == top.engines * top.engine_tp
    assert ("--algo.kl.use_loss" in flags) == (cfg.optim.kl_coef > 0)
    assert train_batch_size(cfg) * cfg.optim.mini_batches == cfg.sampling.prompts_per_step * cfg.sampling.group_size
    assert flags["--ckpt.path"] == [str(tmp_path / "checkpoint" / "openrlhf")]


def test_a_float32_update_never_reaches_the_command_line(tmp_path):
    cfg = resolve("toolcall-paper", [("backend", "openrlhf")])  # model.train_dtype float32
    with pytest.raises(ValueError, match="bf16 or fp16 only"):
        openrlhf_argv(cfg, CellPaths(tmp_path), "/m")


def test_update_stats_feed_the_local_row_keys():
    stats = update_stats({"policy_loss": 0.3, "kl": 0.02, "ppo_clip_ratio": 0.1, "entropy_loss": 1.5,
                          "actor_grad_norm": 4.0, "generated_samples": ["text", 1.0]})
    assert stats.tokens == 1 and stats.loss == 0.3 and stats.clipped == 0.1 and stats.grad_norm == 4.0
    assert math.isnan(stats.ratio_max) and math.isnan(update_stats({}).grad_norm)
