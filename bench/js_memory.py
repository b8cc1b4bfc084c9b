r"""Peak extra memory of the streamed Jensen-Shannon relevance for one long response.

Streams T positions (default 4096) over a V = 151,936 vocabulary (Qwen2.5): the logits of each
chunk of positions for the two contexts are produced on the fly (here: random bf16 logits, the
second a perturbation of the first), reduced to per-position distances at once, and dropped. A
naive implementation holding two [T, V] float32 tensors needs 2 * T * V * 4 bytes (about 5 GB at
T = 4096). Two paths:

- ``--path replay`` (default): what the replay engine runs (:meth:`harness.replay.ReplayEngine.js_many`):
  chunks of ``stat_chunk_positions(replay.chunk_size, V)`` positions; P_all's log p and p
  are made once per chunk (:class:`algorithms.relevance.JSAgainst`) and compared with P_\k's
  logits ``JS_ROWS`` rows at a time;
- ``--path stream``: :class:`algorithms.relevance.JSStream` with its own default chunk.

How the peak is measured:
- CUDA (``--device cuda``): ``torch.cuda.max_memory_allocated`` after a reset, minus the memory
  allocated before the loop (exact for torch's allocator).
- CPU: torch's CPU allocator keeps no peak statistic and tracemalloc does not see it, so we read
  the process's peak resident set size (``resource.getrusage(...).ru_maxrss``) before and after
  the loop. glibc would otherwise keep freed buffers in per-thread heaps (the RSS then reflects
  fragmentation, not live tensors), so the script re-executes itself once with
  MALLOC_MMAP_THRESHOLD_=131072 and MALLOC_ARENA_MAX=2: every large buffer is then its own
  mapping, returned to the system when freed, and the peak RSS delta tracks the peak of live
  buffers: we take the current RSS (/proc/self/statm) just before the loop and the peak RSS
  after it (an upper bound: it also counts the allocator's slack and any earlier peak, which is
  printed too). On CPU there is no warm-up run, since it would raise the lifetime peak.
- By construction: replay path, two float32 and two bf16 [chunk, V] tensors plus about six
  float32 [JS_ROWS, V] working rows; stream path, about 6 float32 [chunk, V] tensors plus the two
  bf16 input chunks.

Usage: ``python bench/js_memory.py [--path replay|stream] [--positions 4096] [--vocab 151936] [--chunk N]
[--device cpu]``.
Prints one line per figure and exits non-zero if the measured peak exceeds ``--limit-mb`` (256).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import torch

from algorithms.relevance import JSAgainst, JSStream, default_chunk_size
from harness.config import ReplayConfig
from harness.replay import JS_ROWS, stat_chunk_positions

MB = 1024 * 1024


def logit_chunks(positions: int, vocab: int, chunk: int, seed: int, device: str):
    """Yield (logits_all, logits_without_k) for consecutive chunks of positions, bf16, on the fly."""
    gen = torch.Generator(device=device).manual_seed(seed)
    for start in range(0, positions, chunk):
        n = min(chunk, positions - start)
        base = torch.randn(n, vocab, generator=gen, device=device, dtype=torch.bfloat16).mul_(3.0)
        other = base + torch.randn(n, vocab, generator=gen, device=device, dtype=torch.bfloat16).mul_(0.5)
        yield base, other


def run(positions: int, vocab: int, chunk: int, device: str, path: str = "replay") -> torch.Tensor:
    if path == "stream":
        stream = JSStream(chunk_size=chunk)
        for a, b in logit_chunks(positions, vocab, chunk, seed=0, device=device):
            stream.update(a, b)
            del a, b
        return stream.result()
    parts = []
    for a, b in logit_chunks(positions, vocab, chunk, seed=0, device=device):
        parts.append(JSAgainst(a, chunk_size=JS_ROWS).distance(b))
        del a, b
    return torch.cat(parts)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports kB


def current_rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MB


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=4096)
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--path", choices=["replay", "stream"], default="replay",
                        help="the replay engine's JS (P_all shared per chunk) or the plain JSStream")
    parser.add_argument("--chunk", type=int, default=None, help="positions per chunk (default: the path's own)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--limit-mb", type=float, default=256.0)
    args = parser.parse_args(argv)
    if args.path == "replay":
        chunk = args.chunk or stat_chunk_positions(ReplayConfig().chunk_size, args.vocab)
        # log p and p of P_all, two bf16 logit chunks, and about six float32 [JS_ROWS, V] working rows
        by_construction = (2 * chunk * args.vocab * 4 + 2 * chunk * args.vocab * 2 + 6 * JS_ROWS * args.vocab * 4) / MB
        construction = "2 fp32 + 2 bf16 [chunk, V] + 6 fp32 [JS_ROWS, V] tensors"
    else:
        chunk = args.chunk or default_chunk_size(args.vocab)
        by_construction = (6 * chunk * args.vocab * 4 + 2 * chunk * args.vocab * 2) / MB
        construction = "6 fp32 + 2 bf16 [chunk, V] tensors"
    naive = 2 * args.positions * args.vocab * 4 / MB

    if args.device.startswith("cuda"):
        run(2 * chunk, args.vocab, chunk, args.device, args.path)  # warm-up: one-time allocations
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
    else:
        before = current_rss_mb()
        print(f"RSS before the loop {before:.1f} MB, lifetime peak so far {peak_rss_mb():.1f} MB")
    t0 = time.perf_counter()
    q = run(args.positions, args.vocab, chunk, args.device, args.path)
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
        measured = (torch.cuda.max_memory_allocated() - before) / MB
        how = "torch.cuda.max_memory_allocated delta"
    else:
        measured = peak_rss_mb() - before
        how = "peak RSS delta (upper bound)"
    seconds = time.perf_counter() - t0

    print(f"path={args.path} positions={args.positions} vocab={args.vocab} chunk={chunk} device={args.device}")
    print(f"relevance: {q.numel()} values, mean {q.mean().item():.4f}, min {q.min().item():.4f}, "
          f"max {q.max().item():.4f}")
    print(f"peak extra memory, measured ({how}): {measured:.1f} MB")
    print(f"peak extra memory, by construction ({construction}): {by_construction:.1f} MB")
    print(f"naive two [T, V] float32 tensors: {naive:.1f} MB")
    print(f"time: {seconds:.2f} s ({args.positions / seconds:.0f} positions/s)")
    ok = measured <= args.limit_mb
    print(f"{'OK' if ok else 'OVER'}: limit {args.limit_mb:.0f} MB")
    return 0 if ok else 1


MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_ARENA_MAX": "2"}

if __name__ == "__main__":
    if any(os.environ.get(k) != v for k, v in MALLOC_ENV.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **MALLOC_ENV})
    sys.exit(main())
