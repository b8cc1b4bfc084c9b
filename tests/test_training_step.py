"""One training step on one page: the step plan, the batch builder, the typed advantages and the
update object, on the tiny model and the toy task."""

from __future__ import annotations

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import tiny_config, train_run

from algorithms import Advantages, RolloutBatch, get_algorithm
from algorithms.mrtpo import MRTPO
from harness.backends.update import PolicyUpdate, Reference
from harness.config import OptimConfig
from harness.models import load_model
from harness.replay_builders import ReplayResult
from harness.training import credit_store
from harness.training.batch import Rollout
from harness.training.step import plan_step, step_advantages
from mrbench_core.replay_kinds import ReplayRequest
from tasks.base import Example

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _train(cfg):
    return train_run(cfg)[1]


def _counting(monkeypatch, cls, name, counts):
    real = getattr(cls, name)

    def counted(self, *args, **kwargs):
        counts[name] = counts.get(name, 0) + 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, counted)


def test_mrtpo_advantages_are_computed_once_per_step_with_credit_logging(tmp_path, monkeypatch):
    counts: dict[str, int] = {}
    for name in ("compute", "needs_replay"):
        _counting(monkeypatch, MRTPO, name, counts)
    _counting(monkeypatch, ReplayResult, "to_batch", counts)
    cfg = tiny_config(str(tmp_path / "m"), "mrtpo", steps=2)
    assert cfg.output.credit_groups == 1  # the default
    rec = _train(cfg)
    assert counts == {"compute": 2, "needs_replay": 2, "to_batch": 2}
    rows = credit_store.read_rows(rec.path)  # the credit log still has MRTPO's weights, from the step's one call
    assert any(e["w"] is not None for r in rows for e in r["rewards"])


@pytest.mark.parametrize(("algo", "params", "step", "request_", "replay", "teacher"), [
    ("gdpo", {}, 0, ReplayRequest.NONE, False, False),
    ("mrtpo", {}, 0, ReplayRequest.LEAVE_ONE_OUT, False, False),  # warm-up: beta_0 = 0
    ("mrtpo", {}, 3, ReplayRequest.LEAVE_ONE_OUT, True, False),
    ("mrtpo", {"beta": 0.0, "warmup_steps": 0}, 5, ReplayRequest.LEAVE_ONE_OUT, False, False),
    ("cort", {}, 0, ReplayRequest.RUBRIC, False, False),  # lambda_0 = 0
    ("opsd", {}, 0, ReplayRequest.TEACHER, True, True),
])
def test_the_step_plan(algo, params, step, request_, replay, teacher):
    plan = plan_step(get_algorithm(algo, **params), step)
    assert (plan.step, plan.request, plan.replay, plan.teacher) == (step, request_, replay, teacher)
    assert plan.sampling_prompt_replayed == (replay and request_ in (ReplayRequest.LEAVE_ONE_OUT,
                                                                     ReplayRequest.RUBRIC))


def _batch() -> tuple[ReplayResult, torch.Tensor, torch.Tensor, torch.Tensor]:
    rewards = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, float("nan")], [0.0, 0.0]])
    mask = torch.tensor([[True, True, False], [True, True, True], [True, False, False], [True, True, True]])
    q = torch.rand(4, 2, 3)
    return ReplayResult(relevance=q, pairs_replayed=3, pairs_total=7), rewards, torch.tensor([0, 0, 1, 1]), mask


def test_the_batch_builder_carries_the_replay_and_a_skipped_step_has_none():
    rep, rewards, groups, mask = _batch()
    low = torch.tensor([0.0, -1.0])
    batch = rep.to_batch(rewards, groups, mask, 4, low)
    assert isinstance(batch, RolloutBatch) and batch.step == 4
    assert batch.relevance is rep.relevance and batch.reward_low is low and batch.joint_relevance is None
    skipped = ReplayResult.nothing_replayed(rewards)
    assert (skipped.pairs_total, skipped.pairs_replayed, skipped.relevance) == (7, 0, None)


def test_advantages_are_typed_and_carry_mrtpos_per_reward_weights():
    rep, rewards, groups, mask = _batch()
    batch = rep.to_batch(rewards, groups, mask, 0)
    result = get_algorithm("mrtpo", warmup_steps=0).advantages(batch)
    assert isinstance(result, Advantages) and result.reward_weights is not None
    assert result.reward_weights.shape == (4, 2, 3)
    tokens, metrics = result  # unpacks as the earlier (adv, metrics) pair
    assert tokens is result.tokens and "beta_eff" in metrics
    assert get_algorithm("gdpo").advantages(batch).reward_weights is None
    joint = ReplayResult(joint_relevance=torch.rand(4, 3)).to_batch(rewards, groups, mask, 0)
    assert get_algorithm("mrtpo-joint", warmup_steps=0).advantages(joint).reward_weights is None  # one profile


def test_a_plugin_returning_the_earlier_pair_still_works():
    class PairAlgorithm:
        def advantages(self, batch):
            return torch.ones(batch.response_mask.shape, dtype=torch.float64), {"x": 1.0}

    rep, rewards, groups, mask = _batch()
    result = step_advantages(PairAlgorithm(), rep.to_batch(rewards, groups, mask, 0))
    assert result.tokens.dtype == torch.float32 and result.metrics == {"x": 1.0} and result.reward_weights is None


def _rollouts() -> list[Rollout]:
    ex = Example(id="e", messages=[{"role": "user", "content": "hi"}], reward_names=["a"])
    return [Rollout(ex, 0, [5, 6, 7], [40 + i, 41, 42 + i][: 2 + i % 2], "", False) for i in range(4)]


def test_the_update_object_trains_with_what_it_is_given():
    model = load_model("tiny-random", dtype="float32").model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    rollouts = _rollouts()
    adv = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [0.5, 0.5, 0.5], [-0.5, -0.5, -0.5]])
    optim = OptimConfig(lr=1e-2, micro_batch_size=3, kl_coef=0.1)
    with pytest.raises(RuntimeError, match="reference policy"):
        PolicyUpdate(model, optim, 1.0, 0, torch.device("cpu"))(rollouts, adv, 3, get_algorithm("grpo"))
    import copy

    ref = Reference(copy.deepcopy(model).eval().requires_grad_(False))
    update = PolicyUpdate(model, optim, 1.0, 0, torch.device("cpu"), reference=ref)
    stats = update(rollouts, adv, 3, get_algorithm("grpo"))
    assert stats.tokens == sum(len(r.response_ids) for r in rollouts) and stats.grad_norm > 0
    assert stats.kl == pytest.approx(0.0, abs=1e-6)  # the reference equals the policy before the update
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert update.optimizer.state  # the object owns the optimiser the checkpoint saves


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_at_the_valid_tokens_equal_the_full_log_softmax(temperature):
    from harness.backends.loss import entropy, gather_logprobs, make_micro_batch, response_logits, response_logprobs

    model = load_model("tiny-random", dtype="float32").model
    mb = make_micro_batch([[5, 6, 7], [8, 9]], [[40, 41, 42, 43], [44, 45]], 5, 0, torch.device("cpu"))
    with torch.no_grad():
        logits = response_logits(model, mb, temperature)
        logp, ent = response_logprobs(model, mb, temperature, with_entropy=True)
    m = mb.response_mask
    assert torch.allclose(logp[m], gather_logprobs(logits, mb.response_ids)[m], atol=1e-5)
    assert torch.allclose(ent[m], entropy(logits)[m], atol=1e-4)
    assert bool((logp[~m] == 0).all()) and bool((ent[~m] == 0).all())


def test_a_checkpoint_round_trips_without_crc_and_leaves_torchs_setting_alone(tmp_path):
    from torch.utils.serialization import config

    from harness.backends import checkpoint

    model = load_model("tiny-random", dtype="float32").model
    update = PolicyUpdate(model, OptimConfig(lr=1e-3), 1.0, 0, torch.device("cpu"))
    update(_rollouts(), torch.ones(4, 3), 3, get_algorithm("grpo"))
    before = config.save.compute_crc32
    checkpoint.save(tmp_path, step=1, model=model, optimizer=update.optimizer, data_position=2, fingerprint="f")
    assert config.save.compute_crc32 == before
    state = checkpoint.load(tmp_path)
    assert state["step"] == 1 and state["data_position"] == 2
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in state["model"].items())
    assert state["optimizer"]["state"] and not list(tmp_path.glob(".state.pt.tmp-*"))


@pytest.mark.parametrize("greedy", [True, False])
def test_a_groups_prompt_is_prefilled_once_with_the_same_responses_and_hidden_states(monkeypatch, greedy):
    from harness.backends import rollout

    loaded = load_model("tiny-random", dtype="float32")
    model = loaded.model
    prompts = [[5, 6, 7, 8, 9, 10], [11, 12, 13]]
    rows = [p for p in prompts for _ in range(3)]
    runs = {}
    for share in (False, True):
        seen: list[int] = []  # tokens per forward pass of the decoder
        hook = model.model.register_forward_pre_hook(
            lambda m, args, kwargs, seen=seen: seen.append(int(kwargs["input_ids"].numel())), with_kwargs=True)
        hidden: list[torch.Tensor] = []
        torch.manual_seed(3)
        out = rollout.sample(model, loaded.tokenizer, rows, [1], max_new_tokens=6, greedy=greedy,
                             temperature=1.0, hidden_out=hidden, share_prompts=share)
        hook.remove()
        runs[share] = (out, hidden, seen)
    (plain, h_plain, s_plain), (shared, h_shared, s_shared) = runs[False], runs[True]
    assert shared == plain
    assert all(torch.allclose(a, b, atol=1e-5) for a, b in zip(h_plain, h_shared))
    assert s_plain[0] == 6 * 6 and s_shared[:2] == [2 * 5, 6]  # the prompts once, then the last tokens
    assert rollout.shared_prefill(model, prompts, *rollout.left_pad(prompts, 0, torch.device("cpu"))) is None


@pytest.mark.parametrize("algo", ["mrtpo", "gdpo"])
def test_the_diagnostics_read_the_steps_advantages_instead_of_computing_them_again(algo, monkeypatch):
    from algorithms.diagnostics import reward_contributions

    rep, rewards, groups, mask = _batch()
    batch = rep.to_batch(rewards, groups, mask, 0)
    algorithm = get_algorithm(algo, **({"warmup_steps": 0} if algo == "mrtpo" else {}))
    result = algorithm.advantages(batch)
    fresh = reward_contributions(algorithm, batch)
    monkeypatch.setattr(type(algorithm), "aggregate" if algo == "gdpo" else "compute",
                        lambda *a: pytest.fail("computed again"))
    reused = reward_contributions(algorithm, batch, result)
    assert torch.equal(reused.per_token, fresh.per_token)
