"""What a step of the paper's recipes costs on one GPU, and where the time goes (issue 52):

    python bench/gpu_step.py                   # CUDA: toolcall-paper and ifollow-paper on Qwen2.5-1.5B's shape
    python bench/gpu_step.py --device cpu      # the CPU form: the same code on tiny-qwen2 (tests run it)

The recipes' real batches (toolcall 512 prompts x 4, ifollow 64 x 8, 1024 new tokens each) take many
minutes a step on one GPU, so each recipe is measured on a slice at the real per-sequence shapes and
the local engine's real chunk and micro-batch sizes, and the full step is extrapolated by counting
chunks and micro-batches. What is measured, all through the local engine (``LocalBackend``) and the
shared :class:`harness.training.step.Step`:

- generation: the Step's ``sample`` on one ``generate`` chunk (``GENERATE_BATCH`` = 64 sequences:
  16 toolcall prompts x 4, 8 ifollow prompts x 8) at the recipe's sampling settings; a random model
  rarely emits its end token, so every response runs to ``max_new_tokens`` (the truncated share is
  printed);
- scoring: the Step's ``score`` on those 64 responses (the verifiers under their time budget);
- replay: the leave-one-out builder on the engine's replay engine with a forced share of the chunk's
  (response, reward) pairs, whole (group, reward) blocks in a seeded order (``--share``, 20%: the
  paper saw 12-21%), as ``bench/replay_overhead.py`` forces it; then the Step's own ``replay`` at the
  share the random rewards give;
- update: the engine's ``update`` on ``mini_batches x micro_batch_size`` of those responses (one
  micro-batch per mini-batch) with seeded random advantages (the random model's rewards rarely vary,
  and an update without advantages is skipped), at the recipe's ``train_dtype`` and again in bf16;
  timers around the old-log-probability pass and the optimiser step split it into a cost per
  micro-batch and a cost per optimiser step.

Extrapolated (never measured): the full step = chunks x the chunk's generation, responses x the
scoring and the replay per response, micro-batches x the cost per micro-batch plus mini-batches x
the optimiser step. The MRTPO/GDPO step ratio at the share = (generation + scoring + replay +
update) / (generation + scoring + update); MRTPO's sampling keeps the sampling pass's hidden states,
which GDPO's would not (their cost is inside the measured generation, charged to both). The JS
memory at T = 4096, V = 151,936 comes from ``bench/js_memory.py`` on the same device.

The model is built in memory (random weights of the real shape, :mod:`gpu_common`) and speaks
through the carried SmolLM2 tokenizer (its 49,152 ids sampled, the other 102,784 suppressed; its
token counts on these prompts stand for Qwen2.5's, which are similar for English text but were not
compared), or bytes when it is absent (the prompt limit is then four times the recipe's, since a
byte tokenizer's prompts are about 3.6 times longer than a BPE's on these prompts).
Results: ``step.json`` (rewritten after each recipe) and ``step-table.md`` in ``--out`` (default
``$OUT``); ``--table step.json`` prints the table again from a run that was stopped before its end.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import math
import re
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gpu_common import (
    TOKENIZER_DIR,
    Clock,
    Results,
    environment,
    offline_tokenizer,
    out_dir,
    policy_built_in_memory,
)
from gpu_step_table import extrapolate, table

RECIPES = ("toolcall-paper", "ifollow-paper")
#: seconds a slice is expected to take on an H200, by shape (the section skips what would not fit)
NEEDS_S = {"qwen2.5-1.5b": 45.0, "qwen2.5-3b": 75.0, "tiny-qwen2": 5.0}


class Rows:
    """Where the Step's rows go (no record: the benchmark keeps only its timings)."""

    path = None

    def append_metrics(self, row: dict[str, Any]) -> None:
        pass

    def append_samples(self, rows: Any) -> None:
        pass


def synced(device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


class UpdateTimer:
    """Seconds of the update's old-log-probability pass and of its optimiser steps (timers around
    the engine's own methods; nothing else changes)."""

    def __init__(self, update: Any, device: torch.device):
        self.old = self.opt = 0.0
        self.steps = 0
        inner, start = update._old_logprobs, [0.0]

        def old_logprobs(*args: Any, **kwargs: Any) -> Any:
            t0 = synced(device)
            out = inner(*args, **kwargs)
            self.old += synced(device) - t0
            return out

        def before(*_: Any) -> None:
            start[0] = synced(device)

        def after(*_: Any) -> None:
            self.opt += synced(device) - start[0]
            self.steps += 1

        update._old_logprobs = old_logprobs
        self.hooks = [update.optimizer.register_step_pre_hook(before),
                      update.optimizer.register_step_post_hook(after)]


def timed_update(backend: Any, rollouts: list[Any], algo: Any, dtype: torch.dtype, seed: int) -> dict[str, float]:
    """The engine's update on ``rollouts`` with seeded random advantages, computing in ``dtype``."""
    update, device = backend.update, backend.device
    update.compute_dtype = dtype  # what model.train_dtype resolves to
    T = max(len(r.response_ids) for r in rollouts)
    adv = torch.randn(len(rollouts), T, generator=torch.Generator().manual_seed(seed))
    timer = UpdateTimer(update, device)
    try:
        t0 = synced(device)
        stats = update(rollouts, adv, T, algo)
        total = synced(device) - t0
    finally:
        del update._old_logprobs
        for hook in timer.hooks:
            hook.remove()
    minis = max(1, timer.steps)
    return {"seconds": total, "old_logprobs": timer.old, "optimiser": timer.opt, "mini_batches": minis,
            "per_micro_batch": (total - timer.old - timer.opt) / minis, "old_per_micro_batch": timer.old / minis,
            "per_optimiser_step": timer.opt / minis, "skipped": bool(stats.skipped),
            "tokens": sum(len(r.prompt_ids) + len(r.response_ids) for r in rollouts)}


def forced_share(backend: Any, step: Any, state: Any, share: float, seed: int) -> dict[str, Any]:
    """The leave-one-out replay of ``share`` of the batch's pairs, as whole (group, reward) blocks."""
    from harness.replay_builders import leave_one_out

    task, rollouts, rewards = step.task, state.rollouts, state.rewards
    blocks: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for j, r in enumerate(rollouts):
        ks = [k for k in range(rewards.shape[1]) if not torch.isnan(rewards[j, k])]
        for k in task.replay_contexts(r.example, r.verdicts, ks).without:
            blocks.setdefault((r.group, k), []).append((j, k))
    total = int((~torch.isnan(rewards)).sum())
    keys = list(blocks)
    order = torch.randperm(len(keys), generator=torch.Generator().manual_seed(seed)).tolist()
    wanted = [pair for i in order for pair in blocks[keys[i]]][:max(1, round(share * total))]
    chosen = torch.zeros_like(rewards, dtype=torch.bool)
    for pair in wanted:
        chosen[pair] = True
    engine = backend._engine
    before = engine.forward_tokens
    t0 = synced(backend.device)
    with torch.no_grad(), backend._rollout_phase():  # as the engine's replay runs it
        rep = leave_one_out(engine, task, backend.tokenizer, rollouts, rewards, state.group_ids, state.T, chosen)
    seconds = synced(backend.device) - t0
    return {"seconds": seconds, "pairs": rep.pairs_replayed, "pairs_total": total, "sequences": rep.sequences,
            "replayable_pairs": sum(len(b) for b in blocks.values()), "tokens": engine.forward_tokens - before,
            "sampling_pass_used": rep.sampling_hidden_used}


def measure(recipe: str, shape: str, tokenizer: Any, args: argparse.Namespace, clock: Clock) -> dict[str, Any]:
    """One recipe's slice on ``shape`` (see the module docstring)."""
    from algorithms.catalog import get_algorithm
    from harness.backends.local import LocalBackend
    from harness.backends.rollout import GENERATE_BATCH
    from harness.config import resolve
    from harness.training.batch import fit_prompts
    from harness.training.step import Step
    from tasks.data_source import load_examples
    from tasks.registry import make_task

    full = resolve(recipe)
    chunk = min(GENERATE_BATCH, full.sampling.prompts_per_step * full.sampling.group_size)
    overrides = [("model.device", args.device), ("output.credit_groups", "0"), ("backend.local.generator",
                 "transformers"), ("sampling.prompts_per_step", str(max(1, chunk // full.sampling.group_size)))]
    if args.max_new_tokens:
        overrides.append(("sampling.max_new_tokens", str(args.max_new_tokens)))
    if len(tokenizer) <= 512:  # bytes: a BPE's prompt limit in bytes (about 3.6 bytes a token on these prompts)
        overrides.append(("sampling.max_prompt_tokens", str(4 * full.sampling.max_prompt_tokens)))
    cfg = resolve(recipe, overrides)
    task = make_task(cfg.task.name, **cfg.task.options)
    algo = get_algorithm("mrtpo", warmup_steps=0)  # the replay runs at every step
    with policy_built_in_memory(shape, tokenizer, args.seed) as name:
        cfg.model.name = name
        backend = LocalBackend(cfg, task, algo)
        backend._load_policy()
    backend._start_replay()
    task.use_tokenizer(backend.tokenizer)
    device = backend.device
    examples, dropped = fit_prompts(load_examples(task, cfg.task.split, cfg.task.data_dir, None, args.seed),
                                    backend.tokenizer, cfg.sampling.max_prompt_tokens)
    step = Step(cfg, task, algo, Rows(), backend.tokenizer)
    o = cfg.optim
    sub = o.mini_batches * o.micro_batch_size  # one micro-batch per mini-batch
    clock.say(f"{recipe} on {shape}: {backend.update_info()['compute_dtype']} update, "
              f"{str(backend.rollout_dtype).removeprefix('torch.')} rollout; "
              f"{len(examples)} prompts ({dropped} over max_prompt_tokens dropped); slice {cfg.sampling.prompts_per_step}"
              f" prompts x {cfg.sampling.group_size} = one generate chunk; update slice {sub} responses")

    new_tokens = cfg.sampling.max_new_tokens  # warm-up: kernels' first calls, AdamW's state, the scoring worker
    cfg.sampling.max_new_tokens = 8
    warm = step.plan(0)
    step.take(warm, step.sample(backend, warm, examples))
    step.score(warm)
    timed_update(backend, warm.rollouts[:o.micro_batch_size], algo, backend.train_dtype, args.seed)
    cfg.sampling.max_new_tokens = new_tokens
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()

    state = step.plan(1)
    t0 = synced(device)
    step.take(state, step.sample(backend, state, examples))
    t_gen = synced(device) - t0
    lengths = [len(r.response_ids) for r in state.rollouts]
    prompts = [len(r.prompt_ids) for r in state.rollouts]
    clock.say(f"  generation: {len(lengths)} responses, mean {sum(lengths) / len(lengths):.0f} tokens "
              f"({sum(r.truncated for r in state.rollouts)} ran to max_new_tokens), prompts mean "
              f"{sum(prompts) / len(prompts):.0f} tokens: {t_gen:.2f} s")
    t0 = time.perf_counter()
    step.score(state)
    t_score = time.perf_counter() - t0
    replay = forced_share(backend, step, state, args.share, args.seed)
    clock.say(f"  scoring {t_score:.2f} s; forced replay {replay['pairs']}/{replay['pairs_total']} pairs "
              f"({replay['sequences']} sequences, {replay['tokens']} tokens): {replay['seconds']:.2f} s")
    t0 = synced(device)
    step.replay(backend, state)
    t_natural = synced(device) - t0
    step.advantages(state)
    natural = {"seconds": t_natural, "pairs": state.rep.pairs_replayed, "pairs_total": state.rep.pairs_total}
    chosen = state.rollouts[:sub]
    updates = {str(backend.train_dtype).removeprefix("torch."): timed_update(backend, chosen, algo,
                                                                             backend.train_dtype, args.seed)}
    if backend.train_dtype != torch.bfloat16:
        updates["bfloat16"] = timed_update(backend, chosen, algo, torch.bfloat16, args.seed)
    for dtype, u in updates.items():
        clock.say(f"  update ({dtype}) on {len(chosen)} responses ({u['tokens']} tokens): {u['seconds']:.2f} s = "
                  f"{u['mini_batches']} x ({u['per_micro_batch']:.3f} s forward-backward + {u['old_per_micro_batch']:.3f} "
                  f"s old log-probs per micro-batch + {u['per_optimiser_step']:.3f} s optimiser step)")
    peak = torch.cuda.max_memory_allocated() if device.type == "cuda" else None
    hidden = backend.policy.config.hidden_size
    result = {"recipe": recipe, "shape": shape, "slice_responses": len(lengths), "mean_response": sum(lengths) / len(lengths),
              "truncated": sum(r.truncated for r in state.rollouts), "mean_prompt": sum(prompts) / len(prompts),
              "generation": t_gen, "scoring": t_score, "replay_forced": replay, "replay_natural": natural,
              "updates": updates, "peak_memory": peak, "hidden_size": hidden,
              "rollout_dtype": str(backend.rollout_dtype).removeprefix("torch."),
              "recipe_train_dtype": cfg.model.train_dtype,
              "full": {"prompts": full.sampling.prompts_per_step, "group": full.sampling.group_size,
                       "mini_batches": o.mini_batches, "micro_batch_size": o.micro_batch_size, "chunk": chunk}}
    result["extrapolated"] = extrapolate(result)
    return result


def js_memory(device: str, cpu_form: bool) -> dict[str, Any]:
    """bench/js_memory.py's two paths on ``device`` (its own figures, parsed from what it prints)."""
    import js_memory as bench

    out: dict[str, Any] = {}
    size = ["--positions", "256", "--vocab", "4096"] if cpu_form else []
    for path in ("replay", "stream"):
        text = io.StringIO()
        with redirect_stdout(text):
            rc = bench.main(["--device", device, "--path", path, *size])
        printed = text.getvalue()
        print(printed, end="", flush=True)
        found = re.search(r"peak extra memory, measured \(.*\): ([\d.]+) MB", printed)
        out[path] = {"status": rc, "peak_mb": float(found.group(1)) if found else None}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--recipes", nargs="+", default=list(RECIPES))
    ap.add_argument("--shapes", nargs="+", default=None,
                    help="default: qwen2.5-1.5b then qwen2.5-3b (as time allows) on CUDA, tiny-qwen2 on CPU")
    ap.add_argument("--share", type=float, default=0.2, help="forced replayed share of the pairs (default 0.2)")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the recipe's (1024); 8 on CPU")
    ap.add_argument("--budget", type=float, default=150.0, help="seconds for all sections (default 150)")
    ap.add_argument("--tokenizer", default=str(TOKENIZER_DIR), help="tokenizer folder, or 'byte'")
    ap.add_argument("--out", default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--table", default=None, metavar="STEP_JSON",
                    help="only print the table of a step.json written earlier (a run stopped before its end)")
    args = ap.parse_args(argv)
    if args.table:
        saved = json.loads(Path(args.table).read_text(encoding="utf-8"))
        print(table(saved.get("recipes", []), saved.get("js_memory", {}), saved.get("environment", {}), args.share))
        return 0
    cpu_form = args.device == "cpu"
    if not cpu_form and not torch.cuda.is_available():
        print("gpu_step: no CUDA device; the CPU form is --device cpu", file=sys.stderr)
        return 2
    if cpu_form and args.max_new_tokens is None:
        args.max_new_tokens = 8
    shapes = args.shapes or (["tiny-qwen2"] if cpu_form else ["qwen2.5-1.5b", "qwen2.5-3b"])
    out = out_dir(args.out)
    results = Results(out / "step.json" if out else None)
    clock = Clock(results)
    env = environment()
    results.put("environment", env)
    tokenizer, what = offline_tokenizer(None if args.tokenizer == "byte" else Path(args.tokenizer))
    clock.say(f"gpu_step on {args.device} ({env['gpu'] or 'no GPU'}), torch {env['torch']}, commit "
              f"{(env['commit'].get('commit') or '?')[:9]}, tokenizer {what}, budget {args.budget:.0f} s")
    with clock.section("js-memory", 0.1 * args.budget):
        results.put("js_memory", js_memory(args.device, cpu_form))
    measured: list[dict[str, Any]] = []
    with clock.section("recipes", 0.9 * args.budget - clock.elapsed()) as sec:
        longest = 0.0  # the longest slice so far: a larger shape takes longer, the next recipe about as long
        for i, shape in enumerate(shapes):
            for recipe in args.recipes:
                sec.need(max(NEEDS_S.get(shape, 60.0), (2.0 if i and recipe == args.recipes[0] else 0.8) * longest),
                         f"{recipe} on {shape}")
                t0 = time.monotonic()
                measured.append(measure(recipe, shape, tokenizer, args, clock))
                longest = max(longest, time.monotonic() - t0)
                results.put("recipes", measured)
                if out:  # the table so far, in case the run is stopped before its end
                    (out / "step-table.md").write_text(table(measured, results.data.get("js_memory", {}), env,
                                                             args.share), encoding="utf-8")
                gc.collect()  # the engine's models and optimiser state go before the next recipe's
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
    text = table(measured, results.data.get("js_memory", {}), env, args.share)
    print(text, flush=True)
    if out:
        (out / "step-table.md").write_text(text, encoding="utf-8")
    first = [r for r in measured if r["shape"] == shapes[0]]
    ok = len(first) == len(args.recipes) and all(math.isfinite(r["generation"]) for r in first)
    clock.say(f"gpu_step: {'every recipe measured on ' + shapes[0] if ok else 'NOT every recipe measured'} "
              f"({clock.elapsed():.0f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
