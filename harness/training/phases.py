"""A step's phases: their names, the timer that writes ``time_<phase>`` into the metrics row, and
the test probe that records the order a backend runs them in.

``MRBENCH_STEP_PROBE=<file name>`` (tests) makes every Step append each phase it runs, one JSON
line ``{"step", "phase"}``, to that file in the run's record (:func:`probe`): the proof that every
backend runs the shared step in this order (:func:`probe_phases` reads it back).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import torch

#: the environment variable naming the probe file in the record (tests only)
PROBE_ENV = "MRBENCH_STEP_PROBE"
#: the timed phases, each written into the step's metrics row as ``time_<phase>`` (``time_step`` is
#: the whole step); ``update`` includes the advantages and the sampler's weight sync
TIMED_PHASES = ("generate", "score", "replay", "credit", "update")
#: every phase a step runs, in order (what the probe records)
STEP_PHASES = ("plan", "sample", "score", "replay", "advantages", "credit", "update", "metrics", "samples")


class PhaseTimes:
    """Seconds spent in each timed phase of one step; ``with phases("replay"):`` times a block (adding
    to the phase's total) and marks it ``mrbench/<phase>`` for torch.profiler (free when no profiler
    runs), so that a profile of a run (``bench/profile_step.py``) splits by phase as the metrics do."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.seconds: dict[str, float] = dict.fromkeys(TIMED_PHASES, 0.0)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        with torch.profiler.record_function(f"mrbench/{name}"):
            yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def row(self) -> dict[str, float]:
        """``time_<phase>`` for every phase and ``time_step`` since the step started."""
        return {**{f"time_{k}": v for k, v in self.seconds.items()}, "time_step": time.perf_counter() - self.start}


def probe(record_path: str | Path | None, step: int, phase: str) -> None:
    """With ``MRBENCH_STEP_PROBE`` set: ``phase`` of step ``step`` (1-based) begins, appended to the
    probe file in the record at ``record_path`` (nothing without a record)."""
    name = os.environ.get(PROBE_ENV)
    if name and record_path is not None:
        with (Path(record_path) / name).open("a", encoding="utf-8") as f:
            f.write(json.dumps({"step": step, "phase": phase}) + "\n")


def probe_phases(path: str | Path) -> list[tuple[int, str]]:
    """The (step, phase) pairs a probe file recorded, in order."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [(int(d["step"]), str(d["phase"])) for d in map(json.loads, lines) if d]
