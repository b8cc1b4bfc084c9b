"""Where the main job's training time goes: its steps timed by phase, optionally under torch.profiler.

    .venv/bin/python bench/profile_step.py [--profile] [--top 8] [--keep DIR] [run overrides ...]

Runs the training part of ``mrbench run`` with the given overrides (none: the main job, SmolLM2-135M
on ifollow, 4 steps of 2 prompts x 8 responses, MRTPO) through the local backend into a temporary
record (``--keep DIR``: into DIR, kept), without the end-of-run evaluation, and prints:

- the host (native bf16 or not), the rollout dtype and the update's compute dtype
  (``model.train_dtype``), and the threads;
- the training seconds (the backend's ``train``: model load, data, every step) and, summed over the
  steps from the metrics rows' ``time_<phase>``, each phase's seconds and share of the steps:
  generation, scoring, replay, credit log, update (with the advantages and the rollout copy's
  sync), the rest (checkpoints and bookkeeping), and the mean replayed share of pairs;
- with ``--profile``: every step under torch.profiler (CPU), and for each phase (the backend marks
  them ``mrbench/<phase>``) the operators with the most self time, as shares of that phase.

The figures of issue 25 (main job's training seconds and split, default path and float32 path):

    .venv/bin/python bench/profile_step.py
    .venv/bin/python bench/profile_step.py --model.train_dtype float32

each in its own run on an otherwise idle machine. The last line is ``train_seconds <value>``.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness.backends.local import LocalBackend
from harness.backends.phases import PHASES
from harness.cli import _split_overrides
from harness.config import resolve
from harness.preflight import preflight
from harness.records import RunRecord


def phase_ops(prof: torch.profiler.profile, top: int) -> dict[str, list[tuple[str, float, float]]]:
    """Per phase: its ``top`` operators by self CPU time, as (name, seconds, share of the phase's
    summed self time). An operator belongs to the phase whose ``mrbench/<phase>`` range encloses
    its start on the same thread."""
    events = list(prof.events())
    ranges = [(e.name.split("/", 1)[1], e.thread, e.time_range.start, e.time_range.end)
              for e in events if e.name.startswith("mrbench/")]
    self_time: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in events:
        if e.name.startswith("mrbench/"):
            continue
        start = e.time_range.start
        for name, thread, lo, hi in ranges:
            if thread == e.thread and lo <= start < hi:
                self_time[name][e.name] += e.self_cpu_time_total / 1e6
                break
    out = {}
    for name, counter in self_time.items():
        total = sum(counter.values()) or 1.0
        out[name] = [(op, s, s / total) for op, s in counter.most_common(top)]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", action="store_true", help="run every step under torch.profiler and print each "
                    "phase's heaviest operators")
    ap.add_argument("--top", type=int, default=8, help="operators listed per phase with --profile")
    ap.add_argument("--keep", help="write the record here and keep it (default: a temporary directory)")
    args, extra = ap.parse_known_args()
    with contextlib.ExitStack() as stack:
        out_dir = args.keep or stack.enter_context(tempfile.TemporaryDirectory(prefix="mrbench-profile-"))
        cfg = resolve(None, _split_overrides([*extra, "--output.dir", str(Path(out_dir) / "record")]))
        plan = preflight(cfg)
        backend = LocalBackend(cfg, plan.task, plan.algorithm)
        rec = RunRecord.open(cfg)
        prof = (torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if args.profile
                else contextlib.nullcontext())
        try:
            t0 = time.perf_counter()
            with prof:
                backend.train(rec)
            train_seconds = time.perf_counter() - t0
            metrics = rec.metrics()
        finally:
            rec.unlock()
    info = backend.rollout_info()
    print(f"host {'with' if info['host_native_bf16'] else 'without'} native bf16; rollout {info['dtype']}, update "
          f"{backend.update_info()['compute_dtype']} compute with float32 master weights; threads "
          f"{info['threads']}; {cfg.model.name}, {cfg.task.name}, {cfg.algo.name}, {len(metrics)} steps of "
          f"{cfg.sampling.prompts_per_step} prompts x {cfg.sampling.group_size} responses")
    steps = sum(m["time_step"] for m in metrics)
    print(f"training {train_seconds:.1f} s, of which the steps {steps:.1f} s")
    parts = {p: sum(m.get(f"time_{p}", 0.0) for m in metrics) for p in PHASES}
    parts["rest"] = steps - sum(parts.values())
    for name, seconds in parts.items():
        print(f"  {name:<9} {seconds:8.1f} s  {seconds / steps:6.1%}  ({seconds / len(metrics):.2f} s per step)")
    share = sum(m.get("replay_share", 0.0) for m in metrics) / len(metrics)
    per_step = ", ".join(f"{m['replay_share']:.0%}" for m in metrics)
    print(f"  replayed pairs: {share:.0%} on average ({per_step})")
    if args.profile:
        for phase, ops in sorted(phase_ops(prof, args.top).items(), key=lambda kv: PHASES.index(kv[0])
                                 if kv[0] in PHASES else len(PHASES)):
            print(f"{phase}: " + "; ".join(f"{op} {share:.0%}" for op, _, share in ops))
    print(f"train_seconds {train_seconds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
