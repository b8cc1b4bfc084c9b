"""Contract tests of the openrlhf backend against OpenRLHF's real source (installed without its
dependencies by ``scripts/setup.sh --dev``; Ray, vLLM, DeepSpeed and flash-attn stubbed, see
``openrlhf_stubs``): the overridden methods match the installed base classes, OpenRLHF's own
argument parser accepts the generated command lines, ``install`` wires mrbench's classes into
``train_ppo_ray``, and the real path from mrbench's agent executor through OpenRLHF's sample
processing and experience maker yields the local backend's token advantages."""

from __future__ import annotations

import asyncio
import inspect
import math
import runpy
import sys
from importlib import metadata
from types import SimpleNamespace

import pytest
import torch
from openrlhf_stubs import stubbed_openrlhf
from toy_task import register, tiny_config

from harness.backends import BACKENDS
from harness.backends.openrlhf.argv import openrlhf_argv
from harness.backends.openrlhf.cell import AGENT_FILE, CellPaths, CellSpec
from harness.backends.openrlhf.frame import gather_rows, response_columns
from harness.config import resolve
from harness.models import chat_prompt_ids, load_model
from harness.replay import ReplayEngine
from harness.replay_builders import replay_for
from tasks.data_source import load_examples

PINNED = ("0.11.", "openrlhf 0.11.x is the tested release (pyproject's openrlhf extra)")


@pytest.fixture(scope="module")
def orl():
    """OpenRLHF's modules and mrbench's hooks, imported against the stubs."""
    with stubbed_openrlhf():
        import openrlhf.cli  # noqa: F401
        from openrlhf import utils
        from openrlhf.trainer import ppo_trainer
        from openrlhf.trainer.ppo_utils import experience, experience_maker, samples_generator
        from openrlhf.trainer.ray import launcher, ppo_actor
        from openrlhf.utils import agent as agent_base

        from harness.backends.openrlhf import agent, maker, trainer, update

        yield SimpleNamespace(utils=utils, ppo_trainer=ppo_trainer, experience=experience,
                              experience_maker=experience_maker, samples_generator=samples_generator,
                              launcher=launcher, ppo_actor=ppo_actor, agent_base=agent_base, agent=agent,
                              maker=maker, trainer=trainer, update=update)


def test_the_installed_openrlhf_is_the_tested_release():
    assert metadata.version("openrlhf").startswith(PINNED[0]), PINNED[1]


# -- the overridden methods against the installed base classes ------------------------------------

def _params(fn):
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


@pytest.mark.parametrize("ours,base,method", [
    ("maker.MRExperienceMaker", "experience_maker.RemoteExperienceMaker", "make_experience_batch"),
    ("maker.MRExperienceMaker", "experience_maker.RemoteExperienceMaker", "compute_advantages_and_returns"),
    ("trainer.MRPPOTrainerImpl", "trainer._TrainerBase", "__init__"),
    ("trainer.MRPPOTrainerImpl", "trainer._TrainerBase", "train_step"),
    ("trainer.MRPPOTrainerImpl", "trainer._TrainerBase", "save_logs_and_checkpoints"),
    ("trainer.MRPPOTrainerImpl", "trainer._TrainerBase", "init_checkpoint_states"),
    ("agent.MRAgentExecutor", "agent_base.AgentExecutorBase", "execute"),
    ("trainer.MRPolicyActorImpl", "trainer._ActorBase", "init_model_from_pretrained"),
    ("update.MRActorPPOTrainer", "ppo_actor.ActorPPOTrainer", "training_step"),
])
def test_overrides_keep_the_base_signature(orl, ours, base, method):
    def resolve_name(dotted):
        mod, name = dotted.split(".")
        return getattr(getattr(orl, mod), name)

    ours_cls, base_cls = resolve_name(ours), resolve_name(base)
    assert method in vars(base_cls) or any(method in vars(c) for c in base_cls.__mro__[1:]), \
        f"OpenRLHF's {base_cls.__name__} no longer defines {method}"
    assert _params(getattr(ours_cls, method)) == _params(getattr(base_cls, method))


def test_what_the_hooks_call_on_openrlhf_still_exists(orl):
    """Names and parameters of the OpenRLHF pieces mrbench calls without overriding them."""
    maker_init = [p for p in inspect.signature(orl.experience_maker.RemoteExperienceMaker.__init__).parameters][1:8]
    assert maker_init == ["actor_model_group", "critic_model_group", "reward_model_group", "initial_model_group",
                          "kl_controller", "strategy", "tokenizer"]
    batch = inspect.signature(orl.launcher.RayActorGroup.async_run_method_batch).parameters
    assert list(batch)[:2] == ["self", "method_name"] and any(p.kind is p.VAR_KEYWORD for p in batch.values())
    assert list(inspect.signature(orl.launcher.BaseModelActor.execute_batch).parameters)[1:] == \
        ["method_name", "all_data", "start_idx", "end_idx"]
    setup = list(inspect.signature(orl.utils.deepspeed.DeepspeedStrategy.setup_dataloader).parameters)
    assert setup[1:6] == ["replay_buffer", "batch_size", "pin_memory", "shuffle", "collate_fn"]
    fields = set(orl.experience.Experience.__dataclass_fields__)
    assert fields >= {"sequences", "attention_mask", "action_mask", "advantages", "returns", "kl", "index", "labels",
                      "info", "rewards"}
    assert hasattr(orl.ppo_trainer.BasePPOTrainer, "train_step") and hasattr(orl.ppo_actor, "PolicyModelActor")
    assert issubclass(orl.trainer.MRPolicyActorImpl, orl.launcher.BaseModelActor)


# -- OpenRLHF's own parser on the generated command lines -------------------------------------------

class _Parsed(Exception):
    pass


def run_openrlhf_cli(orl, argv, monkeypatch, strategy=None):
    """Run ``openrlhf.cli.train_ppo_ray`` as ``__main__`` on ``argv``; ``get_strategy`` (the first
    call of ``train`` once Ray is up) returns ``strategy``, or stops the run with the parsed args."""
    seen = {}

    def get_strategy(args):
        seen["args"] = args
        if strategy is None:
            raise _Parsed
        return strategy

    monkeypatch.setattr(orl.utils, "get_strategy", get_strategy)
    monkeypatch.setattr(sys, "argv", ["train_ppo_ray", *argv])
    with pytest.raises(_Parsed):
        runpy.run_module("openrlhf.cli.train_ppo_ray", run_name="__main__")
    return seen["args"]


def _argv(cfg, tmp_path):
    return openrlhf_argv(cfg, CellPaths(tmp_path), "/models/policy")


#: the paper recipes update in float32, which OpenRLHF cannot (pre-flight refuses it): bf16 here
BF16 = ("model.train_dtype", "bfloat16")


@pytest.mark.parametrize("recipe,overrides", [
    (None, []),
    ("toolcall-paper", [BF16]),
    ("ifollow-paper", [BF16]),
    ("text2sql-paper", [BF16]),
    ("toolcall-paper", [BF16, ("optim.kl_coef", "0.01"), ("model.lora", "true"), ("optim.entropy_coef", "0.001"),
                        ("backend.openrlhf.gpus_per_node", "4"), ("backend.openrlhf.vllm_tensor_parallel", "2")]),
])
def test_openrlhf_parser_accepts_the_command_line(orl, tmp_path, monkeypatch, recipe, overrides):
    cfg = resolve(recipe, [("backend", "openrlhf"), *overrides])
    assert BACKENDS.get("openrlhf").ignored(cfg) == []
    args = run_openrlhf_cli(orl, _argv(cfg, tmp_path), monkeypatch)
    s, o = cfg.sampling, cfg.optim
    assert args.rollout.n_samples_per_prompt == s.group_size and args.rollout.batch_size == s.prompts_per_step
    assert args.train.batch_size * o.mini_batches == s.prompts_per_step * s.group_size
    assert args.data.max_len == s.max_prompt_tokens + s.max_new_tokens
    assert args.actor.eps_clip_low_high == [o.clip_low, o.clip_high]
    assert args.actor.adam.lr == o.lr and list(args.actor.adam.betas) == o.betas
    assert args.actor.lr_scheduler == "constant" and args.actor.lr_warmup_ratio == 0
    assert args.algo.kl.init_coef == o.kl_coef and args.algo.kl.use_loss == (o.kl_coef > 0)
    assert args.critic.model_name_or_path is None  # no critic: the placeholder estimator has none
    assert args.reward.remote_url == ["agent"] and args.train.agent_func_path == str(AGENT_FILE)
    assert args.ds.lora.rank == (cfg.model.lora_r if cfg.model.lora else 0)
    assert args.ds.param_dtype == "bf16"  # model.train_dtype bfloat16, or auto resolved to it


def test_the_dry_run_line_is_what_the_parser_accepts(orl, tmp_path, monkeypatch, capsys):
    import shlex

    from harness import cli

    assert cli.main(["run", "--backend", "openrlhf", "--config", "toolcall-paper", "--model.train_dtype", "bfloat16",
                     "--dry-run", "--output.dir", str(tmp_path / "rec")]) == 0
    out = capsys.readouterr().out.splitlines()
    line = shlex.split(out[out.index("OpenRLHF command line:") + 1])
    argv = line[line.index("harness.backends.openrlhf.main") + 1:]
    args = run_openrlhf_cli(orl, argv, monkeypatch)
    assert args.data.prompt_dataset == str((tmp_path / "rec" / "openrlhf" / "prompts.jsonl").resolve())
    assert args.rollout.n_samples_per_prompt == 4 and args.train.batch_size == 512


def test_install_makes_train_build_mrbench_actors_and_trainer(orl, tmp_path, monkeypatch):
    ppo_actor, ppo_trainer, trainer = orl.ppo_actor, orl.ppo_trainer, orl.trainer
    monkeypatch.setattr(ppo_actor, "PolicyModelActor", ppo_actor.PolicyModelActor)  # restored afterwards
    monkeypatch.setattr(ppo_trainer, "PPOTrainer", ppo_trainer.PPOTrainer)
    trainer.install()
    groups, started = [], []

    class Group:
        def __init__(self, nodes, gpus, actor_type, **kwargs):
            groups.append(actor_type)

    def remote(*args, **kwargs):
        started.append(kwargs)
        raise _Parsed

    import openrlhf.trainer.ray as ray_pkg

    monkeypatch.setattr(orl.launcher, "RayActorGroup", Group)
    monkeypatch.setattr(ray_pkg, "create_vllm_engines", lambda *a, **k: ["engine"])
    monkeypatch.setattr(trainer.MRPPOTrainer, "remote", remote, raising=False)
    cfg = resolve(None, [("backend", "openrlhf"), ("sampling.top_k", "20")])
    run_openrlhf_cli(orl, _argv(cfg, tmp_path), monkeypatch, strategy=SimpleNamespace(print=lambda *a: None))
    assert groups == [trainer.MRPolicyActor]  # no reference (kl 0), no reward model (the agent scores)
    assert started and started[0]["max_new_tokens"] == cfg.sampling.max_new_tokens


# -- the real rollout-to-advantage path on a tiny CPU policy ------------------------------------------

class _Handle:
    """What a Ray actor handle looks like to OpenRLHF: ``handle.method.remote(...)`` (run here)."""

    def __init__(self, actor):
        self.actor = actor

    def __getattr__(self, name):
        return SimpleNamespace(remote=getattr(self.actor, name))


def _policy_actors(orl, model, tokenizer, count, calls):
    class CPUPolicyActor(orl.trainer.MRPolicyActorImpl):
        def forward(self, sequences, action_mask=None, attention_mask=None, **_):
            return torch.zeros(action_mask.shape)  # old log-probs: not read by the advantages

        def mr_replay(self, shard):
            calls.append(shard)
            return super().mr_replay(shard)

    actors = []
    for _ in range(count):
        actor = CPUPolicyActor.__new__(CPUPolicyActor)
        actor.tokenizer, actor.strategy = tokenizer, SimpleNamespace(is_rank_0=lambda: True)
        actor.actor = SimpleNamespace(model=SimpleNamespace(module=model), eval=model.eval, train=lambda: None)
        actors.append(_Handle(actor))
    group = orl.launcher.RayActorGroup.__new__(orl.launcher.RayActorGroup)
    group._actor_handlers, group.duplicate_actors = actors, 1
    return group


def _args(cfg, actors, micro):
    ns = SimpleNamespace
    return ns(rollout=ns(n_samples_per_prompt=cfg.sampling.group_size, micro_batch_size=micro),
              train=ns(dynamic_batch_enable=False, colocate_all=False, colocate_actor_ref=False,
                       colocate_critic_reward=False),
              ds=ns(ring_attn_size=1, tensor_parallel_size=1), actor=ns(num_nodes=1, num_gpus_per_node=actors),
              algo=ns(advantage=ns(estimator="group_norm"), kl=ns(use_loss=False, estimator="k1")))


def _rollout_samples(orl, cfg, examples, responses, tokenizer, stop):
    """Run mrbench's agent executor on each (example, response) through OpenRLHF's own sample processing."""
    from harness.backends.openrlhf.labels import Label, encode_label

    queue = list(responses)

    class Engine:
        async def generate(self, ids, params):
            ids_out, truncated = queue.pop(0)
            assert list(params.stop_token_ids) == stop
            return SimpleNamespace(outputs=[SimpleNamespace(token_ids=ids_out, text="", stop_reason=None,
                                                            finish_reason="length" if truncated else "stop")])

    executor, engine = orl.agent.AgentExecutor(), Engine()
    processor = orl.samples_generator.SamplesGenerator.__new__(orl.samples_generator.SamplesGenerator)
    params = orl.samples_generator.SamplingParams(temperature=cfg.sampling.temperature, max_tokens=None)
    out = []
    for ex in examples:
        label = encode_label(Label(cfg.task.name, {}, ex, stop, cfg.sampling.max_new_tokens))
        for _ in range(cfg.sampling.group_size):
            response = asyncio.run(executor.execute("ignored", label, params, 4096, tokenizer, engine))
            out.append(processor._process_response_into_experience(response, max_len=4096))
    return out


def _counted(fn, counts, key):
    def wrapper(*args, **kwargs):
        counts[key] += 1
        return fn(*args, **kwargs)
    return wrapper


@pytest.mark.parametrize("algo", ["grpo", "gdpo", "mrtpo", "mrtpo-joint", "mrtpo-oracle", "cort", "ktae", "sdpo"])
def test_advantages_in_openrlhfs_frame_equal_the_local_backends(orl, tmp_path, algo, monkeypatch):
    from algorithms import get_algorithm
    from harness.backends.rollout import rollouts_for
    from harness.config import ReplayConfig, SamplingConfig
    from harness.replay_builders import ReplayResult
    from harness.training import step as shared_step
    from harness.training.batch import batch_tensors, reward_lows
    from harness.training.step import step_advantages
    from tasks.registry import make_task

    register()
    cfg = tiny_config(str(tmp_path), algo=algo)
    cfg.sampling.temperature, cfg.sampling.prompts_per_step = 0.8, 3
    loaded = load_model("tiny-random", dtype="float32")
    model, tok = loaded.model, loaded.tokenizer
    task = make_task(cfg.task.name)
    examples = load_examples(task)[:3]  # prompts of 2 and 3 rules: different lengths
    assert len({len(chat_prompt_ids(tok, ex.messages)) for ex in examples}) > 1
    torch.manual_seed(0)
    stop = [tok.eos_token_id]
    rollouts = rollouts_for(model, tok, examples, 4, stop, SamplingConfig(max_new_tokens=12, temperature=0.8))
    for r in rollouts:
        r.verdicts = task.score(r.example, r.text)
    # the local backend's advantages for this batch
    rewards, group_ids, mask, T = batch_tensors(rollouts)
    algorithm, step = get_algorithm(algo, **cfg.algo.params), 3
    engine = ReplayEngine.from_config(model, ReplayConfig(), tok.pad_token_id, 0.8)
    rep = replay_for(algorithm.replay_request, engine, task, tok, rollouts, rewards, group_ids, T)
    expected = step_advantages(algorithm, rep.to_batch(rewards, group_ids, mask, step,
                                                       reward_lows(rollouts, task, rewards.shape[1]))).tokens
    assert bool((expected != 0).any()), "a batch whose advantages are all 0 tests nothing"
    # the same responses through mrbench's executor, OpenRLHF's sample processing and experience maker
    samples = _rollout_samples(orl, cfg, examples, [(r.response_ids, r.truncated) for r in rollouts], tok, stop)
    calls = []
    group = _policy_actors(orl, model, tok, 2, calls)
    strategy = SimpleNamespace(args=_args(cfg, actors=2, micro=3))
    cell = CellSpec(config=cfg.to_dict(), record_dir=str(tmp_path))
    maker = orl.maker.MRExperienceMaker(group, None, None, None, SimpleNamespace(value=0.0), strategy, tok, cell=cell)
    maker.step_index = step
    shared = {"plan": 0, "to_batch": 0, "advantages": 0}  # the local backend's step pieces, each used once
    for name, key in (("plan_step", "plan"), ("step_advantages", "advantages")):  # the shared step's pieces
        monkeypatch.setattr(shared_step, name, _counted(getattr(shared_step, name), shared, key))
    monkeypatch.setattr(ReplayResult, "to_batch", _counted(ReplayResult.to_batch, shared, "to_batch"))
    experiences = maker.make_experience_batch(samples)
    assert shared == {"plan": 1, "to_batch": 1, "advantages": 1}
    got = torch.zeros_like(expected)
    mixed = False
    for exp in experiences:
        first, length = response_columns(exp.action_mask)
        mixed |= len(set(first[length > 0].tolist())) > 1
        got[exp.index] = gather_rows(exp.advantages, exp.action_mask, T)
        assert bool((exp.advantages[~exp.action_mask.bool()] == 0).all())
        assert torch.equal(exp.returns, exp.advantages) and exp.kl is None
        assert all(v.shape[0] == exp.action_mask.shape[0] for v in exp.info.values())
    assert mixed, "no micro-batch held prompts of different lengths"
    torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
    if algorithm.replay_request in ("read_spans", "token_ids"):  # built in the maker, no actor pass
        assert calls == [] and maker.last.rep.pairs_replayed > 0
    elif algorithm.replay_request != "none":
        assert len(calls) == 2 and sorted(j for s in calls for j in s.rows) == list(range(len(rollouts)))
        for shard in calls:  # whole groups per shard
            assert all(sum(1 for j in shard.rows if j // 4 == g) in (0, 4) for g in range(3))
        assert maker.last.rep.pairs_replayed > 0
    else:
        assert calls == []


# -- the trainer: the record's rows, resuming, stopping ---------------------------------------------------

LOCAL_STEP_KEYS = {"step", "reward_mean", "format_rate", "response_length", "truncated_rate", "replay_pairs",
                   "reward_pairs", "replay_share", "replay_sequences", "adv_abs_mean", "adv_nonzero_tokens", "loss",
                   "kl", "clip_fraction", "entropy", "grad_norm", "ratio_max", "time_generate", "time_score",
                   "time_replay", "time_credit", "time_update", "time_step"}


def _trainer(orl, cfg, tmp_path, maker, saved_states):
    from harness.records import RunRecord

    t = orl.trainer.MRPPOTrainerImpl.__new__(orl.trainer.MRPPOTrainerImpl)
    t.cell = CellSpec(config=cfg.to_dict(), record_dir=str(tmp_path))
    t.mr_cfg, t.experience_maker, t.record = cfg, maker, RunRecord(tmp_path)
    maker.step.attach(t.record)  # as the trainer's constructor does
    ns = SimpleNamespace
    t.args = ns(logger=ns(logging_steps=1), ckpt=ns(save_steps=float("inf"), path=str(tmp_path), load_enable=True))
    t.wandb_logger = t.tensorboard_logger = t.critic_model_group = None
    t.best_eval_metric_key, t.best_eval_metric_value, t._latest_eval_metric_value = "", float("-inf"), None
    calls = []

    def run_method(method_name, **kwargs):
        calls.append((method_name, kwargs))
        return [saved_states] if method_name == "get_checkpoint_states" else []

    t.actor_model_group = SimpleNamespace(async_run_method=run_method)
    return t, calls


def test_trainer_writes_the_local_rows_resumes_and_stops_after_a_checkpoint(orl, tmp_path):
    from harness.backends.openrlhf.cell import CellPaths
    from harness.backends.openrlhf.launch import request_stop, stopped_after
    from harness.training import credit_store
    from tasks.registry import make_task

    register()
    cfg = tiny_config(str(tmp_path), algo="gdpo")
    loaded = load_model("tiny-random", dtype="float32")
    tok = loaded.tokenizer
    examples = load_examples(make_task(cfg.task.name))[:2]
    responses = [([65 + i, 66, tok.eos_token_id], False) for i in range(4)] + [([67] * 12, True)] * 4
    samples = _rollout_samples(orl, cfg, examples, responses, tok, [tok.eos_token_id])
    cell = CellSpec(config=cfg.to_dict(), record_dir=str(tmp_path))
    strategy = SimpleNamespace(args=_args(cfg, actors=1, micro=4))
    maker = orl.maker.MRExperienceMaker(_policy_actors(orl, loaded.model, tok, 1, []), None, None, None,
                                        SimpleNamespace(value=0.0), strategy, tok, cell=cell)
    (tmp_path / "_actor").mkdir()
    trainer, calls = _trainer(orl, cfg, tmp_path, maker, {"global_step": 1})
    status = {"policy_loss": 0.5, "kl": 0.01, "ppo_clip_ratio": 0.25, "actor_grad_norm": 2.0,
              "timing/generation": 3.0, "timing/make_experience": 1.0, "timing/ppo_train": 2.0,
              "timing/broadcast": 0.5, "timing/step_total": 6.5}
    for step in (1, 2):
        maker.step_index = step - 1  # as train_step tells it
        maker.make_experience_batch(samples)
        trainer.save_logs_and_checkpoints(step, dict(status), {"global_step": step})
    rows = trainer.record.metrics()
    assert [r["step"] for r in rows] == [1, 2] and LOCAL_STEP_KEYS <= set(rows[0])
    assert [r["step"] for r in credit_store.read_rows(tmp_path)] == [1] * 4 + [2] * 4  # the credit log, one group a step
    assert rows[0]["loss"] == 0.5 and rows[0]["clip_fraction"] == 0.25 and rows[0]["time_update"] == 2.5
    assert rows[0]["time_step"] == 6.5 and rows[0]["reward_mean"] == pytest.approx(_rewards_mean(samples))
    assert not calls  # no periodic checkpoint (save_steps is infinite)
    assert trainer.init_checkpoint_states()["global_step"] == 1
    assert [r["step"] for r in trainer.record.metrics()] == [1]  # resumed after step 1: step 2 is redone
    assert [r["step"] for r in credit_store.read_rows(tmp_path)] == [1] * 4
    paths = CellPaths(tmp_path)
    request_stop(paths, "SIGTERM")
    maker.step_index = 1
    maker.make_experience_batch(samples)
    with pytest.raises(orl.trainer.TrainingStopped):
        trainer.save_logs_and_checkpoints(2, dict(status), {"global_step": 2})
    assert calls[-1][0] == "save_checkpoint" and calls[-1][1]["tag"] == "global_step2"
    assert stopped_after(paths) == 2 and trainer.args.ckpt.save_steps == float("inf")


def _rewards_mean(samples):
    from harness.backends.openrlhf.labels import decode_label

    values = [v for s in samples for v in decode_label(s.labels[0]).rewards() if not math.isnan(v)]
    return sum(values) / len(values)
