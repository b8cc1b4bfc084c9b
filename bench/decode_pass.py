"""Where a decoding pass of the main job goes, and what an attention candidate would give and cost.

    .venv/bin/python bench/decode_pass.py [--model NAME] [--dtype D] [--passes 96] [--runs 3] [--relevance] [--seed 0]

Method. The rollout copy of the configured model (the embedded SmolLM2-135M by default, in the
rollout dtype, packed, with the rollout attention, as the local backend makes it) samples the main
job's batch: ``sampling.prompts_per_step`` training prompts x ``sampling.group_size`` responses
(2 x 8 = 16 rows), every row decoding ``--passes`` tokens (no end-of-turn stop, so every run does
the same passes), keeping the hidden states and logits as the main job's MRTPO steps do.

- **Breakdown** (one sampling, after a warm-up): the seconds spent in each part of
  :class:`harness.backends.decode_step.DecodeStep`'s pass, per pass, measured by wrapping the parts
  it calls (its RMS norms, the fused and single linear products, the cache update, the attention
  and the LM head) with a clock. The rest of the step (rotary embeddings, residual additions, the
  MLP's SiLU, the final norm) is the step's time less those parts; "outside the step" is the
  sampling's time less the step's (the draw, the kept hidden states and logits, the shared prefill
  of each group's prompt). The clocks add a little time of their own.
- **Candidates** (``--runs`` alternations): milliseconds per pass of the default decoding attention
  (:func:`harness.attention.grouped_matmul_attention`) and of PyTorch's fused
  ``scaled_dot_product_attention`` (grouped-query, over the filled keys) in the decoding passes
  only; the prefill and the replay keep the default. With ``--relevance``, each candidate's
  relevance floor as ``bench/relevance_floor.py`` measures it (q between the sampling logits and the
  response replayed alone under its sampling prompt, ideally 0, and the batch's mean leave-one-out
  relevance, for scale).

Run it on an otherwise idle host.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness.backends import decode_step as decode_step_module
from harness.backends.decode import decode_step_for
from harness.backends.local import LocalBackend
from harness.backends.rollout import sample
from harness.config import RunConfig
from harness.models import chat_prompt_ids
from tasks.data_source import load_examples


def fused_decoding_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: torch.Tensor, scaling: float | None = None, **kwargs: Any) -> tuple:
    """The candidate: the fused kernel over the keys the mask covers (a preallocated cache's buffers
    are longer), grouped-query aware, in the layout the decoding step expects."""
    filled = attention_mask.shape[-1]
    out = torch.nn.functional.scaled_dot_product_attention(query, key[:, :, :filled], value[:, :, :filled],
                                                           attn_mask=attention_mask, scale=scaling, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


CANDIDATES = {"grouped matmuls (default)": None, "fused sdpa in decoding": fused_decoding_attention}


class Clocks:
    """Seconds per named part, from wrapped callables."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = collections.defaultdict(float)

    def wrap(self, name: str, fn: Any) -> Any:
        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] += time.perf_counter() - t0
        return timed


def main_batch(backend: LocalBackend, seed: int) -> list[list[int]]:
    """The main job's rows: each training prompt repeated ``group_size`` times, consecutively."""
    cfg = backend.cfg
    examples = load_examples(backend.task, cfg.task.split, cfg.task.data_dir, cfg.sampling.prompts_per_step, seed)
    prompts = [chat_prompt_ids(backend.tokenizer, ex.messages) for ex in examples]
    return [p for p in prompts for _ in range(cfg.sampling.group_size)]


def sampling_seconds(backend: LocalBackend, rows: list[list[int]], passes: int, seed: int) -> float:
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    sample(backend.rollout_model, backend.tokenizer, rows, [], max_new_tokens=passes, hidden_out=[], logits_out=[],
           temperature=backend.cfg.sampling.temperature)
    return time.perf_counter() - t0


def breakdown(backend: LocalBackend, rows: list[list[int]], passes: int, seed: int) -> None:
    from harness.backends.decode import _preallocated_layer_class

    step = decode_step_for(backend.rollout_model)
    if step is None:
        print("this rollout copy decodes with the model's own forward (no DecodeStep): no breakdown")
        return
    sampling_seconds(backend, rows, passes, seed)  # warm-up: weights reordered, buffers allocated
    clocks, cache_layer, step_class = Clocks(), _preallocated_layer_class(), decode_step_module.DecodeStep
    saved = (decode_step_module._rms_norm, step.layers, step.attention, step.head, step_class.__call__,
             cache_layer.update)
    decode_step_module._rms_norm = clocks.wrap("RMS norms", saved[0])
    step.layers = [(n1, clocks.wrap("linear products", qkv), clocks.wrap("linear products", o), s, n2,
                    clocks.wrap("linear products", gu), clocks.wrap("linear products", down))
                   for n1, qkv, o, s, n2, gu, down in saved[1]]
    step.attention = clocks.wrap("attention", saved[2])
    step.head = clocks.wrap("LM head", saved[3])
    step_class.__call__ = clocks.wrap("step", saved[4])
    cache_layer.update = clocks.wrap("cache update", saved[5])
    try:
        total = sampling_seconds(backend, rows, passes, seed)
    finally:
        decode_step_module._rms_norm, step.layers, step.attention, step.head = saved[:4]
        step_class.__call__, cache_layer.update = saved[4], saved[5]
    parts = {k: v for k, v in clocks.seconds.items() if k != "step"}
    parts["rope, residuals, the MLP's SiLU, the final norm"] = clocks.seconds["step"] - sum(parts.values())
    parts["outside the step (draw, kept states, prefill)"] = total - clocks.seconds["step"]
    print(f"breakdown of one sampling, {len(rows)} rows x {passes} passes: {total / passes * 1e3:.1f} ms per pass")
    for name, seconds in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {name:<48} {seconds / passes * 1e3:6.2f} ms  {seconds / total:6.1%}")


def candidates(backend: LocalBackend, rows: list[list[int]], passes: int, runs: int, seed: int,
               relevance: bool) -> None:
    step = decode_step_for(backend.rollout_model)
    if step is None:
        print("this rollout copy decodes with the model's own forward (no DecodeStep): no candidates")
        return
    default = step.attention
    times: dict[str, list[float]] = collections.defaultdict(list)
    for name, fn in CANDIDATES.items():  # warm-up of each
        step.attention = fn or default
        sampling_seconds(backend, rows, passes, seed)
    for _ in range(runs):
        for name, fn in CANDIDATES.items():
            step.attention = fn or default
            times[name].append(sampling_seconds(backend, rows, passes, seed) / passes * 1e3)
    step.attention = default
    base = min(times[next(iter(CANDIDATES))])
    print(f"decoding attention candidates, ms per pass over {runs} alternations (the fastest against the default's):")
    for name, values in times.items():
        print(f"  {name:<28} {', '.join(f'{v:.1f}' for v in values)}  ({min(values) / base:.2f}x)")
    if not relevance:
        return
    from relevance_floor import floor_and_signal

    print("relevance floor, the sampling logits against the response replayed alone (ideally 0):")
    for name, fn in CANDIDATES.items():
        step.attention = fn or default
        try:
            alone, _, signal = floor_and_signal(backend, seed)
        finally:
            step.attention = default
        print(f"  {name:<28} q {alone:.2e}, mean relevance of the batch's pairs {signal:.4f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=None, help="model name (default: the main job's, the embedded SmolLM2-135M)")
    ap.add_argument("--dtype", default=None, help="rollout dtype (default: the run's, bf16 where the host has it)")
    ap.add_argument("--passes", type=int, default=96, help="tokens every row decodes (the main job's max_new_tokens)")
    ap.add_argument("--runs", type=int, default=3, help="alternations of the candidates")
    ap.add_argument("--relevance", action="store_true", help="also each candidate's relevance floor")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = RunConfig()
    cfg.model.name = args.model or cfg.model.name
    cfg.model.dtype = args.dtype or cfg.model.dtype
    backend = LocalBackend(cfg)
    backend._load_policy()
    info = backend.rollout_info()
    print(f"{backend.cfg.model.name}, rollout {info['dtype']}, threads {info['threads']}, attention "
          f"{backend.rollout_attention_name}")
    rows = main_batch(backend, args.seed)
    breakdown(backend, rows, args.passes, args.seed)
    candidates(backend, rows, args.passes, args.runs, args.seed, args.relevance)
    return 0


if __name__ == "__main__":
    sys.exit(main())
