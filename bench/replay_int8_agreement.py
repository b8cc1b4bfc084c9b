"""An int8 replay against the exact one: how far its relevance moves, and what its products cost.

    .venv/bin/python bench/replay_int8_agreement.py [--model smollm2-135m] [--threads 1]
        [--prompts 2] [--group 8] [--max-new-tokens 96] [--speed-rows 768]

A candidate of issue 37 (the replay at half its cost), kept here as measured, not as a mode: the
replay's linear layers run as int8 matrix products (``torch._int_mm``, VNNI where the CPU has it),
with one scale per output channel of each weight and one per token of each activation, computed at
every call. On the overhead benchmark's fixed batch (``replay_overhead.build_batch``: the main job's
configuration, seed 0, or the next seed whose batch has a pair, up to ``--seed-tries``) and training's pair rule (the pairs whose reward varies in its group), it
prints per reward the Pearson and Spearman correlation of the relevance q with the exact replay's,
and the largest absolute difference of MRTPO's final token advantages, for:

- the exact replay with P_all replayed too instead of taken from sampling (what bf16 alone moves:
  the scale the others are read against);
- int8 decoder layers, P_all replayed the same way;
- int8 decoder layers and LM head.

Then, unless ``--speed-rows 0``, each of the model's layer shapes at that many rows (a replay batch:
8 response rows of 96 positions) as a bf16 product, an int8 product, and the whole int8 layer
(quantise the activations, product, rescale), best of 7, interleaved: ratios to bf16. Time nothing
here while other work shares the CPUs; the agreement figures do not depend on it.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from replay_overhead import build_batch  # noqa: E402

from algorithms import get_algorithm  # noqa: E402
from harness.backends.local import LocalBackend  # noqa: E402
from harness.config import RunConfig  # noqa: E402
from harness.replay import ReplayEngine  # noqa: E402
from harness.replay_builders import leave_one_out  # noqa: E402

MIN_ROWS = 32  # torch._int_mm's CPU kernel wants more rows than a single decoding step has


def row_quantised(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 rows of ``x`` and their scales (max |x| of the row maps to 127)."""
    scale = x.abs().amax(1, keepdim=True).clamp_min(1e-8) / 127
    return torch.round(x / scale).to(torch.int8), scale


class Int8Linear(nn.Module):
    """``lin`` with int8 weights (a scale per output channel) and int8 activations (a scale per token)."""

    def __init__(self, lin: nn.Linear):
        super().__init__()
        q, scale = row_quantised(lin.weight.detach().float())
        self.weight_t, self.weight_scale = q.t().contiguous(), scale.t()
        self.bias = None if lin.bias is None else lin.bias.detach().float()
        self.weight = lin.weight  # its shape sizes the replay's statistic chunks

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, x.shape[-1]).float()
        q, scale = row_quantised(rows)
        n = q.shape[0]
        if n < MIN_ROWS:
            q = torch.cat([q, q.new_zeros(MIN_ROWS - n, q.shape[1])])
        y = torch._int_mm(q, self.weight_t)[:n].float() * scale * self.weight_scale
        if self.bias is not None:
            y = y + self.bias
        return y.to(x.dtype).reshape(*x.shape[:-1], -1)


def int8_copy(model: nn.Module, head: bool) -> nn.Module:
    out = copy.deepcopy(model)
    head_module = out.get_output_embeddings()
    for module in list(out.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and (head or child is not head_module):
                setattr(module, name, Int8Linear(child))
    return out


def correlations(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    def pearson(x, y):
        x, y = x - x.mean(), y - y.mean()
        return float((x * y).sum() / (x.norm() * y.norm()))

    def ranks(x):
        r = torch.empty_like(x)
        r[x.argsort()] = torch.arange(len(x), dtype=x.dtype)
        return r

    return pearson(a, b), pearson(ranks(a), ranks(b))


def speed(model: nn.Module, rows: int) -> None:
    shapes = {tuple(m.weight.shape): m.weight for m in model.modules() if isinstance(m, nn.Linear)}
    for (n_out, n_in), weight in shapes.items():
        x = torch.randn(rows, n_in, dtype=weight.dtype)
        q_w, s_w = row_quantised(weight.detach().float())
        q_wt, s_w = q_w.t().contiguous(), s_w.t()
        q_x, _ = row_quantised(x.float())

        def int8_layer(x=x, q_wt=q_wt, s_w=s_w):
            q, scale = row_quantised(x.float())
            return (torch._int_mm(q, q_wt).float() * scale * s_w).to(x.dtype)

        best = {"bf16": float("inf"), "product": float("inf"), "layer": float("inf")}
        runs = {"bf16": lambda: torch.nn.functional.linear(x, weight),
                "product": lambda: torch._int_mm(q_x, q_wt),
                "layer": int8_layer}
        for fn in runs.values():
            fn()  # untimed: first-call setup
        for _ in range(7):
            for name, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t0)
        gflops = 2 * rows * n_in * n_out / best["bf16"] / 1e9
        print(f"[{rows}, {n_in}] x [{n_in}, {n_out}]: {weight.dtype} {best['bf16'] * 1e3:.2f} ms ({gflops:.0f} GFLOP/s); "
              f"int8 product {best['product'] / best['bf16']:.2f}x of it; int8 layer (quantise, product, rescale) "
              f"{best['layer'] / best['bf16']:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=None)
    ap.add_argument("--group", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--speed-rows", type=int, default=768, help="rows of the timed products (0: no timing)")
    ap.add_argument("--seed", type=int, default=0, help="the batch's sampling seed")
    ap.add_argument("--seed-tries", type=int, default=8,
                    help="where no reward varies in any group of the batch (no pair to replay), the next seeds tried")
    args = ap.parse_args()

    cfg = RunConfig()
    cfg.model.name = args.model
    cfg.backend.local.threads = args.threads
    cfg.sampling.prompts_per_step = args.prompts or cfg.sampling.prompts_per_step
    cfg.sampling.group_size = args.group or cfg.sampling.group_size
    cfg.sampling.max_new_tokens = args.max_new_tokens or cfg.sampling.max_new_tokens
    backend = LocalBackend(cfg)
    backend._load_policy()
    mrtpo = get_algorithm("mrtpo", warmup_steps=0)

    def replay(model: nn.Module, p_all_replayed: bool):
        kept = [(r.hidden, r.logits) for r in rollouts]
        if p_all_replayed:
            for r in rollouts:
                r.hidden, r.logits = None, None
        engine = ReplayEngine.from_config(model, dataclasses.replace(backend.cfg.replay, share_prefix=True),
                                          backend.pad_id, head_float32=backend.replay_head_float32(),
                                          exact_batches=backend.exact_replay_batches())
        with backend._rollout_phase():
            res = leave_one_out(engine, backend.task, backend.tokenizer, rollouts, rewards, group_ids, T)
        for r, (hidden, logits) in zip(rollouts, kept):
            r.hidden, r.logits = hidden, logits
        return res, mrtpo.advantages(res.to_batch(rewards, group_ids, mask, 0)).tokens

    for seed in range(args.seed, args.seed + max(1, args.seed_tries)):
        rollouts, rewards, group_ids, mask, T, *_ = build_batch(backend, cfg.sampling.prompts_per_step, seed, 1)
        exact, adv_exact = replay(backend.rollout_model, False)
        if exact.pairs_replayed:
            break
    print(f"exact replay: {exact.pairs_replayed} pairs replayed; largest |advantage| {adv_exact.abs().max():.3f} "
          f"(batch seed {seed})")
    variants = {"exact, P_all replayed too (what bf16 moves)": (backend.rollout_model, True),
                "int8 decoder, P_all replayed the same way": (int8_copy(backend.rollout_model, False), True),
                "int8 decoder and head, P_all replayed the same way": (int8_copy(backend.rollout_model, True), True)}
    for label, (model, p_all_replayed) in variants.items():
        res, adv = replay(model, p_all_replayed)
        parts = []
        for k in range(rewards.shape[1]):
            a, b = exact.relevance[:, k], res.relevance[:, k]
            ok = ~torch.isnan(a) & ~torch.isnan(b)
            if ok.sum() >= 3:
                pearson, spearman = correlations(a[ok], b[ok])
                parts.append(f"reward {k} ({int(ok.sum())} tokens): Pearson {pearson:.4f}, Spearman {spearman:.4f}")
        print(f"{label}: " + "; ".join(parts) + f"; max |advantage difference| {(adv - adv_exact).abs().max():.4f}")
    if args.speed_rows:
        speed(backend.rollout_model, args.speed_rows)


if __name__ == "__main__":
    main()
