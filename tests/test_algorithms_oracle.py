"""mrtpo-oracle: MRTPO's reallocation onto the tokens each verifier reports it read.

Hand-computed weights on a known read span, beta = 0 = GDPO (and its composites = their
reweighter), the read-span masks built from verdict spans without a forward pass (a character
tokenizer makes the alignment exact), and a tiny-model run on ifollow through ``mrbench run``."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from algorithms import RolloutBatch, get_algorithm, list_algorithms
from algorithms.base import broadcast_to_tokens
from harness.replay_builders import read_span_mask, read_spans, replay_for
from harness.token_align import align
from mrbench_core.replay_kinds import ReplayRequest
from tasks.base import Verdict

NAN = float("nan")


def hand_batch() -> RolloutBatch:
    """One group of two 4-token responses, two rewards (1 vs 0 each). Reward 0 was read on tokens 1-2
    of response 0 and token 3 of response 1; reward 1 was read whole (NaN: uniform)."""
    rel = torch.full((2, 2, 4), NAN)
    rel[0, 0] = torch.tensor([0.0, 1.0, 1.0, 0.0])
    rel[1, 0] = torch.tensor([0.0, 0.0, 0.0, 1.0])
    return RolloutBatch(rewards=torch.tensor([[1.0, 1.0], [0.0, 0.0]]), group_ids=torch.tensor([0, 0]),
                        response_mask=torch.ones(2, 4, dtype=torch.bool), relevance=rel, step=0)


def test_the_extra_weight_lands_on_the_read_tokens_only():
    batch = hand_batch()
    algo = get_algorithm("mrtpo-oracle", beta=0.5, warmup_steps=0)
    adv = algo.token_advantages(batch)
    gdpo = get_algorithm("gdpo")
    U = gdpo.response_advantages(batch)
    agg = gdpo.aggregate(batch)
    _, _, scale = gdpo.rescaled(agg, batch.response_mask)
    a = agg.contributions[:, 0] / scale  # reward 0's part of each response's advantage
    # w = 0.5 + 0.5 q / mean(q): response 0 reads 2 of 4 tokens (w 1.5 / 0.5), response 1 one of 4 (2.5 / 0.5);
    # reward 1 keeps w = 1, so only reward 0's share moves. The bound does not bite here (s = 1).
    w0 = torch.tensor([[0.5, 1.5, 1.5, 0.5], [0.5, 0.5, 0.5, 2.5]])
    expected = U.unsqueeze(1) + a.unsqueeze(1) * (w0 - 1.0)
    torch.testing.assert_close(adv, expected, rtol=1e-6, atol=1e-6)
    moved = adv - U.unsqueeze(1)
    read = batch.relevance[:, 0] == 1
    # every gain (in the direction of reward 0's advantage) is on a read token; unread tokens only give
    assert bool((moved * a.sign().unsqueeze(1) > 0).eq(read).all())
    torch.testing.assert_close(adv.mean(1), U)  # each response keeps its mean advantage


@pytest.mark.parametrize("name,base", [("mrtpo-oracle", "gdpo"), ("mrtpo-oracle+saw", "saw"),
                                       ("mrtpo-oracle+gd2po", "gd2po")])
def test_beta_zero_is_the_aggregator_exactly(name, base):
    batch = hand_batch()
    got = get_algorithm(name, beta=0.0).token_advantages(batch)
    ref = get_algorithm(base)
    assert torch.equal(got, broadcast_to_tokens(ref.response_advantages(batch), batch.response_mask))


def test_it_needs_no_replay_and_composes_like_mrtpo():
    names = list_algorithms()
    assert "mrtpo-oracle" in names
    assert {n.split("+", 1)[1] for n in names if n.startswith("mrtpo-oracle+")} == \
        {n.split("+", 1)[1] for n in names if n.startswith("mrtpo+")}
    for name in ("mrtpo-oracle", "mrtpo-oracle+saw"):
        algo = get_algorithm(name, beta=0.3, rescale="verl") if name.endswith("saw") else get_algorithm(name)
        assert algo.replay_request is ReplayRequest.READ_SPANS and algo.name == name
    assert get_algorithm("mrtpo-oracle+saw").aggregator.name == "saw"
    with pytest.raises(ValueError, match="read_spans"):
        get_algorithm("mrtpo-oracle", warmup_steps=0).token_advantages(
            RolloutBatch(hand_batch().rewards, hand_batch().group_ids, hand_batch().response_mask))


# -- the read-span masks --------------------------------------------------------------------------


class CharTokenizer:
    """One token per character (id = code point); id 0 is the end of turn, decoded as nothing."""

    all_special_ids = (0,)

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i != 0)

    def encode(self, text):
        return [ord(c) for c in text]


TOK = CharTokenizer()


@pytest.mark.parametrize("text,spans,expected", [
    ("ab cd", [(3, 5)], [0, 0, 0, 1, 1, 0]),  # the last token is the end of turn: never read
    ("ab cd", [(0, 1), (4, 5)], [1, 0, 0, 0, 1, 0]),
    ("ab cd", [(2, 2)], [0, 0, 1, 0, 0, 0]),  # an insertion point reads the token holding it
    ("ab cd", [(0, 5)], None),  # the whole response: uniform
    ("ab cd", [(0, 2), (2, 5)], None),
    ("ab cd", [], None),  # no span reported: uniform
    ("ab cd", [(7, 9)], None),  # a span past the text touches nothing: uniform
])
def test_read_span_mask(text, spans, expected):
    ids = TOK.encode(text) + [0]
    got = read_span_mask(align(TOK, ids, text), spans, T=8)
    if expected is None:
        assert got is None
    else:
        assert got[:6].tolist() == expected and bool(torch.isnan(got[6:]).all())


def _rollout(group, text, verdicts):
    return SimpleNamespace(group=group, response_ids=TOK.encode(text) + [0], text=text, verdicts=verdicts,
                           prompt_ids=[1, 2])


def test_read_spans_fills_varying_pairs_without_an_engine():
    rollouts = [_rollout(0, "yes no", [Verdict("a", 1.0, "", spans=[(0, 3)]), Verdict("b", 1.0, "", spans=[(4, 6)])]),
                _rollout(0, "nope", [Verdict("a", 0.0, "", spans=[(0, 4)]), Verdict("b", 1.0, "", spans=[(0, 2)])]),
                _rollout(1, "x", [Verdict("a", 1.0, "", spans=[(0, 1)])])]
    rewards = torch.tensor([[1.0, 1.0], [0.0, 1.0], [1.0, NAN]])
    group_ids = torch.tensor([0, 0, 1])
    res = replay_for("read_spans", None, None, TOK, rollouts, rewards, group_ids, 8)
    assert res.pairs_total == 5 and res.pairs_replayed == 1 and res.sequences == 0
    assert res.relevance[0, 0, :7].tolist() == [1, 1, 1, 0, 0, 0, 0]
    # reward b does not vary in group 0, reward a is read whole on response 1, group 1 has one response
    assert bool(torch.isnan(res.relevance[0, 1]).all() and torch.isnan(res.relevance[1:]).all())
    again = read_spans(None, None, TOK, rollouts, rewards, group_ids, 8)  # the builder itself, deterministic
    assert torch.equal(again.relevance.nan_to_num(-1), res.relevance.nan_to_num(-1))


# -- a tiny run on the real ifollow task ----------------------------------------------------------


def test_a_tiny_mrtpo_oracle_run_on_ifollow_finishes(tmp_path, capsys):
    from harness import cli
    from harness.records import load_record

    args = ["run", "--model", "tiny-random", "--algo", "mrtpo-oracle", "--output.root", str(tmp_path),
            "--schedule.steps", "2", "--sampling.prompts_per_step", "1", "--sampling.group_size", "4",
            "--sampling.max_new_tokens", "12", "--schedule.eval_limit", "2", "--schedule.eval_max_new_tokens", "8",
            "--algo.warmup_steps", "0"]
    assert cli.main(args) == 0
    rec = load_record(tmp_path / "ifollow" / "mrtpo-oracle" / "tiny-random" / "seed0")
    assert rec["provenance"]["status"] == "finished"
    rows = rec["metrics"]
    assert [m["step"] for m in rows] == [1, 2]
    assert all(m["replay_sequences"] == 0 for m in rows)  # masks, no forward pass
    assert all(0.0 <= m["replay_share"] <= 1.0 for m in rows)
    json.dumps(rec["metrics"])


def test_a_local_run_credits_exactly_the_tokens_the_credit_page_outlines(tmp_path):
    from toy_task import tiny_config, train_run

    from harness.token_align import from_ranges
    from harness.training import credit_store

    torch.set_num_threads(1)
    cfg = tiny_config(str(tmp_path / "r"), "mrtpo-oracle", steps=3)
    cfg.algo.params.update(warmup_steps=0, beta=0.5)
    cfg.output.credit_groups = 3
    rec = train_run(cfg)[1]
    masked = 0
    for row in credit_store.read_rows(rec.path):
        n = len(row["tokens"])
        for entry in row["rewards"]:
            if entry["q"] is None:
                continue
            masked += 1
            read = from_ranges(entry["read"], n)
            assert [float(f) for f in read] == entry["q"]  # q is the outline itself
            assert all((w > 1.0) == f for w, f in zip(entry["w"], read))  # the extra weight only on read tokens
            assert all(w == pytest.approx(0.5, abs=1e-3) for w, f in zip(entry["w"], read) if not f)
    assert masked > 0
    assert all(m["replay_sequences"] == 0 for m in rec.metrics())
