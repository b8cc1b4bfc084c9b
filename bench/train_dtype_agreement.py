"""Does the bf16 mixed-precision update train as the float32 one does? Reads the records of
``grids/train-dtype-check.yaml`` (or any records differing only in ``model.train_dtype``) and prints

- per step, each arm's mean training reward over the seeds with its spread (sample std), and the
  difference of the means against two standard errors of that difference (seed noise);
- each seed's KL to the initial policy at the last step (``kl``: the mean k3 estimate on that step's
  samples; the grid loads the reference with a negligible ``optim.kl_coef`` for it), and the same
  comparison of the arms;
- a verdict: the arms agree within seed noise when no step's reward difference and not the final
  KL difference exceeds two standard errors.

    .venv/bin/python bench/train_dtype_agreement.py --root results/checks/train-dtype

The last line is ``agree yes`` or ``agree no``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.records import find_records, load_record


def mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def within_noise(a: list[float], b: list[float]) -> tuple[float, float, bool]:
    """(difference of the means, two standard errors of it, whether the difference is within them)."""
    (ma, sa), (mb, sb) = mean_sd(a), mean_sd(b)
    two_se = 2.0 * math.sqrt(sa * sa / len(a) + sb * sb / len(b))
    return ma - mb, two_se, abs(ma - mb) <= two_se


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default="results/checks/train-dtype")
    ap.add_argument("--metric", default="reward_mean", help="the per-step curve compared (a metrics key)")
    args = ap.parse_args()
    arms: dict[str, dict[int, list[dict]]] = {}
    for path in find_records(Path(args.root)):
        rec = load_record(path)
        if rec["provenance"].get("status") != "finished":
            continue
        arm = rec["provenance"].get("update", {}).get("compute_dtype") or rec["config"]["model"]["train_dtype"]
        arms.setdefault(arm, {})[int(rec["config"]["seed"])] = rec["metrics"]
    if len(arms) != 2:
        print(f"train_dtype_agreement: need finished records of two train dtypes under {args.root}, found "
              f"{sorted(arms) or 'none'}", file=sys.stderr)
        return 2
    (a, runs_a), (b, runs_b) = sorted(arms.items())
    steps = min(len(m) for m in [*runs_a.values(), *runs_b.values()])
    print(f"{a}: seeds {sorted(runs_a)}; {b}: seeds {sorted(runs_b)}; {steps} steps; curve {args.metric}")
    print(f"{'step':>4}  {a + ' mean (sd)':>20}  {b + ' mean (sd)':>20}  {'difference':>10}  {'2 SE':>7}")
    outside = []
    for n in range(steps):
        va = [m[n][args.metric] for m in runs_a.values()]
        vb = [m[n][args.metric] for m in runs_b.values()]
        diff, two_se, ok = within_noise(va, vb)
        outside += [] if ok else [n + 1]
        cells = ["{:.4f} ({:.4f})".format(*mean_sd(v)) for v in (va, vb)]
        print(f"{n + 1:>4}  {cells[0]:>20}  {cells[1]:>20}  {diff:>+10.4f}  {two_se:>7.4f}"
              f"{'' if ok else '  outside'}")
    ka = [m[steps - 1].get("kl", float("nan")) for m in runs_a.values()]
    kb = [m[steps - 1].get("kl", float("nan")) for m in runs_b.values()]
    kdiff, k2se, kok = within_noise(ka, kb)
    print(f"final KL to the initial policy (step {steps}): {a} " + ", ".join(f"{v:.3g}" for v in ka)
          + f"; {b} " + ", ".join(f"{v:.3g}" for v in kb) + f"; difference {kdiff:+.3g} (2 SE {k2se:.3g})")
    for arm, runs in ((a, runs_a), (b, runs_b)):
        upd = statistics.fmean(r["time_update"] for m in runs.values() for r in m)
        print(f"{arm}: mean update {upd:.1f} s per step (this run's machine; not a benchmark figure)")
    agree = not outside and kok and not any(math.isnan(v) for v in ka + kb)
    print(f"steps outside seed noise: {outside or 'none'}; final KL within seed noise: {'yes' if kok else 'no'}")
    print(f"agree {'yes' if agree else 'no'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
