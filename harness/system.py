"""What the host offers a run: CPU occupancy and the thread policy of CPU training."""

from __future__ import annotations

import os
import time

import torch


def _cpu_times() -> tuple[int, int] | None:
    """(busy, total) CPU time in ticks since boot, all CPUs, from /proc/stat; None where absent."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    if len(fields) < 5:
        return None
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


def busy_cpus(window: float = 0.5) -> float | None:
    """CPUs' worth of work that other processes run right now (sampled over ``window`` seconds,
    while this process waits), or None where /proc/stat cannot be read."""
    first = _cpu_times()
    time.sleep(window)
    second = _cpu_times()
    if first is None or second is None or second[1] <= first[1]:
        return None
    share = (second[0] - first[0]) / (second[1] - first[1])
    return share * (os.cpu_count() or 1)


def choose_threads(requested: int) -> int:
    """CPU intra-op threads (:func:`thread_choice`, without the reason; the tests' short form)."""
    return thread_choice(requested)[0]


def thread_choice(requested: int) -> tuple[int, str]:
    """(CPU intra-op threads, why): ``requested`` when > 0; else 1 when other work already occupies
    half the CPUs (oversubscribed OpenMP threads slow every step several-fold, while a second thread
    gains less than 2x on an idle machine), else torch's default. Occupancy is sampled over half a
    second from /proc/stat, since the 1-minute load average lags behind the machine's state; the
    load average is the fallback. The reason names the figures it went by, so that a run's summary
    (``rollout: threads=1, threads_reason=...``) says why it ran single-threaded."""
    if requested > 0:
        return requested, f"{requested} as asked (backend.local.threads {requested})"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    busy_now = busy_cpus()
    if busy_now is not None:
        busy = busy_now >= 0.5 * cpus
        measured = f"other work kept {busy_now:.1f} of {cpus} CPUs busy over half a second"
    else:
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = None
        busy = load is not None and load >= 0.5 * cpus
        measured = (f"1-minute load average {load:.1f} on {cpus} CPUs" if load is not None
                    else "CPU occupancy unknown")
    if busy:
        return 1, (f"auto: 1 because the CPUs are busy ({measured}; more threads would compete with it); "
                   f"--backend.local.threads N sets N")
    default = torch.get_num_threads()
    return default, f"auto: torch's default {default} ({measured}, under half)"


def native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (AVX512-BF16 or AMX, as oneDNN reports it); the
    rollout runs in bf16 by default only there."""
    from harness.models import bf16_supported

    return bf16_supported(torch.device("cpu"))
