"""The local backend's step computation on the rollouts an openrlhf step sampled, and the openrlhf
side of the same step, for the cross-backend agreement tests.

The rollouts are the step's rollout samples as OpenRLHF handed them to mrbench's experience maker
(token ids, masks and labels, saved by the CPU shim's ``dump_experience`` hook), tied to the
record's ``samples.jsonl`` by the tests. The local side rebuilds each rollout as the local
backend's sampler would have returned it (the chat prompt's ids, the response ids, the text) and
scores it with the task's verifiers here, then runs the local backend's replay (``replay_for`` with
a ``ReplayEngine`` on the model that sampled, float32 or ``replay_dtype``), batch builder and advantages
(``ReplayResult.to_batch``, ``step_advantages``) and update (``PolicyUpdate``: its loss and
gradient norm), as the shared step (``harness.training.step.Step``) runs them on the local engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace as ns
from typing import Any

import torch


@dataclass
class LocalStep:
    rollouts: list[Any]
    relevance: torch.Tensor | None
    adv: torch.Tensor  # [B, T]
    loss: float
    grad_norm: float
    T: int
    grad_norm_bf16: float = float("nan")  # the same update's, with bf16 parameters and compute

    def grad_norm_tolerance(self, floor: float = 0.02) -> float:
        """How far a bf16 forward and backward (DeepSpeed's bf16 actors) may move the gradient norm
        from the float32 one, relative: three times what bf16 moves it here on the same rollouts,
        and at least ``floor`` (the rollouts vLLM samples differ from run to run, and with them how
        much bf16 rounding moves the norm)."""
        return max(floor, 3 * abs(self.grad_norm_bf16 - self.grad_norm) / self.grad_norm)


def load_dump(path: Path) -> dict[str, Any]:
    return torch.load(path, weights_only=False)


def sample_objects(dump: dict[str, Any]) -> list[Any]:
    return [ns(**s) for s in dump["samples"]]


def local_step(cfg: Any, task: Any, model_dir: Path, dump: dict[str, Any], algo_name: str,
               params: dict[str, Any] | None = None, step: int = 0, replay_dtype: Any = None) -> LocalStep:
    from transformers import AutoModelForCausalLM

    from algorithms import get_algorithm
    from harness.backends.openrlhf.labels import decode_label
    from harness.backends.openrlhf.prompts import load_tokenizer
    from harness.backends.update import PolicyUpdate
    from harness.models import chat_prompt_ids
    from harness.replay import ReplayEngine
    from harness.replay_builders import ReplayResult, replay_for
    from harness.training.batch import Rollout, batch_tensors, decode_response, reward_lows
    from harness.training.step import plan_step, step_advantages
    from harness.training.step_diagnostics import column_names

    tok = load_tokenizer(str(model_dir))
    pad = tok.pad_token_id
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    G = cfg.sampling.group_size
    rollouts = []
    for i, sample in enumerate(dump["samples"]):
        label = decode_label(sample["labels"][0])
        ids = sample["sequences"][0]
        if sample["attention_mask"] is not None:
            ids = ids[sample["attention_mask"][0].bool()]
        ids = ids.tolist()
        prompt = chat_prompt_ids(tok, label.example.messages)
        assert ids[:len(prompt)] == prompt, f"sample {i}: the sequence does not start with the local chat prompt"
        response = ids[len(prompt):]
        text = decode_response(tok, response)
        r = Rollout(label.example, i // G, prompt, response, text, bool(label.truncated))
        r.verdicts = task.score(label.example, text)
        rollouts.append(r)
    rewards, group_ids, mask, T = batch_tensors(rollouts)
    algo = get_algorithm(algo_name, **(params or {}))
    plan = plan_step(algo, step)
    if plan.replay:
        replayer = model if replay_dtype is None else AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=replay_dtype).eval()
        engine = ReplayEngine.from_config(replayer, cfg.replay, pad, cfg.sampling.temperature)  # as the actors
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # as the actors (one thread each): the same reduction order
        try:
            with torch.no_grad():
                rep = replay_for(plan.request, engine, task, tok, rollouts, rewards, group_ids, T)
        finally:
            torch.set_num_threads(threads)
    else:
        rep = ReplayResult.nothing_replayed(rewards)
    batch = rep.to_batch(rewards, group_ids, mask, step, reward_lows(rollouts, task, rewards.shape[1]),
                         reward_names=column_names(rollouts), total_steps=cfg.schedule.steps)
    result = step_advantages(algo, batch)
    bf16 = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)  # before the update moves it
    update = PolicyUpdate(model, cfg.optim, cfg.sampling.temperature, pad, torch.device("cpu"))
    stats = update(rollouts, result.tokens, T, algo)
    in_bf16 = PolicyUpdate(bf16, cfg.optim, cfg.sampling.temperature, pad, torch.device("cpu"),
                           compute_dtype=torch.bfloat16)(rollouts, result.tokens, T, algo)
    return LocalStep(rollouts, rep.relevance, result.tokens, stats.loss, stats.grad_norm, T,
                     grad_norm_bf16=in_bf16.grad_norm)


def recorded_advantages(dump: dict[str, Any], B: int, T: int) -> torch.Tensor:
    """``[B, T]`` from the experiences' frames (what the DeepSpeed actors trained on)."""
    from harness.backends.openrlhf.frame import gather_rows

    out = torch.zeros(B, T)
    for exp in dump["experiences"]:
        adv = gather_rows(exp["advantages"], exp["action_mask"], T)
        for k, j in enumerate(exp["index"]):
            out[j] = adv[k]
    return out


def openrlhf_advantages(cfg: Any, task: Any, dump: dict[str, Any], algo_name: str,
                        params: dict[str, Any] | None = None, step: int = 0) -> tuple[torch.Tensor, Any]:
    """The openrlhf backend's step computation on the same samples, for an algorithm that needs no
    forward pass (the experience maker's path: its batch, the driver-side replay kinds, the frame
    writing): ``[B, T]`` read back from the frames, and the replay result."""
    from algorithms import get_algorithm
    from harness.backends.openrlhf.step import rollouts_from_samples, write_advantages
    from harness.training.step import Step, plan_step
    from mrbench_core.replay_kinds import WITHOUT_FORWARD

    algo = get_algorithm(algo_name, **(params or {}))
    plan = plan_step(algo, step)
    tok = None
    if plan.replay:
        assert plan.request in WITHOUT_FORWARD, f"{algo_name} replays with the model: use a real run's dump"
        from harness.backends.openrlhf.prompts import load_tokenizer

        tok = load_tokenizer(cfg.model.name)
    shared = Step(cfg, task, algo, None, tok)  # the maker's calls of the shared step, without a record
    state = shared.plan(step)
    shared.take(state, rollouts_from_samples(sample_objects(dump), cfg.sampling.group_size)[0])
    shared.score(state, scored=True)
    shared.replay(None, state)
    adv = shared.advantages(state)
    experiences = [ns(index=list(e["index"]), action_mask=e["action_mask"], info={}, advantages=None)
                   for e in dump["experiences"]]
    write_advantages(experiences, adv)
    frames = {"experiences": [{"index": e.index, "advantages": e.advantages, "action_mask": e.action_mask}
                              for e in experiences]}
    return recorded_advantages(frames, adv.shape[0], adv.shape[1]), state.rep
