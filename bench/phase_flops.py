"""What each phase of a local run computed, for ``profile_step.py``'s roofline: the sampling's passes
(rebuilt from each step's rollouts, :func:`roofline.sampling_passes`) and the matrix-product FLOPs of
each step's replay and update, counted after the run by running them again under
``torch.utils.flop_counter.FlopCounterMode`` on the arguments the run gave them.

:class:`PhaseCapture` wraps a local backend's engine operations (``sample``, ``replay``, ``update``)
before it trains: each call runs as before and its arguments are kept (the sampling pass a replay
reused too, which the step drops afterwards). Counting runs each kept replay and update again on
the trained weights: a FLOP count depends only on the shapes, and the run's record is written by
then. It takes about as long as those phases took in the run (``--count-steps`` limits it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from roofline import Pass, sampling_passes
from torch.utils.flop_counter import FlopCounterMode


@dataclass
class StepCalls:
    """One step's kept calls: its rollouts' prompts and response lengths, and the replay's and the
    update's arguments (None where the step ran none)."""

    prompts: list[list[int]] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    replay: tuple[Any, ...] | None = None
    kept_passes: list[tuple[Any, Any]] | None = None  # each rollout's (hidden, logits) when it replayed
    update: tuple[Any, ...] | None = None


class PhaseCapture:
    """Keeps every step's calls of ``backend`` (see the module docstring)."""

    def __init__(self, backend: Any):
        self.backend, self.steps = backend, []
        sample, replay = backend.sample, backend.replay

        def captured_sample(examples: Any, plan: Any, seed: int) -> Any:
            rollouts = sample(examples, plan, seed)
            self.steps.append(StepCalls([list(r.prompt_ids) for r in rollouts],
                                        [len(r.response_ids) for r in rollouts]))
            return rollouts

        def captured_replay(plan: Any, rollouts: Any, *rest: Any) -> Any:
            self.steps[-1].replay = (plan, rollouts, *rest)
            self.steps[-1].kept_passes = [(r.hidden, getattr(r, "logits", None)) for r in rollouts]
            return replay(plan, rollouts, *rest)

        load = backend._load_policy

        def captured_load() -> None:  # the update is built with the policy
            load()
            backend.update = _CapturedUpdate(backend.update, self)

        backend.sample, backend.replay, backend._load_policy = captured_sample, captured_replay, captured_load

    def generation_passes(self, model: Any, share_prompts: bool = True) -> list[list[Pass]]:
        """Each step's sampling passes."""
        return [sampling_passes(model, s.prompts, s.lengths, share_prompts) for s in self.steps]

    def count(self, steps: list[int]) -> dict[int, dict[str, float]]:
        """``{step index: {"replay": FLOPs, "update": FLOPs}}`` for the steps asked (0-based), each
        phase run again under FlopCounterMode (0 where the step ran none)."""
        out = {}
        update = getattr(self.backend.update, "inner", self.backend.update)
        for i in steps:
            calls, counts = self.steps[i], {"replay": 0.0, "update": 0.0}
            if calls.replay is not None:
                rollouts = calls.replay[1]
                for r, (hidden, logits) in zip(rollouts, calls.kept_passes or []):
                    r.hidden = hidden
                    if hasattr(r, "logits"):
                        r.logits = logits
                with FlopCounterMode(display=False) as counter:
                    self.backend.__class__.replay(self.backend, *calls.replay)
                counts["replay"] = float(counter.get_total_flops())
                for r in rollouts:
                    r.hidden = None
                    if hasattr(r, "logits"):
                        r.logits = None
            if calls.update is not None:
                with FlopCounterMode(display=False) as counter:
                    update(*calls.update[0], **calls.update[1])
                counts["update"] = float(counter.get_total_flops())
            out[i] = counts
        return out


class _CapturedUpdate:
    """The engine's update, its calls' arguments kept; every other attribute is the update's own."""

    def __init__(self, inner: Any, capture: PhaseCapture):
        self.inner, self._capture = inner, capture

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._capture.steps[-1].update = (args, kwargs)
        return self.inner(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
