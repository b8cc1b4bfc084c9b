"""Where the main job's training time goes: its steps timed by phase, optionally under torch.profiler.

    .venv/bin/python bench/profile_step.py [--profile STEP] [--top 8] [--keep DIR] [--bandwidth GBPS]
        [run overrides ...]

Runs the training part of ``mrbench run`` with the given overrides (none: the main job, SmolLM2-135M
on ifollow, 4 steps of 2 prompts x 8 responses, MRTPO) through the local backend into a temporary
record (``--keep DIR``: into DIR, kept), without the end-of-run evaluation, and prints:

- the host (native bf16 or not), the rollout dtype and the update's compute dtype
  (``model.train_dtype``), and the threads;
- the training seconds (the backend's ``train``: model load, data, every step) and, summed over the
  steps from the metrics rows' ``time_<phase>``, each phase's seconds and share of the steps:
  generation, scoring, replay, credit log, update (with the advantages and the rollout copy's
  sync), the rest (checkpoints and bookkeeping), and the mean replayed share of pairs;
- generation per decoding step against the memory-bandwidth bound of reading the rollout
  weights once per step (their bytes over the read bandwidth, measured after training or given);
- with ``--profile STEP``: that step under torch.profiler (CPU), and for each phase (the backend marks
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
from harness.cli import _split_overrides
from harness.config import resolve
from harness.preflight import preflight
from harness.records import RunRecord
from harness.training.phases import TIMED_PHASES as PHASES
from harness.training.run_loop import RunLoop


def phase_ops(prof: torch.profiler.profile, top: int) -> dict[str, tuple[float, list[tuple[str, float, float]]]]:
    """Per phase: the operators' summed self CPU time and its ``top`` operators by self time, as
    (name, seconds, share of that sum). An operator belongs to the phase whose ``mrbench/<phase>``
    range encloses its start on the same thread."""
    import bisect

    events = list(prof.events())
    ranges: dict[int, list[tuple[int, int, str]]] = collections.defaultdict(list)  # thread -> (start, end, phase)
    for e in events:
        if e.name.startswith("mrbench/"):
            ranges[e.thread].append((e.time_range.start, e.time_range.end, e.name.split("/", 1)[1]))
    starts = {t: [r[0] for r in sorted(rs)] for t, rs in ranges.items()}
    ordered = {t: sorted(rs) for t, rs in ranges.items()}
    self_time: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for e in events:
        if e.name.startswith("mrbench/") or e.thread not in starts:
            continue
        i = bisect.bisect_right(starts[e.thread], e.time_range.start) - 1  # the last phase started before it
        if i >= 0 and e.time_range.start < ordered[e.thread][i][1]:
            self_time[ordered[e.thread][i][2]][e.name] += e.self_cpu_time_total / 1e6
    out = {}
    for name, counter in self_time.items():
        total = sum(counter.values()) or 1.0
        out[name] = (total, [(op, s, s / total) for op, s in counter.most_common(top)])
    return out


def read_bandwidth(megabytes: int = 1024, repeats: int = 5) -> float:
    """Bytes per second this process reads from memory: the fastest of ``repeats`` sums over a
    float32 tensor of ``megabytes`` (far larger than the caches), with torch's current threads."""
    x = torch.ones(megabytes * (1 << 20) // 4)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        float(x.sum())
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best


def weight_bytes(model: torch.nn.Module) -> int:
    """Bytes of the model's parameters (a tied LM head counted once): what one decoding step reads."""
    return sum(p.numel() * p.element_size() for p in model.parameters())


def decoding_bound(backend: LocalBackend, cfg, metrics: list[dict], bandwidth: float) -> None:
    """Generation per decoding step against the memory-bandwidth bound of reading the weights once
    per step: t >= W / BW (the KV cache adds 2 x layers x kv_heads x head_dim x bytes per cached
    token on top). All G x prompts sequences advance one token per step."""
    W = weight_bytes(backend.rollout_model)
    steps = cfg.sampling.max_new_tokens  # decoding steps when some response runs to the limit
    truncated = all(m.get("truncated_rate", 0) > 0 for m in metrics)
    per_step = sum(m["time_generate"] for m in metrics) / len(metrics) / steps
    sequences = cfg.sampling.prompts_per_step * cfg.sampling.group_size
    bound = W / bandwidth
    print(f"generation: {W / 1e6:.0f} MB of {backend.rollout_dtype} weights read per decoding step; read "
          f"bandwidth {bandwidth / 1e9:.1f} GB/s -> bound {bound * 1e3:.1f} ms per decoding step "
          f"({bound / sequences * 1e3:.2f} ms per token of {sequences} sequences); measured "
          f"{per_step * 1e3:.1f} ms per decoding step ({per_step / sequences * 1e3:.2f} ms per token) = "
          f"{per_step / bound:.1f}x the bound" + ("" if truncated else f" (an upper estimate: {steps} decoding steps "
                                                   f"assumed, some steps ended earlier)"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", type=int, default=0, metavar="STEP", help="run step STEP (1-based; the main "
                    "job replays from step 2) under torch.profiler and print each phase's heaviest operators "
                    "(0: no profiler; a whole run's events take several GB)")
    ap.add_argument("--top", type=int, default=8, help="operators listed per phase with --profile")
    ap.add_argument("--keep", help="write the record here and keep it (default: a temporary directory)")
    ap.add_argument("--bandwidth", type=float, default=0.0, help="memory read bandwidth in GB/s for the decoding "
                    "bound (0: measured here, after training, with the run's threads)")
    args, extra = ap.parse_known_args()
    with contextlib.ExitStack() as stack:
        out_dir = args.keep or stack.enter_context(tempfile.TemporaryDirectory(prefix="mrbench-profile-"))
        cfg = resolve(None, _split_overrides([*extra, "--output.dir", str(Path(out_dir) / "record")]))
        plan = preflight(cfg)
        backend = LocalBackend(cfg, plan.task, plan.algorithm)
        rec = RunRecord.open(cfg)
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) if args.profile else None
        run_step = RunLoop.run_step

        def profiled_step(loop: RunLoop, n: int, examples):
            if prof is not None and n + 1 == args.profile:
                with prof:
                    return run_step(loop, n, examples)
            return run_step(loop, n, examples)

        RunLoop.run_step = profiled_step  # the run loop's one step, profiled at the step asked for
        try:
            t0 = time.perf_counter()
            backend.train(rec)
            train_seconds = time.perf_counter() - t0
            metrics = rec.metrics()
        finally:
            RunLoop.run_step = run_step
            rec.unlock()
    info = backend.rollout_info()
    print(f"host {'with' if info['host_native_bf16'] else 'without'} native bf16; rollout {info['dtype']}, update "
          f"{backend.update_info()['compute_dtype']} compute with float32 master weights; threads "
          f"{info['threads']}; {cfg.model.name}, {cfg.task.name}, {cfg.algo.name}, {len(metrics)} steps of "
          f"{cfg.sampling.prompts_per_step} prompts x {cfg.sampling.group_size} responses")
    steps = sum(m["time_step"] for m in metrics)
    print(f"training {train_seconds:.1f} s: the steps {steps:.1f} s, outside them {train_seconds - steps:.1f} s "
          f"(model load, data, checkpoints every schedule.checkpoint_every={cfg.schedule.checkpoint_every} steps)")
    parts = {p: sum(m.get(f"time_{p}", 0.0) for m in metrics) for p in PHASES}
    parts["rest"] = steps - sum(parts.values())
    for name, seconds in parts.items():
        print(f"  {name:<9} {seconds:8.1f} s  {seconds / steps:6.1%}  ({seconds / len(metrics):.2f} s per step)")
    share = sum(m.get("replay_share", 0.0) for m in metrics) / len(metrics)
    per_step = ", ".join(f"{m['replay_share']:.0%}" for m in metrics)
    print(f"  replayed pairs: {share:.0%} on average ({per_step})")
    if prof is not None:
        print(f"step {args.profile}, operators' self time per phase (the rest of a phase's time is Python and framework overhead):")
        for phase, (total, ops) in sorted(phase_ops(prof, args.top).items(),
                                          key=lambda kv: PHASES.index(kv[0]) if kv[0] in PHASES else len(PHASES)):
            wall = metrics[args.profile - 1].get(f"time_{phase}", 0.0)
            print(f"{phase}: operators {total:.1f} s of {wall:.1f} s; "
                  + "; ".join(f"{op} {share:.0%}" for op, _, share in ops))
    decoding_bound(backend, cfg, metrics, args.bandwidth * 1e9 or read_bandwidth())
    print(f"train_seconds {train_seconds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
