"""The training step, written once: one :class:`Step` per run owns the order of a step, and a
backend supplies only its :class:`Engine` (sampling, the replay's forward passes, the update, the
weight sync, save and load).

One step ``n`` (0-based; rows say ``step = n + 1``), in :meth:`Step.run`'s reading order. The
ALGO LOGIC phases are the algorithm's part of the step; PLUMBING is what every algorithm shares:

1. ALGO LOGIC ``plan``: what the algorithm asks of the step (:func:`plan_step`: its replay kind,
   and whether the replay runs: ``needs_replay`` is asked here, once);
2. PLUMBING ``sample``: the step's prompts (:func:`harness.backends.data_order.examples_at` from
   the data position), G responses each from the engine, with the torch RNG seeded from the
   ``sampling`` stream for (seed, n) (a resumed run draws as an uninterrupted one);
3. PLUMBING ``score``: every response's verdicts, always under the verifier time budget
   (:func:`score_response`, the one scoring call of every backend), then the rewards ``[B, K]``;
4. ALGO LOGIC ``replay``: the replay the plan asks for (:mod:`harness.replay_builders`), run by the
   engine where its old policy lives; a kind without forward passes (read-span masks) is built
   here from the verdicts; then the relevance guard (:mod:`harness.backends.relevance_guard`);
5. ALGO LOGIC ``advantages``: the batch (``ReplayResult.to_batch``, the one place it is built)
   and the algorithm's :class:`algorithms.Advantages` from one call (:func:`step_advantages`);
6. PLUMBING ``credit``: the credit rows of ``output.credit_groups`` groups
   (:class:`harness.credit.trainlog.CreditLog`);
7. ALGO LOGIC ``update``: the engine's policy update (paper Eq. 3 + KL + entropy + the
   algorithm's own loss; :class:`harness.backends.update.PolicyUpdate` on the local engine), then
   its weight sync;
8. PLUMBING ``metrics`` and ``samples``: the metrics row (:func:`step_metrics.step_row`, the
   per-reward diagnostics of :mod:`harness.step_diagnostics` under the task's ``reward_family``,
   the phase times ``time_<phase>``, :class:`PhaseTimes`) and the sample rows.

A backend that drives the steps itself hands this Step and its engine to the run loop, written
once too (:class:`harness.backends.run_loop.RunLoop`: resume, checkpoints, signals, the no-signal
watch, the time estimate). A backend whose framework runs the loop itself (``openrlhf``) calls the
same methods from its hooks (:meth:`Step.plan`, :meth:`Step.take`, :meth:`Step.score`, :meth:`Step.replay`,
:meth:`Step.advantages`, :meth:`Step.credit_rows`, :meth:`Step.updated`, :meth:`Step.finish`), so a
feature added here (a diagnostic, a guard, a log) reaches every backend.

``MRBENCH_STEP_PROBE=<file name>`` (tests) makes every Step append each phase it runs, one JSON
line ``{"step", "phase"}``, to that file in the run's record: the proof that every backend runs
this object in this order.

Reading one MRTPO step of the local backend takes four files: this one (the order), the engine
(:mod:`harness.backends.local_engine`: sampling, the replay's forward passes, the update), the
algorithm (:mod:`algorithms.mrtpo`: the relevance weights and token advantages) and the loss
(:mod:`harness.backends.loss`: Eq. 3, KL, entropy). One level deeper are the leave-one-out
contexts (:mod:`harness.replay_builders`), the update's mini- and micro-batches
(:mod:`harness.backends.update`) and MRTPO's GDPO aggregate (:mod:`algorithms.gdpo`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import torch

from harness.backends.data_order import examples_at
from harness.backends.rollout import batch_tensors, reward_lows
from harness.backends.step_metrics import UpdateStats, sample_rows, step_row
from harness.replay_builders import ReplayResult, replay_for
from harness.step_diagnostics import column_names, step_diagnostics
from mrbench_core.replay_kinds import WITHOUT_FORWARD, ReplayRequest
from mrbench_core.seeds import SAMPLING, stream_seed

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


# -- ALGO LOGIC: the plan and the advantages ----------------------------------------------------
@dataclass(frozen=True)
class StepPlan:
    """What the algorithm asks of one step (0-based ``step``)."""

    step: int
    request: ReplayRequest
    replay: bool  # the replay runs at this step

    @property
    def teacher(self) -> bool:
        """The replay runs the reference policy (OPSD's teacher), not the old policy."""
        return self.replay and self.request is ReplayRequest.TEACHER

    @property
    def sampling_prompt_replayed(self) -> bool:
        """The replay needs the old policy's pass over the sampling prompt (MRTPO's P_all where the
        task's P_all is the prompt, CoRT's x+), which the sampler can record instead."""
        return self.replay and self.request in (ReplayRequest.LEAVE_ONE_OUT, ReplayRequest.RUBRIC)


def plan_step(algorithm: Any, step: int) -> StepPlan:
    """The :class:`StepPlan` of ``step``: ``algorithm.needs_replay`` is asked here, once."""
    request = ReplayRequest(algorithm.replay_request)
    replay = request is not ReplayRequest.NONE and bool(algorithm.needs_replay(step))
    return StepPlan(step, request, replay)


def step_advantages(algorithm: Any, batch: Any) -> Any:
    """The algorithm's :class:`algorithms.Advantages` for ``batch`` (one call; token advantages in
    float32)."""
    from algorithms import Advantages

    result = Advantages.of(algorithm.advantages(batch))
    result.tokens = result.tokens.float()
    return result


# -- PLUMBING: scoring and seeds, importable without a Step (the openrlhf agent scores with it) ---
def score_response(task: Any, example: Any, text: str, timeout_s: float | None) -> list[Any]:
    """One response's verdicts under the verifier time budget (:meth:`tasks.base.Task.score_within`):
    the scoring of every backend, in whatever process or thread it samples."""
    return task.score_within(example, text, timeout_s)


def step_seed(seed: int, step: int) -> int:
    """The seed of step ``step``'s sampling (the ``sampling`` stream of :mod:`mrbench_core.seeds`)."""
    return stream_seed(SAMPLING, seed, step)


# -- the engine: what a backend supplies --------------------------------------------------------
class Engine(Protocol):
    """The operations a backend supplies to the :class:`Step` (engine operations only; the order,
    the scoring, the batch, the advantages and every log are the step's)."""

    def sample(self, examples: Sequence[Any], plan: StepPlan, seed: int) -> list[Any]:
        """G (``sampling.group_size``) unscored :class:`~harness.backends.rollout.Rollout` s per
        example with the old policy, group ``g`` for ``examples[g]``; ``seed``: the step's seed."""

    def replay(self, plan: StepPlan, rollouts: Sequence[Any], rewards: torch.Tensor, group_ids: torch.Tensor,
               T: int) -> ReplayResult:
        """The replay's forward passes, where the old policy (or OPSD's teacher) lives: the builder
        of ``plan.request`` (:func:`harness.replay_builders.replay_for`) on the engine's models.
        Only asked when the plan replays and the kind needs a model."""

    def update(self, rollouts: Sequence[Any], adv: torch.Tensor, T: int, algorithm: Any,
               teacher_hidden: Any = None) -> UpdateStats:
        """One step's policy update from the token advantages ``adv [B, T]``."""

    def sync(self) -> None:
        """Make the sampler's weights the updated policy's."""

    def save(self, record: Any, step: int, position: int) -> None:
        """Checkpoint after ``step`` steps, with the data position."""

    def load(self, record: Any) -> tuple[int, int] | None:
        """Resume from the record's checkpoint: (steps done, data position), or None (fresh)."""


@dataclass
class StepState:
    """What one step carries from phase to phase."""

    n: int
    plan: StepPlan
    phases: PhaseTimes
    rollouts: list[Any] = field(default_factory=list)
    rewards: torch.Tensor | None = None  # [B, K], NaN where a reward does not apply
    group_ids: torch.Tensor | None = None  # [B]
    mask: torch.Tensor | None = None  # [B, T] response tokens
    T: int = 0
    rep: ReplayResult | None = None
    batch: Any = None  # algorithms.RolloutBatch
    result: Any = None  # algorithms.Advantages
    upd: UpdateStats | None = None


class Step:
    """One run's training step (see the module docstring), built once per run."""

    def __init__(self, cfg: Any, task: Any, algorithm: Any, record: Any, tokenizer: Any = None,
                 credit: Any = None, guard: Any = None):
        self.cfg, self.task, self.algorithm, self.record = cfg, task, algorithm, record
        self.tokenizer, self.credit, self.guard = tokenizer, credit, guard
        self.position = 0  # index of the next training example in the data order (checkpointed)
        self.family: Callable[[str], str] | None = getattr(task, "reward_family", None)

    def _enter(self, state: StepState, phase: str) -> None:
        """The test probe (``MRBENCH_STEP_PROBE``, see the module docstring): ``phase`` begins."""
        name = os.environ.get(PROBE_ENV)
        if name and self.record is not None:
            with (Path(self.record.path) / name).open("a", encoding="utf-8") as f:
                f.write(json.dumps({"step": state.n + 1, "phase": phase}) + "\n")

    # -- the whole step, for a backend that runs the loop itself -------------------------------
    def run(self, engine: Engine, n: int, examples: Sequence[Any]) -> dict[str, Any]:
        """Training step ``n`` on ``engine``, top to bottom; appends its rows; returns the metrics row."""
        # ALGO LOGIC: what the algorithm asks of this step (needs_replay is asked here, once) -----
        state = self.plan(n)

        # PLUMBING: sample G responses per prompt with the old policy, score them under the budget
        with state.phases("generate"):
            self.take(state, self.sample(engine, state, examples))
        with state.phases("score"):
            self.score(state)

        # ALGO LOGIC: replay what the algorithm asks, then its token advantages --------------------
        with state.phases("replay"):
            self.replay(engine, state)
        with state.phases("update"):
            self.advantages(state)

        # PLUMBING: per-token credit of a few groups (credit.jsonl) ------------------------------
        with state.phases("credit"):
            self.credit_rows(state)

        # ALGO LOGIC: the policy update (Eq. 3 + KL + entropy + the algorithm's own loss), then sync
        with state.phases("update"):
            upd = engine.update(state.rollouts, state.result.tokens, state.T, self.algorithm,
                                state.rep.teacher_hidden)
            self.updated(state, upd)
            engine.sync()

        # PLUMBING: the metrics row (the one place it is built) and the samples ---------------------
        return self.finish(state)

    # -- the phases, which hook-driven backends call one by one ---------------------------------
    def plan(self, n: int) -> StepState:
        """ALGO LOGIC: the step's :class:`StepPlan`; starts the step's clock."""
        state = StepState(n, plan_step(self.algorithm, n), PhaseTimes())
        self._enter(state, "plan")
        return state

    def sample(self, engine: Engine, state: StepState, examples: Sequence[Any]) -> list[Any]:
        """PLUMBING: the step's prompts from the data position, and G responses each from the engine."""
        s = self.cfg.sampling
        seed = step_seed(self.cfg.seed, state.n)
        torch.manual_seed(seed)  # an interrupted and resumed run draws the same
        chosen = examples_at(examples, self.cfg.seed, self.position, s.prompts_per_step)
        self.position += s.prompts_per_step
        return engine.sample(chosen, state.plan, seed)

    def take(self, state: StepState, rollouts: list[Any]) -> None:
        """The step's sampled rollouts (from :meth:`sample`, or from a framework's own sampler)."""
        self._enter(state, "sample")
        state.rollouts = rollouts

    def score(self, state: StepState, scored: bool = False) -> None:
        """PLUMBING: every response's verdicts under the verifier budget (:func:`score_response`;
        ``scored``: the sampler's workers already called it), then the batch's tensors."""
        self._enter(state, "score")
        if not scored:
            for r in state.rollouts:
                r.verdicts = score_response(self.task, r.example, r.text, self.cfg.task.verifier_timeout_s)
        state.rewards, state.group_ids, state.mask, state.T = batch_tensors(state.rollouts)

    def replay(self, engine: Engine | None, state: StepState) -> None:
        """ALGO LOGIC: the replay the plan asks for (the engine's forward passes; none for read-span
        masks, built here), then the sampling pass's hidden states are dropped and the guard looks."""
        self._enter(state, "replay")
        plan, rollouts = state.plan, state.rollouts
        if not plan.replay:
            state.rep = ReplayResult.nothing_replayed(state.rewards)
        elif plan.request in WITHOUT_FORWARD:
            state.rep = replay_for(plan.request, None, self.task, self.tokenizer, rollouts, state.rewards,
                                   state.group_ids, state.T)
        else:
            assert engine is not None, f"the {plan.request.value} replay needs an engine"
            state.rep = engine.replay(plan, rollouts, state.rewards, state.group_ids, state.T)
        for r in rollouts:
            r.hidden = r.logits = None
        if self.guard is not None:
            self.guard.after_step(state.n, state.rewards, state.group_ids, plan.replay, state.rep.pairs_replayed)

    def advantages(self, state: StepState) -> torch.Tensor:
        """ALGO LOGIC: the batch and the algorithm's token advantages ``[B, T]`` (one call)."""
        self._enter(state, "advantages")
        lows = reward_lows(state.rollouts, self.task, state.rewards.shape[1])
        state.batch = state.rep.to_batch(state.rewards, state.group_ids, state.mask, state.n, lows,
                                         reward_names=column_names(state.rollouts),
                                         total_steps=self.cfg.schedule.steps)
        state.result = step_advantages(self.algorithm, state.batch)
        return state.result.tokens

    def credit_rows(self, state: StepState) -> None:
        """PLUMBING: per-token credit of a few groups (``credit.jsonl``)."""
        self._enter(state, "credit")
        if self.credit is not None:
            self.credit.log(state.n, state.rollouts, state.result, state.rep.relevance)

    def updated(self, state: StepState, upd: UpdateStats) -> None:
        """What the update reported (the engine's, or a framework's own trainer's)."""
        self._enter(state, "update")
        state.upd = upd

    def finish(self, state: StepState, times: dict[str, float] | None = None) -> dict[str, Any]:
        """PLUMBING: the metrics row (with ``times``, the phase times a framework measured, in place
        of the step's own) appended to the record, and the sample rows; returns the row."""
        self._enter(state, "metrics")
        task, cfg, result = self.task, self.cfg, state.result
        row = step_row(state.n, state.rollouts, state.rewards, state.mask, result.tokens, state.rep, state.upd,
                       result.metrics, getattr(task, "format_reward", None), bool(cfg.optim.entropy_coef),
                       family=self.family)
        row.update(step_diagnostics(self.algorithm, state.batch, state.rollouts, self.tokenizer, self.family,
                                    advantages=result))
        row.update(state.phases.row() if times is None else times)
        self.record.append_metrics(row)
        self._enter(state, "samples")
        self.record.append_samples(sample_rows(state.n, state.rollouts, cfg.schedule.log_samples))
        return row


def probe_phases(path: str | Path) -> list[tuple[int, str]]:
    """The (step, phase) pairs a probe file recorded, in order."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [(int(d["step"]), str(d["phase"])) for d in map(json.loads, lines) if d]
