"""How much longer an MRTPO step takes than a GDPO step, on one fixed batch, in one process.

    .venv/bin/python bench/replay_overhead.py [--model smollm2-135m] [--task ifollow]
        [--prompts 2] [--group 8] [--max-new-tokens 96] [--shares 0.2 1.0] [--repeats 3]
        [--selection blocks|pairs] [--threads 0] [--dtype auto] [--train-dtype auto]
        [--replay-batching padded|exact] [--replay-head model|float32|auto]

Method. The default main job's batch (ifollow's generated prompts, G responses each, sampled with
the rollout model in bf16 where native) is fixed. Its generation and scoring times are
measured per step (GDPO's sampling keeps nothing; MRTPO's keeps the sampling pass for P_all, see
``build_batch``). Then, from the same initial weights each time:

- GDPO step   = generation + scoring + GDPO advantages + update;
- MRTPO step  = generation + scoring + replay + MRTPO advantages + update,

where the replay covers a controlled share of the batch's (response, reward) pairs. In training a
pair is replayed when its reward varies within the group, so replayed pairs come in blocks: one
reward for every response of one group (the blocks share that reward's P_\\k). The benchmark
therefore takes whole (group, reward) blocks in a seeded random order and completes the requested
size with part of one more block (``--selection blocks``); ``--selection pairs`` takes single pairs
at random instead, scattering them over many contexts (a worst case for context sharing). The
paper observed 12-21% over training, so the headline is at 20%; 100% is the worst case. For each share the
script prints the step ratio and the replay's share of the MRTPO step, and once the speed-up of
the prefix-shared, batched replay over a naive one (every context replayed in full, one sequence
per forward pass, P_all recomputed instead of taken from sampling).

Timing. Every phase is timed ``--repeats`` times and its minimum kept; the two samplings and the
two updates alternate, so load changes hit both. The ratio is printed twice: from each step's own
timings, and pooled: the update is the same computation in both steps (same tokens and shapes,
only the advantage values differ), so both take the fastest update timing; the two samplings draw
the same tokens by the same computation, so both take the fastest sampling timing, and MRTPO's
adds the time its sampler spent keeping the sampling pass (timed inside the sampler's hooks: about
0.05 s here, where two whole samplings differ by up to 0.9 s from run to run; what the hooks'
presence costs outside their bodies, e.g. a few microseconds per hooked module call, is not
charged, and the rest of the measured difference is printed so that a real cost would show). The pooled ratio is
the headline: the last line is ``ratio <value>`` at the first share (20% by default).

The exact replay's floor. For each share the replay is run once more, untimed, under
``torch.utils.flop_counter.FlopCounterMode``, which counts the FLOPs of its matrix products (the decoder's
linear layers and attention, and the LM head). The fastest bf16 matrix-product rate this process
reaches at the model's own shapes (:func:`gemm_rate`: each decoder projection and the head, at the
replay's thread count) gives the seconds those products take at the very least; an exact replay
cannot cost less, whatever else is made faster. The script prints them beside the measured replay.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from algorithms import get_algorithm
from harness.backends.local import LocalBackend
from harness.backends.rollout import rollouts_for
from harness.config import RunConfig
from harness.replay import ReplayEngine
from harness.replay_builders import ReplayResult, leave_one_out
from harness.training.batch import batch_tensors
from tasks.data_source import load_examples


def build_batch(backend: LocalBackend, prompts: int, seed: int, repeats: int):
    """The fixed batch, sampled from one seed as GDPO samples (nothing kept) and as MRTPO samples
    (the sampling pass's hidden states and, within budget, logits kept for P_all), alternately,
    ``repeats`` times each (the minimum time is kept, and the minimum time spent keeping, timed
    inside the sampler). Every sampling draws the same tokens."""
    cfg = backend.cfg
    examples = load_examples(backend.task, cfg.task.split, cfg.task.data_dir, prompts, seed)
    times, runs, t_keep = [float("inf"), float("inf")], [None, None], float("inf")
    for _ in range(repeats):
        for i, keep in enumerate((False, True)):
            torch.manual_seed(seed)
            cost: dict[str, float] = {}
            t0 = time.perf_counter()
            with backend._rollout_phase():  # the rollout attention, as the backend samples
                runs[i] = rollouts_for(backend.rollout_model, backend.tokenizer, examples, cfg.sampling.group_size,
                                       backend.eos, cfg.sampling, cfg.sampling.max_prompt_tokens, keep_hidden=keep,
                                       logits_budget=cfg.backend.local.sampling_logits_mb << 20, keep_cost=cost)
            times[i] = min(times[i], time.perf_counter() - t0)
            if keep:
                t_keep = min(t_keep, cost["seconds"])
    plain, rollouts = runs
    if [r.response_ids for r in plain] != [r.response_ids for r in rollouts]:
        raise RuntimeError("the two samplings drew different tokens; the comparison would not be on one batch")
    t0 = time.perf_counter()
    for r in rollouts:
        r.verdicts = backend.task.score(r.example, r.text)
    t_score = time.perf_counter() - t0
    rewards, group_ids, mask, T = batch_tensors(rollouts)
    return rollouts, rewards, group_ids, mask, T, times[0], times[1], t_keep, t_score


def replayable_pairs(backend: LocalBackend, rollouts, rewards) -> list[tuple[int, int]]:
    out = []
    for j, r in enumerate(rollouts):
        ks = [k for k in range(rewards.shape[1]) if not torch.isnan(rewards[j, k])]
        ctx = backend.task.replay_contexts(r.example, r.verdicts, ks)
        out += [(j, k) for k in ctx.without]
    return out


def choose_pairs(pairs: list[tuple[int, int]], rollouts, n: int, selection: str,
                 gen: torch.Generator) -> list[tuple[int, int]]:
    """``n`` of the replayable pairs: single pairs at random, or whole (group, reward) blocks in a
    random order, the last one cut to size."""
    if selection == "pairs":
        return [pairs[i] for i in torch.randperm(len(pairs), generator=gen)[:n].tolist()]
    blocks: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for j, k in pairs:
        blocks.setdefault((rollouts[j].group, k), []).append((j, k))
    keys = list(blocks)
    ordered = [pair for i in torch.randperm(len(keys), generator=gen).tolist() for pair in blocks[keys[i]]]
    return ordered[:n]


def timed_update(backend: LocalBackend, state, opt_state, rollouts, adv, T, algo) -> float:
    """One update from the same initial weights and optimiser state, plus the rollout copy's sync."""
    backend.policy.load_state_dict(state)
    backend.update.optimizer.load_state_dict(opt_state)
    t0 = time.perf_counter()
    backend.update(rollouts, adv, T, algo)
    backend.sync()
    return time.perf_counter() - t0


def gemm_rate(model, rows: int = 768, seconds: float = 0.5) -> tuple[float, str]:
    """The fastest GFLOP/s of ``rows`` positions through one of the model's own linear layers (each
    distinct weight shape once: the decoder's projections and the LM head), in the model's dtype at
    torch's current thread count; and the shape that reached it."""
    shapes = {tuple(m.weight.shape): m.weight for m in model.modules() if isinstance(m, nn.Linear)}
    best, where = 0.0, ""
    with torch.inference_mode():
        for (out_f, in_f), weight in shapes.items():
            x = torch.randn(rows, in_f, dtype=weight.dtype, device=weight.device)
            torch.nn.functional.linear(x, weight)  # untimed: first-call setup
            n, t0 = 0, time.perf_counter()
            while n < 3 or time.perf_counter() - t0 < seconds:
                torch.nn.functional.linear(x, weight)
                n += 1
            rate = 2.0 * rows * in_f * out_f * n / (time.perf_counter() - t0) / 1e9
            if rate > best:
                best, where = rate, f"[{rows}, {in_f}] x [{in_f}, {out_f}]"
    return best, where


def counted_flops(backend: LocalBackend, engine: ReplayEngine, rollouts, rewards, group_ids, T, chosen) -> float:
    """The matrix-product FLOPs of one replay of ``chosen`` (untimed: counting slows it). The engine's
    token counters are left as the timed repeats set them."""
    counters = engine.forward_tokens, engine.padded_tokens
    with FlopCounterMode(display=False) as counter, backend._rollout_phase():
        leave_one_out(engine, backend.task, backend.tokenizer, rollouts, rewards, group_ids, T, chosen)
    engine.forward_tokens, engine.padded_tokens = counters
    return float(counter.get_total_flops())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="ifollow")
    ap.add_argument("--prompts", type=int, default=None, help="prompts in the batch (default: the main job's)")
    ap.add_argument("--group", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--shares", type=float, nargs="+", default=[0.2, 0.5, 1.0],
                    help="replayed shares of the (response, reward) pairs: 20%% (the paper's setting), about 50%% "
                         "(what the main job replays on the generated instruction-following prompts), all")
    ap.add_argument("--replay-batching", default="padded", choices=["exact", "padded"],
                    help="backend.local.replay_batching")
    ap.add_argument("--replay-head", default=None, choices=["auto", "float32", "model"],
                    help="backend.local.replay_head (default: the configuration's, model: the head in the rollout "
                         "dtype; float32, or auto: float32 below a float32 rollout)")
    ap.add_argument("--dtype", default="auto", help="rollout/replay dtype (auto: bf16 where the CPU has it natively; "
                                                    "float32 reproduces a host without native bf16)")
    ap.add_argument("--train-dtype", default="auto", choices=["auto", "bfloat16", "float32"],
                    help="the update's compute dtype, model.train_dtype (auto: bf16 mixed precision where native)")
    ap.add_argument("--selection", choices=["blocks", "pairs"], default="blocks",
                    help="replayed pairs as whole (group, reward) blocks, like training, or scattered single pairs")
    ap.add_argument("--repeats", type=int, default=3, help="timings per measurement (the minimum is kept; the "
                    "GDPO and MRTPO updates are timed alternately so that load changes hit both)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: the backend's policy, as in the main "
                    "job: all cores when they are idle, 1 when other work runs; 1: steadier timings on a shared machine)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    cfg = RunConfig()
    cfg.model.name, cfg.task.name, cfg.model.dtype = args.model, args.task, args.dtype
    cfg.model.train_dtype = args.train_dtype
    cfg.backend.local.replay_batching = args.replay_batching
    if args.replay_head is not None:
        cfg.backend.local.replay_head = args.replay_head
    cfg.sampling.prompts_per_step = args.prompts or cfg.sampling.prompts_per_step
    cfg.sampling.group_size = args.group or cfg.sampling.group_size
    cfg.sampling.max_new_tokens = args.max_new_tokens or cfg.sampling.max_new_tokens
    cfg.backend.local.threads = args.threads
    backend = LocalBackend(cfg)
    backend._load_policy()
    rollouts, rewards, group_ids, mask, T, t_gen_g, t_gen_m, t_keep, t_score = build_batch(
        backend, cfg.sampling.prompts_per_step, args.seed, args.repeats)
    pairs = replayable_pairs(backend, rollouts, rewards)
    total_pairs = int((~torch.isnan(rewards)).sum())
    info = backend.rollout_info()
    host = "bf16-native" if info["host_native_bf16"] else "without native bf16 (AVX2-class)"
    print(f"host {host}; rollout {info['dtype']}, attention {info['attention']}, replay batching "
          f"{info['replay_batching']}, replay head {'float32' if backend.replay_head_float32() else 'model dtype'}, "
          f"{'shared with' if info['shared_with_training'] else 'separate from'} the training copy")
    print(f"model {args.model} ({backend.rollout_dtype} rollout/replay, {backend.train_dtype} update), "
          f"task {args.task}, {len(rollouts)} responses, mean length {mask.sum(1).float().mean():.1f} tokens, "
          f"{total_pairs} (response, reward) pairs, {len(pairs)} replayable; threads {torch.get_num_threads()}")
    print(f"generation {t_gen_g:.2f} s for GDPO, {t_gen_m:.2f} s for MRTPO (sampling pass kept: hidden states"
          f"{', logits' if rollouts[0].logits is not None else ''}; keeping them took {t_keep:.3f} s inside the "
          f"sampler, leaving {t_gen_m - t_gen_g - t_keep:+.2f} s of the difference to timing noise or to costs "
          f"outside the hooks); scoring {t_score:.3f} s (both steps); attention {info['attention']}")

    state = copy.deepcopy(backend.policy.state_dict())
    opt_state = copy.deepcopy(backend.update.optimizer.state_dict())
    gdpo = get_algorithm("gdpo")
    mrtpo = get_algorithm("mrtpo", warmup_steps=0)
    adv_g = gdpo.advantages(ReplayResult.nothing_replayed(rewards).to_batch(rewards, group_ids, mask, 0)).tokens

    gen = torch.Generator().manual_seed(args.seed)
    engine = ReplayEngine.from_config(backend.rollout_model, dataclasses.replace(cfg.replay, share_prefix=True),
                                      backend.pad_id, head_float32=backend.replay_head_float32(),
                                      exact_batches=backend.exact_replay_batches())
    updates: list[float] = []  # every update timing, both algorithms (the same computation)
    results = []
    for share in args.shares:
        n = max(1, round(share * total_pairs)) if pairs else 0
        n = min(n, len(pairs))
        chosen = torch.zeros_like(rewards, dtype=torch.bool)
        for pair in choose_pairs(pairs, rollouts, n, args.selection, gen):
            chosen[pair] = True
        t_rep = float("inf")
        engine.forward_tokens = engine.padded_tokens = 0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            with backend._rollout_phase():
                res = leave_one_out(engine, backend.task, backend.tokenizer, rollouts, rewards, group_ids, T, chosen)
            t_rep = min(t_rep, time.perf_counter() - t0)
        t0 = time.perf_counter()
        adv_m = mrtpo.advantages(res.to_batch(rewards, group_ids, mask, 0)).tokens
        t_adv = time.perf_counter() - t0
        t_upd = t_upd_m = float("inf")
        for _ in range(args.repeats):
            t_upd = min(t_upd, timed_update(backend, state, opt_state, rollouts, adv_g, T, gdpo))
            t_upd_m = min(t_upd_m, timed_update(backend, state, opt_state, rollouts, adv_m, T, mrtpo))
        updates += [t_upd, t_upd_m]
        gdpo_step = t_gen_g + t_score + t_upd
        mrtpo_step = t_gen_m + t_score + t_rep + t_adv + t_upd_m
        results.append((res, t_rep, t_adv, counted_flops(backend, engine, rollouts, rewards, group_ids, T, chosen)))
        print(f"share {res.pairs_replayed / total_pairs:.1%} ({res.pairs_replayed}/{total_pairs} pairs, "
              f"{res.sequences} sequences), each step's own timings: GDPO step {gdpo_step:.2f} s (update "
              f"{t_upd:.2f} s), MRTPO step {mrtpo_step:.2f} s (replay {t_rep:.2f} s, update {t_upd_m:.2f} s), "
              f"ratio {mrtpo_step / gdpo_step:.3f}")
        if share == args.shares[-1]:
            naive = ReplayEngine.from_config(backend.rollout_model,  # one sequence a pass, nothing shared
                                             dataclasses.replace(cfg.replay, batch_size=1, share_prefix=False),
                                             backend.pad_id)
            kept = [r.hidden for r in rollouts]
            for r in rollouts:  # naive: P_all recomputed too
                r.hidden = None
            t0 = time.perf_counter()
            leave_one_out(naive, backend.task, backend.tokenizer, rollouts, rewards, group_ids, T, chosen)
            t_naive = time.perf_counter() - t0
            for r, h in zip(rollouts, kept):
                r.hidden = h
            print(f"prefix-shared batched replay {t_rep:.2f} s vs naive {t_naive:.2f} s: "
                  f"speed-up {t_naive / t_rep:.2f}x (tokens through the model: "
                  f"{engine.forward_tokens // args.repeats} vs {naive.forward_tokens}; padding computed alongside the "
                  f"shared replay's response rows: {engine.padded_tokens // args.repeats})")
    # The headline pools what both steps compute identically, so that timing noise in those parts
    # is not read as MRTPO's cost: the update (same tokens and shapes; only the advantage values
    # differ) takes the fastest of all update timings, and the sampling (the same tokens drawn by
    # the same computation) the fastest of all sampling timings, MRTPO's plus the time its sampler
    # spent keeping the sampling pass (timed inside the sampler).
    t_upd, t_gen = min(updates), min(t_gen_g, t_gen_m)
    gdpo_step = t_gen + t_score + t_upd
    rate, shape = gemm_rate(backend.rollout_model)
    for res, t_rep, _, flops in results:
        floor = flops / (rate * 1e9)
        print(f"share {res.pairs_replayed / total_pairs:.1%}, the exact replay's floor: {flops / 1e9:.0f} GFLOP of "
              f"matrix products (FlopCounterMode) at {rate:.0f} GFLOP/s, the fastest {backend.rollout_dtype} product "
              f"rate measured here ({shape}, {torch.get_num_threads()} threads), take {floor:.2f} s = "
              f"{floor / t_rep:.0%} of the measured replay ({t_rep:.2f} s)")
    ratios = []
    for share, (res, t_rep, t_adv, _) in zip(args.shares, results):
        mrtpo_step = gdpo_step + t_keep + t_rep + t_adv
        ratios.append(mrtpo_step / gdpo_step)
        print(f"share {res.pairs_replayed / total_pairs:.1%}, pooled: GDPO step {gdpo_step:.2f} s (generation "
              f"{t_gen:.2f}, update {t_upd:.2f}), MRTPO step {mrtpo_step:.2f} s (+ keeping the sampling pass "
              f"{t_keep:.2f}, replay {t_rep:.2f} = {t_rep / mrtpo_step:.1%} of the step, advantages {t_adv:.3f}), "
              f"ratio {ratios[-1]:.3f}")
    print(f"host {host}, rollout {info['dtype']}: ratio at {args.shares[0]:.0%} {ratios[0]:.3f}"
          + "".join(f", at {s:.0%} {r:.3f}" for s, r in zip(args.shares[1:], ratios[1:])))
    print(f"ratio {ratios[0]:.3f}")


if __name__ == "__main__":
    main()
