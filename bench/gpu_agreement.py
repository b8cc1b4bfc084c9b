"""Issue 53, part 1: one step of every registered algorithm (the composites included) on
``tiny-random``, on the GPU and on the same machine's CPU, on the same sampled responses.

How. The task is the tests' toy task (``tests/toy_task.py``): its rewards vary within a group of
the tiny model's responses (ifollow's do not: every one of them fails every constraint alike, and no
advantage, replay or update would be compared); its verdicts carry blocks and read spans, and it has
CoRT's prompt without rubric and OPSD's teacher prompt. The CPU samples one batch (the run seed's first step, through
:meth:`harness.training.step.Step.sample` on the local engine). For each algorithm and each side (CPU
float32, the reference; the GPU in float32; the GPU in bf16, rollout and update), a fresh local
engine runs the shared Step's phases on copies of that batch: take, score, replay, advantages (step
0, MRTPO-family warm-ups off so that the replay runs), then the engine's update. Every side drops the
sampling pass's hidden states, logits and entropies first, so each recomputes P_all (and the entropy)
in its replay: every side runs the same computation. Compared with the CPU, per algorithm:

- ``adv``: the largest |difference| of the token advantages, over max(1, max |CPU advantage|);
- ``stat``: the largest |difference| of the replay's statistic (relevance q for the MRTPO family,
  the joint relevance, CoRT's and SDPO's log-probability differences, the token entropy of forking
  tokens and GTPO; NaN positions must match), absolute;
- ``loss``: |difference| of the update's loss over max(1, |CPU loss|);
- ``grad``: the update's gradient norm (before clipping) on the GPU over the CPU's.

Tolerances. float32 (:data:`FLOAT32`): 1e-4 on advantages, statistic and loss, and 1e-3 on the
gradient-norm ratio: the same arithmetic in another order. bf16: what bf16 moves on the CPU, the
same step in bf16 there against the float32 reference, times :data:`BF16_FACTOR` (3), and at least
:data:`BF16_FLOOR` (1e-2, 1e-2, 1e-3, 2e-2): the GPU's bf16 may round differently from the CPU's,
not by much more (the rule the OpenRLHF agreement uses for its bf16 gradient norm). A random
model's peaked distributions make single positions' relevance move by up to 5e-2 in bf16, which a
fixed threshold would have to allow everywhere.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any

import torch
from gpu_common import ROOT, Clock, Results, Section

sys.path.append(str(ROOT / "tests"))  # after everything else: nothing there shadows a real module
from toy_task import TOY_NAME, ToyTask, register

#: the compared figures, in the order of the tolerances
FIGURES = ("adv", "stat", "loss", "grad")
#: float32's tolerances: advantages, statistic, loss, |grad-norm ratio - 1|
FLOAT32 = (1e-4, 1e-4, 1e-4, 1e-3)
#: bf16's: BF16_FACTOR times what the CPU's bf16 moves each figure, and at least BF16_FLOOR
BF16_FACTOR = 3.0
BF16_FLOOR = (1e-2, 1e-2, 1e-3, 2e-2)
#: the batch: prompts x responses, tokens
BATCH = {"prompts_per_step": 4, "group_size": 4, "max_new_tokens": 16}


def config(device: str, dtype: str, algo: str) -> Any:
    from harness.config import RunConfig

    cfg = RunConfig()
    cfg.task.name, cfg.algo.name, cfg.model.name = TOY_NAME, algo, "tiny-random"
    cfg.model.device, cfg.model.dtype, cfg.model.train_dtype = device, dtype, dtype
    cfg.backend.local.generator = "transformers"
    # one thread: the tiny model gains nothing from more, and the automatic choice samples the CPUs'
    # load for half a second per engine built
    cfg.backend.local.threads = 1
    cfg.output.credit_groups = 0
    for key, value in BATCH.items():
        setattr(cfg.sampling, key, value)
    return cfg


def algorithm(name: str) -> Any:
    """``name`` with its replay on at step 0 (an MRTPO-family warm-up would leave beta at 0, and
    CoRT's ramp its weighting)."""
    from algorithms.catalog import get_algorithm, resolve

    fields = {f.name for f in dataclasses.fields(resolve(name).config_class)}
    return get_algorithm(name, **{k: 0 for k in ("warmup_steps", "ramp_steps") if k in fields})


def engine_and_step(cfg: Any, task: Any, name: str) -> tuple[Any, Any, Any]:
    from harness.backends.local import LocalBackend
    from harness.training.step import Step

    algo = algorithm(name)
    backend = LocalBackend(cfg, task, algo)
    backend._load_policy()
    backend._start_replay()
    task.use_tokenizer(backend.tokenizer)
    return backend, Step(cfg, task, algo, None, backend.tokenizer), algo


def sample_batch(task: Any, seed: int = 0) -> list[Any]:
    """The CPU's batch: the Step's own sampling on the CPU engine."""
    from harness.training.batch import fit_prompts
    from tasks.data_source import load_examples

    cfg = config("cpu", "float32", "mrtpo")
    backend, step, _ = engine_and_step(cfg, task, "mrtpo")
    examples, _ = fit_prompts(load_examples(task, "train", None, None, seed), backend.tokenizer,
                              cfg.sampling.max_prompt_tokens)
    return step.sample(backend, step.plan(0), examples)


def run_step(cfg: Any, task: Any, name: str, batch: list[Any]) -> dict[str, Any]:
    """The Step's phases and the engine's update on copies of ``batch``; what is compared."""
    backend, step, algo = engine_and_step(cfg, task, name)
    state = step.plan(0)
    step.take(state, [dataclasses.replace(r, hidden=None, logits=None, entropy=None, verdicts=[]) for r in batch])
    step.score(state)
    step.replay(backend, state)
    step.advantages(state)
    upd = backend.update(state.rollouts, state.result.tokens, state.T, algo, state.rep.teacher_hidden)
    rep = state.rep
    stat = next((s for s in (rep.relevance, rep.joint_relevance, rep.logprob_delta, rep.token_entropy)
                 if s is not None), None)
    return {"adv": state.result.tokens.detach().float().cpu(), "stat": None if stat is None else stat.float().cpu(),
            "loss": float(upd.loss), "grad": float(upd.grad_norm), "skipped": bool(upd.skipped),
            "pairs": int(rep.pairs_replayed)}


def largest_difference(a: torch.Tensor | None, b: torch.Tensor | None) -> float | None:
    """max |a - b| where both are defined; inf where one is NaN and the other not; None without both."""
    if a is None or b is None:
        return None
    if a.shape != b.shape or bool((torch.isnan(a) != torch.isnan(b)).any()):
        return math.inf
    keep = ~torch.isnan(a)
    return float((a[keep] - b[keep]).abs().max()) if bool(keep.any()) else 0.0


def deviation(ref: dict[str, Any], other: dict[str, Any]) -> dict[str, float | None]:
    """How far ``other`` is from the reference, figure by figure (see the module docstring)."""
    adv = largest_difference(ref["adv"], other["adv"])
    grad = other["grad"] / ref["grad"] if ref["grad"] > 0 else (1.0 if other["grad"] == 0 else math.inf)
    return {"adv": adv / max(1.0, float(ref["adv"].abs().max())) if adv is not None else math.inf,
            "stat": largest_difference(ref["stat"], other["stat"]),
            "loss": abs(ref["loss"] - other["loss"]) / max(1.0, abs(ref["loss"])), "grad": abs(grad - 1.0),
            "grad_ratio": grad}


def tolerances(dtype: str, cpu_bf16: dict[str, float | None] | None) -> tuple[float, ...]:
    if dtype == "float32" or cpu_bf16 is None:
        return FLOAT32
    return tuple(max(floor, BF16_FACTOR * (cpu_bf16[k] or 0.0)) for k, floor in zip(FIGURES, BF16_FLOOR))


def compare(ref: dict[str, Any], other: dict[str, Any], tol: tuple[float, ...]) -> dict[str, Any]:
    dev = deviation(ref, other)
    ok = ref["skipped"] == other["skipped"] and all(dev[k] is None or dev[k] <= t for k, t in zip(FIGURES, tol))
    return {**dev, "tolerance": tol, "skipped": other["skipped"], "pairs": other["pairs"], "ok": ok}


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.1e}"


def agreement(clock: Clock, sec: Section, results: Results, device: str, names: list[str] | None = None) -> bool:
    """The section: every algorithm on ``device`` against the CPU (float32, then bf16 where ``device``
    computes it); a table line per algorithm as it finishes. True when every one agrees."""
    from algorithms.catalog import list_algorithms

    register()
    task = ToyTask()
    batch = sample_batch(task)
    lengths = [len(r.response_ids) for r in batch]
    clock.say(f"agreement: the CPU sampled {len(batch)} responses of {min(lengths)}-{max(lengths)} tokens; each "
              f"algorithm's step on CPU float32 (the reference), CPU bf16 (what bf16 moves), {device} float32 and "
              f"{device} bf16; tolerances (adv, stat, loss, |grad ratio - 1|): float32 {FLOAT32}, bf16 "
              f"{BF16_FACTOR:g} x the CPU bf16 deviation, at least {BF16_FLOOR}")
    clock.say(f"{'algorithm':<22} {'dtype':<8} {'adv':>8} {'stat':>8} {'loss':>8} {'grad':>8} {'pairs':>5}  verdict")
    rows, all_ok = [], True
    for name in names or list_algorithms():
        sec.need(4, f"the agreement of {name} and the algorithms after it")
        ref = run_step(config("cpu", "float32", name), task, name, batch)
        cpu_bf16 = deviation(ref, run_step(config("cpu", "bfloat16", name), task, name, batch))
        for dtype in ("float32", "bfloat16"):
            tol = tolerances(dtype, cpu_bf16)
            row = {"algorithm": name, "dtype": dtype, "cpu_bf16": cpu_bf16,
                   **compare(ref, run_step(config(device, dtype, name), task, name, batch), tol)}
            rows.append(row)
            all_ok &= row["ok"]
            grad = f"{row['grad_ratio']:.5f}"
            clock.say(f"{name:<22} {dtype:<8} {fmt(row['adv']):>8} {fmt(row['stat']):>8} {fmt(row['loss']):>8} "
                      f"{grad:>8} {row['pairs']:>5}  {'ok' if row['ok'] else 'OUTSIDE TOLERANCE'}"
                      + (f" (bf16 tolerance {', '.join(f'{t:.1e}' for t in tol)})" if dtype != "float32" else "")
                      + ("  (no gradient: update skipped)" if row["skipped"] else ""))
        results.put("agreement", rows)
    clock.say(f"agreement: {sum(r['ok'] for r in rows)} of {len(rows)} within tolerance")
    return all_ok
