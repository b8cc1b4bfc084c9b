"""Where the main job's training time goes: its steps timed by phase, each phase against its floor
on this host (a roofline), optionally under torch.profiler.

    .venv/bin/python bench/profile_step.py [--profile STEP] [--top 8] [--keep DIR] [--bandwidth GBPS]
        [--count-steps N] [run overrides ...]

Runs the training part of ``mrbench run`` with the given overrides (none: the main job, SmolLM2-135M
on ifollow, 4 steps of 2 prompts x 8 responses, MRTPO) through the local backend into a temporary
record (``--keep DIR``: into DIR, kept), without the end-of-run evaluation, and prints:

- the host (native bf16 or not), the rollout dtype and the update's compute dtype
  (``model.train_dtype``), and the threads;
- the training seconds (the backend's ``train``: model load, data, every step) and, summed over the
  steps from the metrics rows' ``time_<phase>``, each phase's seconds and share of the steps:
  generation, scoring, replay, credit log, update (with the advantages and the rollout copy's
  sync), the rest (checkpoints and bookkeeping), and the mean replayed share of pairs;
- the roofline, every figure from this run: the host's memory read bandwidth (a sum over 1 GB, the
  run's threads; ``--bandwidth`` gives it instead) and its fastest matrix-product rate at the
  model's own shapes (``roofline.gemm_rate``: bf16, and float32 where the update computes in it),
  measured after training; for generation, the bytes its passes must read (weights and the cached
  keys and values, ``roofline.sampling_passes``) at that bandwidth and their FLOPs at that rate;
  for the replay and the update, their matrix-product FLOPs (``FlopCounterMode``, each step's
  phase run again after training on the same arguments, ``phase_flops.py``; ``--count-steps N``:
  the last N steps only) at that rate. A phase's floor is pass by pass the larger of its bandwidth
  and compute times; the table gives both, the floor, the measured seconds and their ratio, and
  scoring, the credit log, the rest of the steps and everything outside them in seconds;
- with ``--profile STEP``: that step under torch.profiler (CPU), and for each phase (the backend marks
  them ``mrbench/<phase>``) the operators with the most self time, as shares of that phase.

The figures of issue 25 (main job's training seconds and split, default path and float32 path):

    .venv/bin/python bench/profile_step.py
    .venv/bin/python bench/profile_step.py --model.train_dtype float32

each in its own run on an otherwise idle machine. The last line is ``train_seconds <value>``.
The roofline of an older commit: copy this file, ``roofline.py`` and ``phase_flops.py`` into a
checkout of it (they use nothing newer of the harness) and run it there.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from phase_flops import PhaseCapture
from roofline import GENERATE_BATCH, gemm_rate, pass_products_seconds, read_bandwidth, roofline

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


def print_roofline(backend: LocalBackend, cfg, metrics: list[dict], capture: PhaseCapture, counted: list[int],
                   bandwidth: float, outside: float) -> None:
    """The roofline table (see the module docstring)."""
    threads = torch.get_num_threads()
    rollout_rate, rollout_shape = gemm_rate(backend.rollout_model)
    compute = getattr(backend, "update", None) and backend.update_info()["compute_dtype"]
    if compute == "float32" and backend.rollout_dtype != torch.float32:
        update_rate, update_shape = gemm_rate(backend.policy, dtype=torch.float32)
    else:  # bf16 autocast multiplies in bf16, at the rollout copy's shapes
        update_rate, update_shape = rollout_rate, rollout_shape
    print(f"roofline ({threads} threads, measured after training in this run): memory read bandwidth "
          f"{bandwidth / 1e9:.1f} GB/s; fastest matrix-product rate {rollout_rate:.0f} GFLOP/s "
          f"({rollout_shape})" + ("" if update_shape == rollout_shape else
                                  f", {update_rate:.0f} GFLOP/s for the update ({update_shape})"))
    passes = [p for step in capture.generation_passes(backend.rollout_model) for p in step]
    gen_time = sum(m["time_generate"] for m in metrics)
    rows = [("generate", *roofline(passes, bandwidth, rollout_rate * 1e9), sum(p.bytes for p in passes),
             sum(p.flops for p in passes), gen_time)]
    flops = capture.count(counted)
    label = "" if len(counted) == len(metrics) else f" (steps {', '.join(str(i + 1) for i in counted)})"
    for phase, rate in (("replay", rollout_rate), ("update", update_rate)):
        total = sum(f[phase] for f in flops.values())
        measured = sum(metrics[i][f"time_{phase}"] for i in counted)
        rows.append((phase + label, None, total / (rate * 1e9), total / (rate * 1e9), None, total, measured))
    print(f"  {'phase':<20} {'bytes read':>10} {'at bandwidth':>12} {'FLOPs':>11} {'at the rate':>11} "
          f"{'floor':>8} {'measured':>9} {'ratio':>7}")
    for name, read, comp, floor, nbytes, nflops, measured in rows:
        ratio = f"{measured / floor:6.2f}x" if floor else "      -"
        print(f"  {name:<20} {f'{nbytes / 1e9:.2f} GB' if nbytes else '-':>10} "
              f"{f'{read:.2f} s' if read is not None else '-':>12} {nflops / 1e12:8.3f} TF {comp:9.2f} s "
              f"{floor:6.2f} s {measured:7.2f} s {ratio}")
    decoding = [p for p in passes if p.decoding]
    if decoding:
        n = len(decoding)
        mean_bytes, mean_flops = sum(p.bytes for p in decoding) / n, sum(p.flops for p in decoding) / n
        floor = sum(max(p.bytes / bandwidth, p.flops / (rollout_rate * 1e9)) for p in decoding) / n
        print(f"  per decoding pass ({n} passes): {mean_bytes / 1e6:.0f} MB read ({mean_bytes / bandwidth * 1e3:.1f} ms "
              f"at the bandwidth), {mean_flops / 1e9:.2f} GFLOP ({mean_flops / (rollout_rate * 1e6):.1f} ms at the "
              f"rate), floor {floor * 1e3:.1f} ms; generation seconds per pass {gen_time / n * 1e3:.1f} ms "
              f"(the prefills included)")
        rows_per_pass = min(GENERATE_BATCH, cfg.sampling.prompts_per_step * cfg.sampling.group_size)
        products = pass_products_seconds(backend.rollout_model, rows_per_pass)
        print(f"  the products of one decoding pass at its {rows_per_pass} rows, each layer's timed alone (its "
              f"weight warm in the caches: a lower bound): {products * 1e3:.1f} ms ({products / floor:.2f}x the "
              f"pass's floor)")
    for phase in ("score", "credit"):
        print(f"  {phase:<20} {sum(m.get(f'time_{phase}', 0.0) for m in metrics):52.2f} s (no floor)")
    steps = sum(m["time_step"] for m in metrics)
    rest = steps - sum(sum(m.get(f"time_{p}", 0.0) for m in metrics) for p in PHASES)
    print(f"  {'rest of the steps':<20} {rest:52.2f} s (no floor)")
    print(f"  {'outside the steps':<20} {outside:52.2f} s (model load, data, checkpoints; no floor)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profile", type=int, default=0, metavar="STEP", help="run step STEP (1-based; the main "
                    "job replays from step 2) under torch.profiler and print each phase's heaviest operators "
                    "(0: no profiler; a whole run's events take several GB)")
    ap.add_argument("--top", type=int, default=8, help="operators listed per phase with --profile")
    ap.add_argument("--keep", help="write the record here and keep it (default: a temporary directory)")
    ap.add_argument("--bandwidth", type=float, default=0.0, help="memory read bandwidth in GB/s for the roofline "
                    "(0: measured here, after training, with the run's threads)")
    ap.add_argument("--count-steps", type=int, default=0, metavar="N", help="count the replay's and the update's "
                    "FLOPs of the last N steps only (0: every step; counting runs those phases again)")
    args, extra = ap.parse_known_args()
    with contextlib.ExitStack() as stack:
        out_dir = args.keep or stack.enter_context(tempfile.TemporaryDirectory(prefix="mrbench-profile-"))
        cfg = resolve(None, _split_overrides([*extra, "--output.dir", str(Path(out_dir) / "record")]))
        plan = preflight(cfg)
        backend = LocalBackend(cfg, plan.task, plan.algorithm)
        capture = PhaseCapture(backend)
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
    counted = list(range(len(metrics)))[-args.count_steps:] if args.count_steps else list(range(len(metrics)))
    print_roofline(backend, cfg, metrics, capture, counted, args.bandwidth * 1e9 or read_bandwidth(),
                   train_seconds - steps)
    print(f"train_seconds {train_seconds:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
