"""One GPU check of the replay and of its cost, in a few minutes.

    .venv/bin/python bench/gpu_check.py                                   # CUDA, Qwen2.5-1.5B's shape
    .venv/bin/python bench/gpu_check.py --device cpu --model tiny-random  # the same check, small, on CPU

1. The model: ``qwen2.5-1.5b-shape`` (the default) is a randomly initialised model with the
   transformers configuration of Qwen2.5-1.5B (28 layers, hidden 1536, 12 query and 2 key/value
   heads, vocabulary 151,936, tied embeddings), so no weights travel; its initialisation is wide
   enough (``initializer_range`` 0.1) that next-token distributions are peaked and contexts change
   them. It speaks through harness's byte tokenizer, sampling only byte tokens (the others are
   suppressed) while every distribution the replay compares spans the full vocabulary.
   ``tiny-random`` (or any name :func:`harness.models.load_model` takes) uses that model instead.
2. Equality: the prefix-shared, batched replay (:class:`harness.replay.ReplayEngine`) of one step's
   leave-one-out contexts against a full recomputation of every job alone
   (:func:`harness.replay.full_context_hidden`, :func:`harness.replay.full_logits_js`): the
   largest difference of the relevance q and of the hidden states (relative), within the
   tolerance of the model's dtype (bf16 on CUDA).
3. Cost: a GDPO step and an MRTPO step of the local backend on the same sampled, scored batch
   (ifollow's generated prompts): generation and scoring (timed once, the same computation in
   both), the replay of about 20% of the (response, reward) pairs taken as whole (group, reward)
   blocks, the advantages and the update (:class:`harness.backends.local.LocalBackend`'s own).
   The last line is ``ratio <MRTPO step / GDPO step>``.

Exit status 1 when the equality check fails.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from algorithms import get_algorithm
from harness.backends.rollout import rollouts_for
from harness.backends.update import PolicyUpdate
from harness.config import ReplayConfig, RunConfig
from harness.models import byte_tokenizer, chat_prompt_ids, eos_ids, load_model
from harness.replay import ReplayEngine, ReplayJob, full_context_hidden, full_logits_js
from harness.replay_builders import ReplayResult, leave_one_out
from harness.training.batch import batch_tensors
from tasks.data_source import load_examples
from tasks.registry import make_task

QWEN_SHAPE = "qwen2.5-1.5b-shape"
#: largest |q_replay - q_full| accepted, by dtype (q is a Jensen-Shannon distance in [0, 1])
Q_TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 3e-2, torch.float16: 3e-2}


def qwen_shaped(device: torch.device, dtype: torch.dtype, seed: int) -> tuple[torch.nn.Module, object]:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = byte_tokenizer()
    config = Qwen2Config(vocab_size=151936, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
                         num_attention_heads=12, num_key_value_heads=2, max_position_embeddings=32768,
                         rope_theta=1_000_000.0, rms_norm_eps=1e-6, tie_word_embeddings=True,
                         initializer_range=0.1, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
                         bos_token_id=None)
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen2ForCausalLM(config).to(dtype)
    model.generation_config.eos_token_id = tok.eos_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.suppress_tokens = list(range(len(tok), config.vocab_size))  # bytes only
    return model.eval(), tok


def check_equality(model, tok, task, rollouts, rewards, dtype, max_jobs: int) -> bool:
    """Prefix-shared replay vs full recomputation on the batch's leave-one-out contexts."""
    pairs = []
    for j, r in enumerate(rollouts):
        ks = [k for k in range(rewards.shape[1]) if not torch.isnan(rewards[j, k])]
        ctx = task.replay_contexts(r.example, r.verdicts, ks)
        resp = tuple(r.response_ids)
        for without in ctx.without.values():
            pairs.append((ReplayJob(tuple(chat_prompt_ids(tok, ctx.all)), resp),
                          ReplayJob(tuple(chat_prompt_ids(tok, without)), resp)))
        if len(pairs) >= max_jobs:
            break
    if not pairs:
        print("equality: no replayable pair in the batch (no verifier blocks); nothing compared")
        return False
    engine = ReplayEngine.from_config(model, ReplayConfig(), tok.pad_token_id)
    hidden = engine.run([job for pair in pairs for job in pair])
    dq, dh, qs = 0.0, 0.0, []
    for a, b in pairs:
        q = engine.js(hidden[a], hidden[b])
        q_full = full_logits_js(model, a, b).to(q.device)
        dq = max(dq, float((q - q_full).abs().max()))
        qs.append(float(q_full.mean()))
        for job in (a, b):
            ref = full_context_hidden(model, job).float()
            dh = max(dh, float((hidden[job].float() - ref).norm(dim=-1).max() / ref.norm(dim=-1).max()))
    tol = Q_TOLERANCE.get(dtype, 3e-2)
    ok = dq <= tol
    print(f"equality ({dtype}): {len(pairs)} (P_all, P_k) pairs, mean q {sum(qs) / len(qs):.4f}; "
          f"max |q_shared - q_full| {dq:.2e} (tolerance {tol:.0e}); max relative hidden-state error {dh:.2e}: "
          f"{'ok' if ok else 'FAILED'}")
    return ok


def timed(fn, device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--model", default=QWEN_SHAPE)
    ap.add_argument("--dtype", default=None, help="default: bfloat16 on CUDA, float32 on CPU")
    ap.add_argument("--prompts", type=int, default=None, help="default: 8 on CUDA, 2 on CPU")
    ap.add_argument("--group", type=int, default=None, help="default: 8 on CUDA, 4 on CPU")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: 128 on CUDA, 16 on CPU")
    ap.add_argument("--share", type=float, default=0.2, help="replayed share of the (response, reward) pairs")
    ap.add_argument("--equality-pairs", type=int, default=16)
    ap.add_argument("--replay-batching", default="padded", choices=["exact", "padded"],
                    help="batching of the timed replay (backend.local.replay_batching)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_check: no CUDA device; use --device cpu --model tiny-random", file=sys.stderr)
        return 2
    gpu = device.type == "cuda"
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[
        args.dtype or ("bfloat16" if gpu else "float32")]

    cfg = RunConfig()
    cfg.task.name, cfg.model.device = "ifollow", str(device)
    cfg.model.dtype = cfg.model.train_dtype = str(dtype).removeprefix("torch.")
    cfg.sampling.prompts_per_step = args.prompts or (8 if gpu else 2)
    cfg.sampling.group_size = args.group or (8 if gpu else 4)
    cfg.sampling.max_new_tokens = args.max_new_tokens or (128 if gpu else 16)
    cfg.optim.micro_batch_size = 8 if gpu else 4
    cfg.backend.local.threads = 0 if gpu else 1
    cfg.backend.local.replay_batching = args.replay_batching
    def build():
        if args.model == QWEN_SHAPE:
            return qwen_shaped(device, dtype, args.seed)
        loaded = load_model(args.model, dtype, device)
        return loaded.model, loaded.tokenizer

    (model, tok), t_load = timed(build, device)
    task = make_task(cfg.task.name)
    eos = eos_ids(tok, model)  # one copy of the model samples, replays and trains
    examples = load_examples(task, "train", None, cfg.sampling.prompts_per_step, args.seed)
    print(f"model {args.model} on {device} in {dtype} ({sum(p.numel() for p in model.parameters()) / 1e6:.0f} M "
          f"parameters, built in {t_load:.1f} s); task ifollow, {len(examples)} prompts x {cfg.sampling.group_size}")

    torch.manual_seed(args.seed)
    rollouts, t_gen = timed(lambda: rollouts_for(model, tok, examples, cfg.sampling.group_size, eos,
                                                 cfg.sampling, cfg.sampling.max_prompt_tokens), device)
    t0 = time.perf_counter()
    for r in rollouts:
        r.verdicts = task.score(r.example, r.text)
    t_score = time.perf_counter() - t0
    rewards, group_ids, mask, T = batch_tensors(rollouts)
    ok = check_equality(model, tok, task, rollouts, rewards, dtype, args.equality_pairs)

    total = int((~torch.isnan(rewards)).sum())
    blocks: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for j, r in enumerate(rollouts):
        ks = [k for k in range(rewards.shape[1]) if not torch.isnan(rewards[j, k])]
        for k in task.replay_contexts(r.example, r.verdicts, ks).without:
            blocks.setdefault((r.group, k), []).append((j, k))
    order = torch.randperm(len(blocks), generator=torch.Generator().manual_seed(args.seed)).tolist()
    chosen_pairs = [p for i in order for p in blocks[list(blocks)[i]]][:max(1, round(args.share * total))]
    chosen = torch.zeros_like(rewards, dtype=torch.bool)
    for pair in chosen_pairs:
        chosen[pair] = True

    update = PolicyUpdate(model, cfg.optim, cfg.sampling.temperature, tok.pad_token_id, device)
    update.optimizer = torch.optim.SGD(update.params, lr=0.0)  # the update's cost, the weights left as they are
    gdpo, mrtpo = get_algorithm("gdpo"), get_algorithm("mrtpo", warmup_steps=0)
    engine = ReplayEngine.from_config(model, dataclasses.replace(cfg.replay, share_prefix=True), tok.pad_token_id,
                                      cfg.sampling.temperature, exact_batches=cfg.backend.local.replay_batching == "exact")

    def step(algo, replay: bool) -> float:
        model.eval()
        rep, t_rep = (timed(lambda: leave_one_out(engine, task, tok, rollouts, rewards, group_ids, T, chosen), device)
                      if replay else (None, 0.0))
        batch = (rep or ReplayResult.nothing_replayed(rewards)).to_batch(rewards, group_ids, mask, 0)
        adv, t_adv = timed(lambda: algo.advantages(batch).tokens, device)
        _, t_upd = timed(lambda: update(rollouts, adv.float(), T, algo), device)
        print(f"  {algo.name}: replay {t_rep:.2f} s ({rep.pairs_replayed if rep else 0} of {total} pairs), "
              f"advantages {t_adv:.3f} s, update {t_upd:.2f} s")
        return t_rep + t_adv + t_upd

    step(gdpo, False)  # warm-up (allocator, kernels)
    t_g, t_m = step(gdpo, False), step(mrtpo, True)
    common = t_gen + t_score
    print(f"generation {t_gen:.2f} s and scoring {t_score:.2f} s in both steps; GDPO step {common + t_g:.2f} s, "
          f"MRTPO step {common + t_m:.2f} s at {len(chosen_pairs) / max(total, 1):.0%} replayed pairs")
    print(f"ratio {(common + t_m) / (common + t_g):.3f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
