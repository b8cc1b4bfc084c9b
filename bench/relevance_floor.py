"""The relevance that reduced precision alone produces: a response replayed under its own sampling prompt.

    .venv/bin/python bench/relevance_floor.py [--model smollm2-135m] [--task ifollow] [--attention auto sdpa]
        [--dtype bfloat16]

MRTPO's relevance q_t is the Jensen-Shannon distance between the old policy's next-token
distributions under P_all and under P_\\k. Computed exactly, a response replayed under the very
prompt it was sampled from gives q_t = 0 at every position. In bf16 it does not: the sampling
pass (one token at a time, a batch of left-padded prompts) and the replay (whole responses, batches
of other shapes) round differently, and since q is a square root, a JS divergence of 1e-4 already
reads as q = 0.012. That floor is noise added to every relevance, so it is worth knowing against
the size of the signal.

For each attention implementation, the script samples the main job's batch (keeping the sampling
logits), replays every response under its own prompt (alone, then all in batches) and prints the
mean q between the sampling logits and each replay; then, for scale, the mean relevance of the
leave-one-out replay of every (response, reward) pair of the same batch.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.attention import use_for_rollout
from harness.backends.local import LocalBackend
from harness.backends.rollout import rollouts_for
from harness.config import RunConfig
from harness.replay import ReplayEngine, ReplayJob
from harness.replay_builders import leave_one_out
from harness.training.batch import batch_tensors
from tasks.data_source import load_examples


def floor_and_signal(backend: LocalBackend, seed: int, head_float32: bool = False,
                     share_prefix: bool = True, exact: bool = False) -> tuple[float, float, float]:
    cfg, model = backend.cfg, backend.rollout_model
    examples = load_examples(backend.task, cfg.task.split, cfg.task.data_dir, cfg.sampling.prompts_per_step, seed)
    torch.manual_seed(seed)
    rollouts = rollouts_for(model, backend.tokenizer, examples, cfg.sampling.group_size, backend.eos, cfg.sampling,
                            cfg.sampling.max_prompt_tokens, keep_hidden=True, logits_budget=1 << 40)
    engine = ReplayEngine.from_config(model, dataclasses.replace(cfg.replay, share_prefix=share_prefix), backend.pad_id,
                                      head_float32=head_float32, exact_batches=exact)
    jobs = [ReplayJob(tuple(r.prompt_ids), tuple(r.response_ids)) for r in rollouts if r.response_ids]
    batched = engine.run(jobs)
    alone, together = [], []
    for r, job in zip([r for r in rollouts if r.response_ids], jobs):
        if r.logits is None:
            raise RuntimeError("the sampling logits were not kept (the model exposes no final norm); "
                               "there is no sampling pass to compare the replay with")
        single = engine.run([job])[job]
        # the sampling pass: its kept logits, or (float32 head) its kept hidden states through that head
        sampled = r.hidden.to(single.dtype) if head_float32 else single
        alone.append(engine.js_many(sampled, [single], None if head_float32 else r.logits)[0])
        together.append(engine.js_many(sampled, [batched[job]], None if head_float32 else r.logits)[0])
    for r in rollouts:
        r.verdicts = backend.task.score(r.example, r.text)
    rewards, group_ids, _mask, T = batch_tensors(rollouts)
    rel = leave_one_out(engine, backend.task, backend.tokenizer, rollouts, rewards, group_ids, T,
                        ~torch.isnan(rewards)).relevance
    return (float(torch.cat(alone).mean()), float(torch.cat(together).mean()),
            float(rel[~torch.isnan(rel)].mean()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="ifollow")
    ap.add_argument("--dtype", default="auto", help="rollout/replay dtype (auto: bf16 where native)")
    ap.add_argument("--attention", nargs="+", default=["auto", "sdpa"],
                    help="backend.local.rollout_attention values to compare")
    ap.add_argument("--head", nargs="+", default=["model", "float32"],
                    help="LM head of the statistics: model (its dtype) or float32 (backend.local.replay_head)")
    ap.add_argument("--share-prefix", nargs="+", default=["on", "exact", "off"],
                    help="replay batching to compare: prefix sharing on (contexts of any length in a batch), "
                         "exact (sharing, one context length per batch: backend.local.replay_batching), off")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = RunConfig()
    cfg.model.name, cfg.task.name, cfg.model.dtype = args.model, args.task, args.dtype
    backend = LocalBackend(cfg)
    backend._load_policy()
    print(f"model {args.model}, rollout dtype {backend.rollout_dtype}, task {args.task}, "
          f"{cfg.sampling.prompts_per_step} prompts x {cfg.sampling.group_size} responses, threads "
          f"{torch.get_num_threads()}")
    print("| attention | head | prefix sharing | q, sampling vs replay alone | q, sampling vs replay in batches | "
          "mean relevance (all pairs) |")
    print("|---|---|---|---|---|---|")
    for choice in args.attention:
        name = use_for_rollout(backend.rollout_model, choice)
        for head in args.head:
            for share in args.share_prefix:
                alone, together, signal = floor_and_signal(backend, args.seed, head_float32=head == "float32",
                                                           share_prefix=share != "off", exact=share == "exact")
                print(f"| {name} | {head} | {share} | {alone:.2e} | {together:.2e} | {signal:.4f} |", flush=True)


if __name__ == "__main__":
    main()
