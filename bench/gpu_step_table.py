"""``bench/gpu_step.py``'s arithmetic and its table: the full step extrapolated from a measured slice
(:func:`extrapolate`, by counting the engine's chunks and micro-batches), and the Markdown that goes
into ``bench/README.md`` (:func:`table`), measured and extrapolated figures in separate tables."""

from __future__ import annotations

import math
from typing import Any

GB = 1e9


def extrapolate(r: dict[str, Any]) -> dict[str, Any]:
    """The full step of ``r["full"]``'s batch from the slice ``r`` (seconds; see gpu_step.py)."""
    f = r["full"]
    responses = f["prompts"] * f["group"]
    scale = responses / r["slice_responses"]
    chunks = math.ceil(responses / f["chunk"])
    per_mini = math.ceil(responses / f["mini_batches"])
    micro_batches = f["mini_batches"] * math.ceil(per_mini / f["micro_batch_size"])
    old_pass = f["mini_batches"] > 1  # one mini-batch takes the detached current log-probabilities
    updates = {dtype: micro_batches * (u["per_micro_batch"] + (u["old_per_micro_batch"] if old_pass else 0.0))
               + f["mini_batches"] * u["per_optimiser_step"] for dtype, u in r["updates"].items()}
    generation, scoring = chunks * r["generation"], r["scoring"] * scale
    replay = r["replay_forced"]["seconds"] * scale
    steps = {}
    for dtype, update in updates.items():
        gdpo = generation + scoring + update
        steps[dtype] = {"update": update, "gdpo_step": gdpo, "mrtpo_step": gdpo + replay,
                        "ratio": (gdpo + replay) / gdpo if gdpo > 0 else math.nan}
    return {"responses": responses, "chunks": chunks, "micro_batches": micro_batches,
            "mini_batches": f["mini_batches"], "generation": generation, "scoring": scoring, "replay": replay,
            "steps": steps,
            # MRTPO's sampling keeps [T, H] bf16 hidden states per response until the replay
            "kept_hidden_gb": responses * r["mean_response"] * r["hidden_size"] * 2 / GB}


def rates(r: dict[str, Any]) -> tuple[float, float]:
    """(generated tokens per second, replay tokens per second) of the slice."""
    rep = r["replay_forced"]
    gen = r["slice_responses"] * r["mean_response"] / r["generation"] if r["generation"] > 0 else math.nan
    return gen, (rep["tokens"] / rep["seconds"] if rep["seconds"] > 0 else math.nan)


def table(measured: list[dict[str, Any]], js: dict[str, Any], env: dict[str, Any], share: float) -> str:
    """The Markdown for bench/README.md."""
    commit = (env.get("commit") or {}).get("commit") or "?"
    lines = [(f"`bench/gpu_step.py` on {env.get('gpu') or 'CPU'} (torch {env.get('torch')}, transformers "
             f"{env.get('transformers')}), commit {commit[:9]}, {env.get('date')}; random models of the real "
             f"shapes; replay forced to {share:.0%} of the pairs."), "",
             "Measured on one slice (one `generate` chunk; the update on one micro-batch per mini-batch):", "",
             ("| recipe | shape | chunk (responses x mean tokens, prompt mean) | generation | gen tok/s | scoring | "
             "replay at share (pairs, tokens) | replay tok/s | update per micro-batch fwd+bwd / old log-probs | "
             "optimiser step | peak GPU memory |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in measured:
        gen_rate, rep_rate = rates(r)
        rep = r["replay_forced"]
        ups = "; ".join(f"{d}: {u['per_micro_batch']:.3f} / {u['old_per_micro_batch']:.3f} s"
                        for d, u in r["updates"].items())
        opt = "; ".join(f"{d}: {u['per_optimiser_step']:.3f} s" for d, u in r["updates"].items())
        peak = f"{r['peak_memory'] / 2**30:.1f} GiB" if r.get("peak_memory") else "-"
        lines.append(f"| {r['recipe']} | {r['shape']} | {r['slice_responses']} x {r['mean_response']:.0f} "
                     f"({r['truncated']} truncated), prompt {r['mean_prompt']:.0f} | {r['generation']:.1f} s | "
                     f"{gen_rate:.0f} | {r['scoring']:.2f} s | {rep['seconds']:.2f} s ({rep['pairs']}/"
                     f"{rep['pairs_total']}, {rep['tokens']}) | {rep_rate:.0f} | {ups} | {opt} | {peak} |")
    lines += ["", ("Extrapolated to the recipe's full batch (not measured: chunks, responses and micro-batches "
                  "counted, times scaled):"), "",
              ("| recipe | shape | responses (chunks, micro-batches, mini-batches) | generation | scoring | "
              "replay | update (recipe dtype; bf16) | GDPO step | MRTPO step | MRTPO/GDPO (bf16 update) | "
              "kept hidden states |"),
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in measured:
        x = r["extrapolated"]
        own = r["recipe_train_dtype"] if r["recipe_train_dtype"] in x["steps"] else next(iter(x["steps"]))
        main = x["steps"][own]
        bf16 = x["steps"].get("bfloat16", main)
        lines.append(f"| {r['recipe']} | {r['shape']} | {x['responses']} ({x['chunks']}, {x['micro_batches']}, "
                     f"{x['mini_batches']}) | {x['generation']:.0f} s | {x['scoring']:.1f} s | {x['replay']:.1f} s | "
                     f"{main['update']:.0f} s ({own}); {bf16['update']:.0f} s | {main['gdpo_step']:.0f} s | "
                     f"{main['mrtpo_step']:.0f} s | {main['ratio']:.3f} ({bf16['ratio']:.3f}) | "
                     f"{x['kept_hidden_gb']:.1f} GB |")
    for path, fig in js.items():
        lines.append(f"\nJS memory ({path} path, bench/js_memory.py on this device): "
                     f"{fig.get('peak_mb')} MB peak extra (status {fig.get('status')})")
    return "\n".join(lines) + "\n"
