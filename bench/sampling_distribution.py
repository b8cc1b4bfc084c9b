"""Whether the local sampler's draw samples what ``torch.multinomial`` samples: rewards and lengths of
responses drawn both ways from the same prompts, against their sampling error.

    .venv/bin/python bench/sampling_distribution.py [--model smollm2-135m] [--task ifollow]
        [--prompts 32] [--group 8] [--max-new-tokens 96] [--seed 0] [--threads 0]

Method. The rollout model (the configured model in the rollout dtype, as the local backend makes
it) samples ``group`` responses for each of ``prompts`` training prompts twice, with the main job's
sampling settings: once with the sampler's own draw (:func:`harness.backends.decode.draw`, inverse-CDF
sampling in float64) and once with ``torch.multinomial``, which ``transformers``' ``generate`` used
(the decoding loop with it draws ``generate``'s tokens, ``tests/test_decode.py``); each arm from its
own seed. Every response is scored as training scores it. For each measure (the mean reward over a
response's rewards, the share of responses with every reward satisfied, the length in tokens, the
share cut at ``max_new_tokens``) the script prints both arms' means and the difference with its
standard error, paired by prompt (the responses of one prompt are correlated: the error is that of
the per-prompt differences, over prompts), and ``z`` = difference / standard error. The draw keeps
the distribution when every ``|z|`` is below 3 (about 1 in 100 for 4 independent measures at
random); the last line is ``max_abs_z <value>``.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.backends import decode
from harness.backends.local import LocalBackend
from harness.backends.rollout import rollouts_for
from harness.config import RunConfig
from harness.training.step import score_response
from tasks.data_source import load_examples


def _multinomial(probs: torch.Tensor) -> torch.Tensor:
    return torch.multinomial(probs, 1).squeeze(1)


def sample_arm(backend: LocalBackend, examples, draw, seed: int) -> list[dict[str, float]]:
    """Each response's measures, with ``draw`` as the sampler's draw, from ``seed``."""
    cfg, own = backend.cfg, decode.draw
    decode.draw = draw
    try:
        torch.manual_seed(seed)
        with backend._rollout_phase():
            rollouts = rollouts_for(backend.rollout_model, backend.tokenizer, examples, cfg.sampling.group_size,
                                    backend.eos, cfg.sampling, cfg.sampling.max_prompt_tokens)
    finally:
        decode.draw = own
    rows = []
    for r in rollouts:
        values = [float(v.value) for v in score_response(backend.task, r.example, r.text, cfg.task.verifier_timeout_s)]
        rows.append({"group": r.group, "reward": sum(values) / len(values) if values else float("nan"),
                     "all": float(bool(values) and all(v >= 1.0 for v in values)),
                     "length": float(len(r.response_ids)), "truncated": float(r.truncated)})
    return rows


def paired(a: list[dict[str, float]], b: list[dict[str, float]], key: str) -> tuple[float, float, float, float]:
    """(mean of a, mean of b, mean per-prompt difference b - a, its standard error over prompts)."""
    groups = sorted({r["group"] for r in a})
    diffs = []
    for g in groups:
        xa = [r[key] for r in a if r["group"] == g and not math.isnan(r[key])]
        xb = [r[key] for r in b if r["group"] == g and not math.isnan(r[key])]
        if xa and xb:
            diffs.append(sum(xb) / len(xb) - sum(xa) / len(xa))
    mean = sum(diffs) / len(diffs)
    sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / max(1, len(diffs) - 1))
    ma = sum(r[key] for r in a if not math.isnan(r[key])) / len(a)
    mb = sum(r[key] for r in b if not math.isnan(r[key])) / len(b)
    return ma, mb, mean, sd / math.sqrt(len(diffs))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--task", default="ifollow")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--group", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: the backend's policy)")
    args = ap.parse_args()

    cfg = RunConfig()
    cfg.model.name, cfg.task.name = args.model, args.task
    cfg.sampling.group_size = args.group
    cfg.sampling.max_new_tokens = args.max_new_tokens or cfg.sampling.max_new_tokens
    cfg.backend.local.threads = args.threads
    backend = LocalBackend(cfg)
    backend._load_policy()
    examples = load_examples(backend.task, cfg.task.split, cfg.task.data_dir, args.prompts, args.seed)
    t0 = time.perf_counter()
    ours = sample_arm(backend, examples, decode.draw, args.seed + 1)
    t1 = time.perf_counter()
    theirs = sample_arm(backend, examples, _multinomial, args.seed + 2)
    t2 = time.perf_counter()
    n = len(ours)
    print(f"{args.model} on {args.task}: {len(examples)} prompts x {args.group} = {n} responses per arm, "
          f"temperature {cfg.sampling.temperature}, top-p {cfg.sampling.top_p}, top-k {cfg.sampling.top_k}, "
          f"max {cfg.sampling.max_new_tokens} tokens, {backend.rollout_dtype}, {torch.get_num_threads()} threads; "
          f"sampling {t1 - t0:.0f} s with the sampler's draw, {t2 - t1:.0f} s with torch.multinomial")
    worst = 0.0
    for key, what in (("reward", "mean reward"), ("all", "every reward satisfied"), ("length", "length (tokens)"),
                      ("truncated", f"cut at {cfg.sampling.max_new_tokens} tokens")):
        ma, mb, diff, se = paired(theirs, ours, key)
        z = diff / se if se > 0 else 0.0
        worst = max(worst, abs(z))
        print(f"{what:<24} multinomial {ma:8.3f}  draw {mb:8.3f}  difference {diff:+.3f} +- {se:.3f} (paired by "
              f"prompt)  z {z:+.2f}")
    print(f"max_abs_z {worst:.2f}")


if __name__ == "__main__":
    main()
