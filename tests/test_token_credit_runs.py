"""The token-credit methods' signals as the step supplies them, a run of each on the tiny model, and
the run summary's line on how the credit differed from uniform.

The entropy comes from the logits the sampling pass already makes (no forward pass of its own); a
rollout without it (vLLM samples) gets one forward pass of the old policy, which gives the same
values. Token ids need no pass at all."""

from __future__ import annotations

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import ToyTask, tiny_config, train_run

from harness.backends.rollout import rollouts_for, sample
from harness.config import ReplayConfig, SamplingConfig
from harness.models import eos_ids, load_model
from harness.replay import ReplayEngine
from harness.replay_builders import replay_for
from harness.training.batch import batch_tensors
from harness.training.engine import StepPlan
from harness.training.step_metrics import token_credit_line
from mrbench_core.replay_kinds import ReplayRequest

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NEW = ["forking", "forking-summed", "gtpo", "gtpo-summed", "ktae", "ktae-summed"]


@pytest.fixture(scope="module")
def tiny():
    loaded = load_model("tiny-random", dtype="float32")
    return loaded.model, loaded.tokenizer, eos_ids(loaded.tokenizer, loaded.model)


def _scored(tiny, keep_entropy: bool, seed: int = 0):
    model, tok, eos = tiny
    task = ToyTask()
    torch.manual_seed(seed)
    rollouts = rollouts_for(model, tok, task.load()[:2], 4, eos, SamplingConfig(max_new_tokens=12, temperature=0.8),
                            keep_entropy=keep_entropy)
    for r in rollouts:
        r.verdicts = task.score(r.example, r.text)
    return task, rollouts


def test_the_plan_asks_the_sampler_for_the_entropy_only_when_the_replay_needs_it():
    assert StepPlan(0, ReplayRequest.ENTROPY, True).sampling_entropy
    assert not StepPlan(0, ReplayRequest.ENTROPY, False).sampling_entropy
    assert not StepPlan(0, ReplayRequest.LEAVE_ONE_OUT, True).sampling_entropy


def test_the_sampling_pass_entropy_equals_a_forward_pass(tiny):
    model, tok, _ = tiny
    task, rollouts = _scored(tiny, keep_entropy=True)
    assert all(r.entropy is not None and r.entropy.shape == (len(r.response_ids),) for r in rollouts)
    rewards, group_ids, mask, T = batch_tensors(rollouts)
    engine = ReplayEngine.from_config(model, ReplayConfig(), tok.pad_token_id, 0.8)
    kept = replay_for("entropy", engine, task, tok, rollouts, rewards, group_ids, T)
    assert kept.sequences == 0 and bool(torch.isfinite(kept.token_entropy[mask]).all())
    for r in rollouts:
        r.entropy = None  # as vLLM samples them: the replay computes it
    again = replay_for("entropy", engine, task, tok, rollouts, rewards, group_ids, T)
    rows = torch.isfinite(again.token_entropy).any(dim=1)
    assert again.sequences == int(rows.sum()) > 0
    valid = mask & rows.unsqueeze(1)
    torch.testing.assert_close(again.token_entropy[valid], kept.token_entropy[valid], atol=1e-4, rtol=1e-4)
    ids = replay_for("token_ids", None, task, tok, rollouts, rewards, group_ids, T)
    assert ids.sequences == 0 and ids.token_ids[0, :len(rollouts[0].response_ids)].tolist() == rollouts[0].response_ids


def test_greedy_decoding_records_no_entropy(tiny):
    model, tok, eos = tiny
    out: list[torch.Tensor] = []
    sample(model, tok, [[1, 2, 3]], eos, max_new_tokens=4, greedy=True, entropy_out=out)
    assert out == []


@pytest.mark.parametrize("algo", NEW)
def test_each_method_trains_on_the_tiny_model(tmp_path, algo):
    _, rec, summary = train_run(tiny_config(str(tmp_path), algo=algo, steps=2), finish=True)
    rows = rec.metrics()
    assert [r["step"] for r in rows] == [1, 2] and all(r["replay_pairs"] > 0 for r in rows)
    assert all(r["replay_sequences"] == 0 for r in rows)  # the sampler's entropy, or the ids: no forward pass
    assert any(r["adv_abs_mean"] > 0 for r in rows)
    if algo == "ktae-summed":  # no per-reward split: nothing says where its credit went
        assert summary["token_credit"].startswith("not measured")
    else:
        assert any(k.endswith("/read_mass") for r in rows for k in r), algo
        assert summary["token_credit"].startswith("credit on the tokens the verifiers read: ")


def test_the_summary_line_is_the_ratio_of_the_logged_shares():
    rows = [{"credit/format/read_mass": 0.30, "credit/format/read_tokens": 0.10, "credit/letter/read_mass": 0.5},
            {"credit/format/read_mass": 0.10, "credit/format/read_tokens": 0.10}]
    assert token_credit_line(rows) == ("credit on the tokens the verifiers read: 2.00x uniform (GDPO: 1.0), "
                                       "mean over 2 (step, reward) entries")
    assert token_credit_line([{"reward_mean": 0.5}]).startswith("not measured: no step logged credit/<r>/read_mass")
