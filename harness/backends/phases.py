"""The timed phases of a training step: each is written into the step's metrics row as
``time_<phase>`` (``time_step`` is the whole step) and marked ``mrbench/<phase>`` for
torch.profiler, so a profile of a run (``bench/profile_step.py``) splits by phase as the metrics do.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import torch

#: the local backend's phases; ``update`` includes the advantages and the sync of the rollout copy
PHASES = ("generate", "score", "replay", "credit", "update")


class PhaseTimes:
    """Seconds spent in each phase of one step; ``with phases("replay"):`` times a block (adding to
    the phase's total) and marks it for torch.profiler (free when no profiler runs)."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        with torch.profiler.record_function(f"mrbench/{name}"):
            yield
        self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - t0

    def row(self) -> dict[str, float]:
        """``time_<phase>`` for every phase and ``time_step`` since the step started."""
        return {**{f"time_{k}": v for k, v in self.seconds.items()}, "time_step": time.perf_counter() - self.start}
