"""The host probes: CPU occupancy from /proc/stat and the thread policy."""

from __future__ import annotations

import pytest
import torch


@pytest.mark.parametrize("requested,busy,load,cpus,expected", [
    (3, 2.0, 99.0, 2, 3),  # asked for: always
    (0, 1.6, 0.1, 2, 1),  # others use most of the CPUs now
    (0, 1.0, 0.1, 2, 1),
    (0, 0.3, 5.0, 2, None),  # the load average still remembers an install; the CPUs are idle now
    (0, 3.0, 3.0, 16, None),
    (0, None, 5.0, 2, 1),  # no /proc/stat: the load average decides
    (0, None, 0.5, 2, None),
])
def test_thread_policy(monkeypatch, requested, busy, load, cpus, expected):
    import os

    from harness import system

    monkeypatch.setattr(system, "busy_cpus", lambda window=0.5: busy)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)))
    assert system.choose_threads(requested) == (torch.get_num_threads() if expected is None else expected)


def test_busy_cpus_reads_proc_stat_deltas(monkeypatch):
    from harness import system

    samples = iter([(100, 1000), (250, 1200)])  # 150 of 200 ticks busy
    monkeypatch.setattr(system, "_cpu_times", lambda: next(samples))
    monkeypatch.setattr(system.os, "cpu_count", lambda: 2)
    assert system.busy_cpus(window=0.0) == pytest.approx(1.5)
    monkeypatch.setattr(system, "_cpu_times", lambda: None)
    assert system.busy_cpus(window=0.0) is None


def test_cpu_times_on_this_machine():
    from harness import system

    times = system._cpu_times()
    if times is None:
        pytest.skip("no /proc/stat here")
    busy, total = times
    assert 0 <= busy <= total


@pytest.mark.parametrize("requested,busy,load,reason", [
    (3, 2.0, 99.0, "3 as asked (backend.local.threads 3)"),
    (0, 1.6, 0.1, "auto: 1 because the CPUs are busy (other work kept 1.6 of 2 CPUs busy over half a second"),
    (0, None, 5.0, "auto: 1 because the CPUs are busy (1-minute load average 5.0 on 2 CPUs"),
    (0, 0.3, 0.1, "auto: torch's default"),
])
def test_the_thread_choice_says_why(monkeypatch, requested, busy, load, reason):
    """threads=1 "when the CPUs are busy" is said aloud, with the figures it went by."""
    import os

    from harness import system

    monkeypatch.setattr(system, "busy_cpus", lambda window=0.5: busy)
    monkeypatch.setattr(os, "getloadavg", lambda: (load, load, load))
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(2)))
    threads, why = system.thread_choice(requested)
    assert why.startswith(reason), why
    assert threads == system.choose_threads(requested)
    if "busy" in reason:
        assert threads == 1 and "--backend.local.threads N" in why


def test_the_local_backend_prints_and_records_its_thread_reason(monkeypatch):
    from harness import system
    from harness.backends.local import LocalBackend
    from harness.config import resolve

    monkeypatch.setattr(system, "busy_cpus", lambda window=0.5: 2.0)
    before = torch.get_num_threads()
    try:
        backend = LocalBackend(resolve(None, [("model", "tiny-random")]))
        assert backend.threads_reason.startswith("auto: 1 because the CPUs are busy")
        assert backend.rollout_info()["threads_reason"] == backend.threads_reason
    finally:
        torch.set_num_threads(before)
