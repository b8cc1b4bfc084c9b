"""Per-reward weights c_k, constant or scheduled over training steps (GRPO, GDPO, MRTPO's aggregation).

A weights setting is one of:

* ``None``: every reward weighs 1;
* a list of numbers, one per reward column in the task's order (``[1.0, 0.5]``);
* a mapping from reward name to a number or a schedule (rewards left out weigh 1), given as a
  mapping or as its JSON/YAML text (``--algo.weights '{"format": {"linear": [1.0, 0.2]}}'``).

Schedules (``n`` is the 0-based training step the batch carries, ``N`` the horizon):

* ``{"constant": c}``: c at every step;
* ``{"linear": [start, end]}`` or ``[start, end, N]``: start + (end - start) u with
  u = min(n / (N - 1), 1), so the first step gets ``start`` and step N (1-based) ``end``;
* ``{"cosine": [start, end]}`` or ``[start, end, N]``: end + (start - end) (1 + cos(pi u)) / 2;
* ``{"step": [[s1, v1], [s2, v2], ...]}`` (or ``{"s1": v1, ...}``): from 1-based step ``s_i`` on the
  value ``v_i`` holds (before the first breakpoint, ``v1``).

Without its own N, a linear or cosine schedule spans the run (``RolloutBatch.total_steps``).
Everything here is pure: the weight in force is a function of (setting, step, horizon).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

SCHEDULE_KINDS = ("constant", "linear", "cosine", "step")


class WeightsError(ValueError):
    """A malformed weights setting; the message names the reward."""


@dataclass(frozen=True)
class Schedule:
    """One reward's weight over steps (see the module docstring)."""

    kind: str
    start: float
    end: float = 0.0
    horizon: int | None = None
    breakpoints: tuple[tuple[int, float], ...] = ()

    def at(self, step: int, total_steps: int | None = None) -> float:
        """The weight at 0-based ``step``; ``total_steps`` is the horizon when the schedule has none."""
        if self.kind == "constant":
            return self.start
        if self.kind == "step":
            value = self.breakpoints[0][1]
            for first, v in self.breakpoints:
                if step + 1 >= first:
                    value = v
            return value
        horizon = self.horizon if self.horizon is not None else total_steps
        if horizon is None:
            raise ValueError(f"a {self.kind} weight schedule without its own step count needs the run's "
                             f"(RolloutBatch.total_steps); give [start, end, steps]")
        u = min(step / max(horizon - 1, 1), 1.0)
        if self.kind == "linear":
            return self.start + (self.end - self.start) * u
        return self.end + (self.start - self.end) * (1.0 + math.cos(math.pi * u)) / 2.0


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise WeightsError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def parse_schedule(spec: Any, where: str) -> Schedule:
    """A number or a one-key schedule mapping -> :class:`Schedule`; errors name ``where``."""
    if not isinstance(spec, Mapping):
        return Schedule("constant", _number(spec, where))
    if len(spec) != 1 or next(iter(spec)) not in SCHEDULE_KINDS:
        raise WeightsError(f"{where}: expected a number or one of {{{', '.join(SCHEDULE_KINDS)}: ...}}, got {dict(spec)!r}")
    kind, args = next(iter(spec.items()))
    if kind == "constant":
        return Schedule("constant", _number(args, f"{where}.constant"))
    if kind == "step":
        pairs = list(args.items()) if isinstance(args, Mapping) else args
        if not isinstance(pairs, (list, tuple)) or not pairs:
            raise WeightsError(f"{where}.step: expected [[step, value], ...] with 1-based steps, got {args!r}")
        points = []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, (list, tuple)) or len(pair) != 2:
                raise WeightsError(f"{where}.step[{i}]: expected [step, value], got {pair!r}")
            try:
                first = int(pair[0])
            except (TypeError, ValueError):
                raise WeightsError(f"{where}.step[{i}]: step {pair[0]!r} is not an integer") from None
            if first < 1:
                raise WeightsError(f"{where}.step[{i}]: steps are 1-based, got {first}")
            points.append((first, _number(pair[1], f"{where}.step[{i}]")))
        firsts = [p[0] for p in points]
        if firsts != sorted(set(firsts)):
            raise WeightsError(f"{where}.step: breakpoints must increase, got {firsts}")
        return Schedule("step", points[0][1], breakpoints=tuple(points))
    if not isinstance(args, (list, tuple)) or len(args) not in (2, 3):
        raise WeightsError(f"{where}.{kind}: expected [start, end] or [start, end, steps], got {args!r}")
    horizon = None
    if len(args) == 3:
        if isinstance(args[2], bool) or not isinstance(args[2], int) or args[2] < 1:
            raise WeightsError(f"{where}.{kind}: steps must be a positive integer, got {args[2]!r}")
        horizon = int(args[2])
    return Schedule(kind, _number(args[0], f"{where}.{kind}[0]"), _number(args[1], f"{where}.{kind}[1]"), horizon)


def normalise_weights(spec: Any) -> tuple[float, ...] | dict[str, Any] | None:
    """The JSON-friendly form a config keeps (a tuple of numbers, or name -> number | schedule
    mapping), after checking every entry; a string is read as JSON (or YAML)."""
    if spec is None:
        return None
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except json.JSONDecodeError:
            import yaml

            try:
                spec = yaml.safe_load(spec)
            except yaml.YAMLError as exc:
                first = str(exc).strip().splitlines()[0]
                raise WeightsError(f"weights: not JSON or YAML ({first}): {spec!r}") from None
    if isinstance(spec, Mapping):
        out = {}
        for name, value in spec.items():
            parse_schedule(value, f"weights.{name}")
            out[str(name)] = value
        return out
    if isinstance(spec, (list, tuple)):
        return tuple(_number(v, f"weights[{i}]") for i, v in enumerate(spec))
    raise WeightsError(f"weights: expected a list of numbers or a mapping reward -> weight or schedule, got {spec!r}")


def weight_names(spec: Any) -> list[str]:
    """The reward names a (normalised) weights setting mentions ([] for None or a list)."""
    return list(spec) if isinstance(spec, Mapping) else []


def weights_at(spec: Any, K: int, step: int, total_steps: int | None, names: Sequence[str] | None,
               like: Tensor) -> Tensor:
    """c[K] in force at 0-based ``step``: ones for None; a list must have K entries; a mapping
    needs the batch's column names (``RolloutBatch.reward_names``) and leaves other rewards at 1."""
    if spec is None:
        return torch.ones(K, dtype=torch.float32, device=like.device)
    if not isinstance(spec, Mapping):
        if len(spec) != K:
            raise ValueError(f"weights has {len(spec)} entries but the batch has K={K} rewards")
        return torch.tensor([float(v) for v in spec], dtype=torch.float32, device=like.device)
    if names is None:
        raise ValueError("weights by reward name need the batch's column names (RolloutBatch.reward_names); "
                         "this batch's columns have no fixed names")
    values = [parse_schedule(spec[n], f"weights.{n}").at(step, total_steps) if n in spec else 1.0 for n in names]
    return torch.tensor(values, dtype=torch.float32, device=like.device)
