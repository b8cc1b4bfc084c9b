"""Step-time bands of the GPU cell (issue 53): what ``bench/gpu_e2e.py`` measured on one GPU, with
the ceilings and floors a later run of the same cell on the same kind of GPU must stay within (the
way NeMo-RL's nightly runs check step times against fixed bands).

A bands file is JSON::

    {"what": ..., "measured": {"commit", "gpu", "torch", "transformers", "date", "command"},
     "run": {"steps", "batch", "max_new_tokens", "model_shape", "tokenizer"},
     "bands": {"time_generate": {"measured": 0.61, "max": 0.97, "unit": "s/step"}, ...,
               "peak_memory_mb": {"measured": ..., "max": ...},
               "generated_tokens_per_s": {"measured": ..., "min": ...}}}

- :func:`observe`: a run's figures from its metrics rows (the median over the steps after the
  first, which pays for the kernels' first calls) and the peak memory of its process;
- :func:`make_bands`: the bands around measured figures (:data:`TIME_FACTOR` and
  :data:`TIME_SLACK_S` for the seconds, :data:`MEMORY_FACTOR` and :data:`MEMORY_SLACK_MB` for the
  memory, :data:`RATE_FACTOR` for the tokens per second);
- :func:`check`: every figure outside its band, in words (an empty list: within bands).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: the phases whose seconds per step are banded (the metrics row's ``time_<phase>``)
TIMED = ("time_generate", "time_score", "time_replay", "time_update", "time_step")
#: a step-time ceiling is the measured median times this, plus TIME_SLACK_S (short phases jitter)
TIME_FACTOR = 1.5
TIME_SLACK_S = 0.05
#: the peak-memory ceiling: the measured peak times this, plus MEMORY_SLACK_MB
MEMORY_FACTOR = 1.1
MEMORY_SLACK_MB = 64.0
#: the generated-tokens-per-second floor: the measured rate divided by this
RATE_FACTOR = 1.5


def observe(rows: Sequence[dict[str, Any]], peak_bytes: int | None, responses: int) -> dict[str, float]:
    """A run's banded figures from its metrics rows: each phase's median seconds over the steps after
    the first (all steps when there is one), the generated tokens per second over those steps
    (``response_length`` is the mean over a step's ``responses`` responses) and the peak memory in MB."""
    steady = [r for r in rows if r.get("step", 0) > 1] or list(rows)
    out: dict[str, float] = {}
    for key in TIMED:
        values = [float(r[key]) for r in steady if key in r]
        if values:
            out[key] = statistics.median(values)
    tokens = sum(float(r.get("response_length", 0.0)) * responses for r in steady)
    seconds = sum(float(r.get("time_generate", 0.0)) for r in steady)
    if seconds > 0:
        out["generated_tokens_per_s"] = tokens / seconds
    if peak_bytes is not None:
        out["peak_memory_mb"] = peak_bytes / 2**20
    return out


def make_bands(figures: dict[str, float]) -> dict[str, dict[str, Any]]:
    """The band of each measured figure (see the module constants)."""
    bands: dict[str, dict[str, Any]] = {}
    for key, value in figures.items():
        if key in TIMED:
            bands[key] = {"measured": round(value, 4), "max": round(value * TIME_FACTOR + TIME_SLACK_S, 4),
                          "unit": "s/step"}
        elif key == "peak_memory_mb":
            bands[key] = {"measured": round(value, 1), "max": round(value * MEMORY_FACTOR + MEMORY_SLACK_MB, 1),
                          "unit": "MB"}
        elif key == "generated_tokens_per_s":
            bands[key] = {"measured": round(value, 1), "min": round(value / RATE_FACTOR, 1), "unit": "tokens/s"}
    return bands


def check(bands_file: dict[str, Any], figures: dict[str, float]) -> list[str]:
    """Each banded figure that is missing from ``figures`` or outside its band, in words."""
    where = bands_file.get("measured", {})
    commit = where.get("commit")
    commit = commit.get("commit") if isinstance(commit, dict) else commit  # gpu_common.environment's form
    origin = f"measured {{}} on {where.get('gpu', '?')} at {str(commit or '?')[:9]}"
    problems = []
    for key, band in bands_file["bands"].items():
        if key not in figures:
            problems.append(f"{key}: not measured by this run")
            continue
        value, unit = figures[key], band.get("unit", "")
        if "max" in band and value > band["max"]:
            problems.append(f"{key} {value:.4g} {unit} above its ceiling {band['max']:.4g} "
                            f"({origin.format(band['measured'])})")
        if "min" in band and value < band["min"]:
            problems.append(f"{key} {value:.4g} {unit} below its floor {band['min']:.4g} "
                            f"({origin.format(band['measured'])})")
    return problems


def read(path: str | Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data.get("bands"), dict) or not data["bands"]:
        raise ValueError(f"{path}: no 'bands' object")
    return data
