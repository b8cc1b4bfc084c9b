"""The expected time that ``mrbench run --dry-run`` prints, from a speed measured on the spot.

A dry run cannot time the run's own steps (the run does that itself after its first steps,
:mod:`harness.run_estimate`), and it must not load the model's weights. So it measures what the
run's time depends on and scales the main job's measured phases to the cell:

1. **This machine, now**: :func:`matmul_gflops` times a matrix product of the main job's MLP shape
   ([256, 576] x [576, 1536]) for about a quarter of a second, at the thread count the run will
   use (:func:`harness.system.thread_choice`, which sees the present load) and in the dtype each
   phase computes in (the rollout's for generation, replay and evaluation; the update's for the
   update). Other work on the CPUs shows up as a lower figure.
2. **The cell's work**: the model's matrix-product parameters per token (from its config.json,
   read as JSON, no weights and no transformers import: layers, hidden and MLP widths, attention
   heads, vocabulary for the LM head; else the size its name states), times the batch
   (prompts x group size x max new tokens), for the steps left; replay only on the steps where the
   algorithm replays (:func:`harness.run_estimate.replay_schedule`); evaluation by decoding steps of
   batches of :data:`evals.generate_cases.EVAL_BATCH` cases.
3. **Calibration** (:data:`MAIN_JOB`): the main job's training measured on an idle two-core AMD EPYC
   with AVX512-BF16 (``bench/README.md``, "Step time on CPU", 2026-12-01: 67.6 s in all; per 4
   steps generate 18.2 s, replay 9.8 s over its 3 replaying steps, update 26.5 s, scoring and the
   time outside the steps 13.1 s; the float32 rows 36.9, 30.2 and 60.2 s), against what this probe
   reads on such a machine idle at 2 threads (:data:`REFERENCE_GFLOPS`).

Each phase is then ``its main-job seconds x (its work / the main job's) x (reference / measured
GFLOP/s)``. Assumptions that make it err: responses that stop before ``max_new_tokens`` (it errs
long), prompts much longer than ifollow's (text-to-SQL schemas, tool lists: it errs short), and
a speed that changes after the probe; the run's own re-estimate then corrects it.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: the probe's matrix product: rows x hidden @ hidden x MLP width (SmolLM2-135M's 576 and 1536)
PROBE_SHAPE = (256, 576, 1536)
#: seconds the probe runs (after one untimed product)
PROBE_SECONDS = 0.25
#: what the probe reads, GFLOP/s at 2 threads, on an idle two-core AMD EPYC with AVX512-BF16 (the
#: kind of machine of bench/README's figures; read with the load average under 1, 2026-12-01:
#: 830-940 in bf16, 184-191 in float32)
REFERENCE_GFLOPS = {"bfloat16": 900.0, "float32": 190.0}
#: SmolLM2-135M's matrix-product parameters per token: 30 layers of 3.54 M and its tied 49,152 x 576
#: LM head (bench/README: 134.5 M in all; :func:`matmul_params` of its config)
MAIN_JOB_PARAMS = 134_479_872.0

#: parameter counts (millions) of the names the harness builds itself
KNOWN_SIZES = {"smollm2-135m": 135.0, "tiny-random": 0.1}
_SIZE_IN_NAME = re.compile(r"(?<![0-9.])(\d+(?:\.\d+)?)\s*([bBmM])(?![a-zA-Z])")


def model_millions(name: str) -> float | None:
    """Parameters (millions) of a model name: the embedded ones, or a size the name states."""
    if name in KNOWN_SIZES:
        return KNOWN_SIZES[name]
    if name.startswith("tiny-random"):
        return KNOWN_SIZES["tiny-random"]
    match = _SIZE_IN_NAME.search(name.rstrip("/").split("/")[-1])
    if match is None:
        return None
    value = float(match.group(1))
    return value * 1000.0 if match.group(2).lower() == "b" else value


@dataclass(frozen=True)
class MainJob:
    """The main job's measured phases (module docstring, 3.): its shape and seconds per dtype."""

    responses: int = 16  # 2 prompts x 8
    max_new_tokens: int = 96
    steps: int = 4
    replaying_steps: int = 3  # beta 0, 0.25, 0.5, 0.5
    generate_s: dict[str, float] = field(default_factory=lambda: {"bfloat16": 18.2, "float32": 36.9})
    replay_s: dict[str, float] = field(default_factory=lambda: {"bfloat16": 9.8, "float32": 30.2})
    update_s: dict[str, float] = field(default_factory=lambda: {"bfloat16": 26.5, "float32": 60.2})
    other_s: float = 13.1  # model load, data, scoring, a checkpoint after each step

    def decoding_step_s(self, dtype: str) -> float:
        """Seconds per decoding step of a batch (generation is memory-bound at these widths, so a
        batch of 8 evaluation cases costs about what the 16 sampled responses do)."""
        return self.generate_s[dtype] / (self.steps * self.max_new_tokens)


MAIN_JOB = MainJob()


@dataclass
class MachineSpeed:
    """What the probe measured: GFLOP/s per dtype name, at ``threads``, and why that many."""

    threads: int
    threads_reason: str
    gflops: dict[str, float]

    def describe(self) -> str:
        rates = ", ".join(f"{g:.0f} GFLOP/s in {d} (idle reference {REFERENCE_GFLOPS[d]:.0f})"
                          for d, g in self.gflops.items())
        return f"this machine now: {rates} at {self.threads} thread(s), {self.threads_reason}"


def matmul_gflops(threads: int, dtype: Any, seconds: float = PROBE_SECONDS) -> float:
    """GFLOP/s of :data:`PROBE_SHAPE`'s product at ``threads`` CPU threads in ``dtype``, over about
    ``seconds`` (torch's thread count is restored after)."""
    import torch

    rows, hidden, width = PROBE_SHAPE
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(rows, hidden, generator=gen).to(dtype)
    b = torch.randn(hidden, width, generator=gen).to(dtype)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a @ b  # untimed: first-call setup
        n, t0 = 0, time.perf_counter()
        while True:
            a @ b
            n += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= seconds and n >= 3:
                break
    finally:
        torch.set_num_threads(before)
    return 2.0 * rows * hidden * width * n / elapsed / 1e9


def measure_speed(threads_requested: int, dtypes: set[str]) -> MachineSpeed:
    """The probe at the run's thread count, in each of ``dtypes`` ("bfloat16", "float32")."""
    import torch

    from harness.system import thread_choice

    threads, why = thread_choice(threads_requested)
    return MachineSpeed(threads, why, {d: matmul_gflops(threads, getattr(torch, d)) for d in sorted(dtypes)})


def matmul_params(config: Any) -> float | None:
    """Matrix-product parameters per token of a decoder config (attention projections, MLP, LM
    head), or None where the config lacks the fields."""
    try:
        d, f, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
        heads, vocab = config.num_attention_heads, config.vocab_size
    except AttributeError:
        return None
    head_dim = getattr(config, "head_dim", None) or d // heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    per_layer = 2 * d * heads * head_dim + 2 * d * kv * head_dim + 3 * d * f
    return float(layers * per_layer + vocab * d)


def _config_without_weights(name: str) -> Any | None:
    """The fields of ``name``'s config.json (the embedded model once converted, a local directory),
    read as JSON so that the dry run needs no transformers import; the tiny model's own config."""
    import json
    from pathlib import Path
    from types import SimpleNamespace

    from harness.models import EMBEDDED_SMOLLM2, TINY_PREFIX, cache_root, model_config

    if name.startswith(TINY_PREFIX):
        return model_config(name)
    path = (cache_root() / EMBEDDED_SMOLLM2 if name == EMBEDDED_SMOLLM2 else Path(name)) / "config.json"
    if not path.is_file():
        return None
    return SimpleNamespace(**json.loads(path.read_text()))


def cell_params(name: str) -> float | None:
    """The cell's matrix-product parameters per token: from its config where it reads without
    weights, else the size its name states (:func:`model_millions`), else None."""
    try:
        config = _config_without_weights(name)
    except Exception:  # noqa: BLE001  (a dry run only describes; the run reports a bad model)
        config = None
    found = matmul_params(config) if config is not None else None
    if found is not None:
        return found
    if name == "smollm2-135m":  # not converted yet: its shape is known
        return MAIN_JOB_PARAMS
    millions = model_millions(name)
    return None if millions is None else millions * 1e6


@dataclass
class Expected:
    """Seconds of each phase for the steps left and of the end-of-run evaluation."""

    generate: float
    replay: float
    update: float
    other: float
    evaluation: float

    @property
    def training(self) -> float:
        return self.generate + self.replay + self.update + self.other


def expected(params: float, responses: int, max_new_tokens: int, steps: int, replaying_steps: int,
             eval_sizes: dict[str, tuple[int, int]], rollout_dtype: str, train_dtype: str,
             gflops: dict[str, float], main: MainJob = MAIN_JOB) -> Expected:
    """The module docstring's formula: each phase's main-job seconds x work ratio x speed ratio.
    ``eval_sizes``: each benchmark's (cases, token limit); ``gflops``: measured, per dtype."""
    from evals.generate_cases import EVAL_BATCH

    size = params / MAIN_JOB_PARAMS
    batch = size * (responses * max_new_tokens) / (main.responses * main.max_new_tokens)
    slow_r = REFERENCE_GFLOPS[rollout_dtype] / gflops[rollout_dtype]
    slow_t = REFERENCE_GFLOPS[train_dtype] / gflops[train_dtype]
    decoding_steps = sum(math.ceil(n / EVAL_BATCH) * tokens for n, tokens in eval_sizes.values())
    return Expected(
        generate=main.generate_s[rollout_dtype] / main.steps * batch * steps * slow_r,
        replay=main.replay_s[rollout_dtype] / main.replaying_steps * batch * replaying_steps * slow_r,
        update=main.update_s[train_dtype] / main.steps * batch * steps * slow_t,
        other=main.other_s / main.steps * size * steps * slow_r,
        evaluation=main.decoding_step_s(rollout_dtype) * size * decoding_steps * slow_r)


def cell_dtypes(cfg: Any) -> tuple[str, str]:
    """(rollout dtype, update dtype) names the run computes in on the CPU."""
    import torch

    from harness.models import resolve_dtype, resolve_train_dtype

    cpu = torch.device("cpu")
    names = {torch.bfloat16: "bfloat16"}
    rollout = names.get(resolve_dtype(cfg.model.dtype, cpu), "float32")
    return rollout, names.get(resolve_train_dtype(cfg.model.train_dtype, cpu), "float32")


def estimate_cell(cfg: Any, algorithm: Any, first_step: int, eval_sizes: dict[str, tuple[int, int]],
                  measure: Callable[[int, set[str]], MachineSpeed] | None = None
                  ) -> tuple[Expected, MachineSpeed] | None:
    """The cell's expected phases from step ``first_step`` on, and the speed measured for them
    (``measure``: default :func:`measure_speed`; tests inject one); None where the model's size is
    unknown."""
    from harness.run_estimate import replay_schedule

    params = cell_params(cfg.model.name)
    if params is None:
        return None
    rollout, train = cell_dtypes(cfg)
    speed = (measure or measure_speed)(cfg.backend.local.threads, {rollout, train})
    s, steps = cfg.sampling, range(first_step, cfg.schedule.steps)
    replays = replay_schedule(algorithm)
    found = expected(params, s.prompts_per_step * s.group_size, s.max_new_tokens, len(steps),
                     sum(1 for n in steps if replays(n)), eval_sizes, rollout, train, speed.gflops)
    return found, speed
