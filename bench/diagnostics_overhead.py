"""What the per-reward diagnostics (algorithms/diagnostics.py) cost next to the advantages they describe.

Method: one synthetic batch (``--prompts`` groups of ``--group`` responses, ``--rewards`` rewards,
``--tokens`` tokens, random binary rewards, random relevance on a ``--replayed`` share of the
pairs). Times, median of ``--repeat`` runs: MRTPO's ``advantages`` and the diagnostics of the same
batch (:func:`~algorithms.diagnostics.reward_contributions` + :func:`~algorithms.diagnostics.batch_diagnostics`,
with read spans on every pair); prints both and their ratio. With ``--model NAME`` it also times the
token/character alignment the local backend runs for the credit mass on read tokens (per step:
every response whose verifiers report spans), with that model's tokenizer on random text.

    python bench/diagnostics_overhead.py --prompts 8 --group 8 --rewards 3 --tokens 512
    python bench/diagnostics_overhead.py --model smollm2-135m --tokens 256
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from algorithms import RolloutBatch, get_algorithm
from algorithms.diagnostics import batch_diagnostics, name_index, reward_contributions


def _median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--rewards", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=512)
    ap.add_argument("--replayed", type=float, default=0.5)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--model", help="also time the read-span alignment with this model's tokenizer")
    args = ap.parse_args()
    torch.manual_seed(0)
    B, K, T = args.prompts * args.group, args.rewards, args.tokens
    rewards = torch.randint(0, 2, (B, K)).float()
    relevance = torch.rand(B, K, T)
    relevance[torch.rand(B, K) > args.replayed] = float("nan")
    batch = RolloutBatch(rewards=rewards, group_ids=torch.arange(B) // args.group,
                         response_mask=torch.ones(B, T, dtype=torch.bool), relevance=relevance)
    algo = get_algorithm("mrtpo", warmup_steps=0)
    ids, names = name_index([[f"r{k}" for k in range(K)]] * B, K)
    read = torch.rand(B, K, T) < 0.3
    known = torch.ones(B, K, dtype=torch.bool)
    t_adv = _median_seconds(lambda: algo.advantages(batch), args.repeat)
    t_diag = _median_seconds(lambda: batch_diagnostics(batch, ids, names, reward_contributions(algo, batch),
                                                       read, known), args.repeat)
    print(f"batch B={B} K={K} T={T}: advantages {t_adv * 1e3:.1f} ms, diagnostics {t_diag * 1e3:.1f} ms, "
          f"ratio {t_diag / t_adv:.2f}")
    if args.model:
        from harness.models import load_model
        from harness.token_align import align

        tok = load_model(args.model, dtype=torch.float32, device=torch.device("cpu")).tokenizer
        text = " ".join(["the quick brown fox jumps over the lazy dog"] * (T // 8))
        response_ids = tok(text, add_special_tokens=False)["input_ids"][:T]
        decoded = tok.decode(response_ids, skip_special_tokens=True)
        t_align = _median_seconds(lambda: align(tok, response_ids, decoded), args.repeat)
        print(f"alignment of one {len(response_ids)}-token response: {t_align * 1e3:.1f} ms; "
              f"{B} responses: {t_align * B:.2f} s per step")


if __name__ == "__main__":
    main()
