"""SDPO with the verifier blocks as its feedback: the advantage by hand, the feedback replay against a
brute-force forward pass, the task that refuses it, and a run on the tiny model."""

from __future__ import annotations

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import ToyTask, tiny_config, train_run

from algorithms import RolloutBatch, get_algorithm
from harness.backends.rollout import rollouts_for
from harness.config import ReplayConfig, SamplingConfig, resolve
from harness.models import chat_prompt_ids, eos_ids, load_model
from harness.preflight import PreflightError, preflight
from harness.replay import ReplayEngine
from harness.replay_builders import replay_for
from harness.training.batch import batch_tensors

NAN = float("nan")


def test_the_advantage_is_the_teacher_student_log_ratio_by_hand():
    delta = torch.tensor([[0.5, -2.0, NAN, 7.0], [3.0, 1.0, 0.0, 0.0]])
    batch = RolloutBatch(torch.tensor([[1.0], [0.0]]), torch.tensor([0, 0]),
                         torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]).bool(), logprob_delta=delta)
    assert get_algorithm("sdpo").token_advantages(batch).tolist() == [[0.5, -2.0, 0.0, 0.0], [3.0, 1.0, 0.0, 0.0]]
    assert get_algorithm("sdpo", clip=1.0).token_advantages(batch).tolist() == [[0.5, -1.0, 0.0, 0.0],
                                                                                 [1.0, 1.0, 0.0, 0.0]]
    with pytest.raises(ValueError, match="logprob_delta.*feedback replay"):
        get_algorithm("sdpo").token_advantages(RolloutBatch(batch.rewards, batch.group_ids, batch.response_mask))


@pytest.mark.usefixtures("one_torch_thread")
def test_the_feedback_replay_is_the_teacher_given_every_block_against_the_prompt():
    loaded = load_model("tiny-random", dtype="float32")
    model, tok = loaded.model, loaded.tokenizer
    task = ToyTask()
    torch.manual_seed(0)
    rollouts = rollouts_for(model, tok, task.load()[:2], 4, eos_ids(tok, model),
                            SamplingConfig(max_new_tokens=10, temperature=0.8), keep_hidden=True)
    for r in rollouts:
        r.verdicts = task.score(r.example, r.text)
    rewards, group_ids, mask, T = batch_tensors(rollouts)
    engine = ReplayEngine.from_config(model, ReplayConfig(), tok.pad_token_id, 0.8)
    rep = replay_for("feedback", engine, task, tok, rollouts, rewards, group_ids, T)
    assert rep.sampling_hidden_used == len(rollouts)  # the student's pass is the sampler's
    assert rep.sequences == len(rollouts) and bool(torch.isfinite(rep.logprob_delta[mask]).all())

    def logprobs(context: list[int], response: list[int]) -> torch.Tensor:
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([context + response])).logits[0].float() / 0.8
        rows = torch.log_softmax(logits[len(context) - 1:len(context) - 1 + len(response)], -1)
        return rows.gather(1, torch.tensor(response).unsqueeze(1))[:, 0]

    for j in (0, 5):
        r = rollouts[j]
        teacher = chat_prompt_ids(tok, task.replay_contexts(r.example, r.verdicts, []).all)
        assert teacher != r.prompt_ids  # the blocks are feedback the prompt does not hold
        expected = logprobs(teacher, r.response_ids) - logprobs(r.prompt_ids, r.response_ids)
        torch.testing.assert_close(rep.logprob_delta[j, :len(r.response_ids)], expected, atol=1e-4, rtol=1e-4)


def test_instruction_following_refuses_sdpo_before_anything_loads():
    with pytest.raises(PreflightError, match="sdpo needs verifier feedback beyond its prompt"):
        preflight(resolve(None, [("algo", "sdpo"), ("task", "ifollow")]), environment=False)
    preflight(resolve(None, [("algo", "sdpo"), ("task", "toolcall")]), environment=False)


@pytest.mark.usefixtures("one_torch_thread")
def test_sdpo_trains_on_the_tiny_model(tmp_path):
    _, rec, summary = train_run(tiny_config(str(tmp_path), algo="sdpo", steps=2), finish=True)
    rows = rec.metrics()
    assert [r["step"] for r in rows] == [1, 2]
    assert all(r["replay_sequences"] > 0 and r["algo/adv_abs_mean"] > 0 for r in rows)
    assert summary["token_credit"].startswith("not measured")  # one teacher: no per-reward split
