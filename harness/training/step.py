"""The training step, written once: one :class:`Step` per run owns the order of a step, and a
backend supplies only its :class:`~harness.training.engine.Engine` (sampling, the replay's forward
passes, the update, the weight sync, save and load; :mod:`harness.training.engine`).

One step ``n`` (0-based; rows say ``step = n + 1``), in :meth:`Step.run`'s reading order. The
ALGO LOGIC phases are the algorithm's part of the step; PLUMBING is what every algorithm shares:

1. ALGO LOGIC ``plan``: what the algorithm asks of the step (:func:`plan_step`: its replay kind,
   and whether the replay runs: ``needs_replay`` is asked here, once);
2. PLUMBING ``sample``: the step's prompts (:func:`harness.training.data_order.examples_at` from
   the data position), G responses each from the engine, with the torch RNG seeded from the
   ``sampling`` stream for (seed, n) (a resumed run draws as an uninterrupted one);
3. PLUMBING ``score``: every response's verdicts, always under the verifier time budget
   (:func:`score_response`, the one scoring call of every backend), then the rewards ``[B, K]``;
4. ALGO LOGIC ``replay``: the replay the plan asks for (:mod:`harness.replay_builders`), run by the
   engine where its old policy lives; a kind without forward passes (read-span masks) is built
   here from the verdicts; then the relevance guard (:mod:`harness.training.relevance_guard`);
5. ALGO LOGIC ``advantages``: the batch (``ReplayResult.to_batch``, the one place it is built)
   and the algorithm's :class:`algorithms.Advantages` from one call (:func:`step_advantages`);
6. PLUMBING ``credit``: the credit rows of ``output.credit_groups`` groups
   (:class:`harness.training.credit_log.CreditLog`);
7. ALGO LOGIC ``update``: the engine's policy update (paper Eq. 3 + KL + entropy + the
   algorithm's own loss; :class:`harness.backends.update.PolicyUpdate` on the local engine), then
   its weight sync;
8. PLUMBING ``metrics`` and ``samples``: the metrics row (:func:`step_metrics.step_row`, the
   per-reward diagnostics of :mod:`harness.training.step_diagnostics` under the task's
   ``reward_family``, the phase times ``time_<phase>``, :class:`harness.training.phases.PhaseTimes`)
   and the sample rows.

Below the :class:`Step` stand what it carries from phase to phase (:class:`StepState`) and the
pieces a hook-driven backend also calls alone (:func:`plan_step`, :func:`step_advantages`,
:func:`score_response`, :func:`step_seed`).

A backend that drives the steps itself hands this Step and its engine to the run loop, written
once too (:class:`harness.training.run_loop.RunLoop`: resume, checkpoints, signals, the no-signal
watch, the time estimate). A backend whose framework runs the loop itself (``openrlhf``) calls the
same methods from its hooks (:meth:`Step.plan`, :meth:`Step.take`, :meth:`Step.score`, :meth:`Step.replay`,
:meth:`Step.advantages`, :meth:`Step.credit_rows`, :meth:`Step.updated`, :meth:`Step.finish`), so a
feature added here (a diagnostic, a guard, a log) reaches every backend.

``MRBENCH_STEP_PROBE=<file name>`` (tests) makes every Step append each phase it runs to that file
in the run's record (:mod:`harness.training.phases`): the proof that every backend runs this
object in this order.

Reading one MRTPO step of the local backend takes four files: this one (the order), the engine
(:mod:`harness.backends.local_engine`: sampling, the replay's forward passes, the update), the
algorithm (:mod:`algorithms.mrtpo`: the relevance weights and token advantages) and the loss
(:mod:`harness.backends.loss`: Eq. 3, KL, entropy). One level deeper are the leave-one-out
contexts (:mod:`harness.replay_builders`), the update's mini- and micro-batches
(:mod:`harness.backends.update`) and MRTPO's GDPO aggregate (:mod:`algorithms.gdpo`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from harness.replay_builders import ReplayResult, replay_for
from harness.training.batch import Rollout, batch_tensors, reward_lows
from harness.training.credit_log import CreditLog
from harness.training.data_order import examples_at
from harness.training.engine import Engine, StepPlan
from harness.training.phases import PhaseTimes, probe
from harness.training.prologue import credit_log, start_record, training_examples
from harness.training.relevance_guard import RelevanceGuard
from harness.training.step_diagnostics import column_names, step_diagnostics
from harness.training.step_metrics import UpdateStats, sample_rows, step_row
from mrbench_core.replay_kinds import WITHOUT_FORWARD, ReplayRequest
from mrbench_core.seeds import SAMPLING, stream_seed

if TYPE_CHECKING:
    from algorithms.base import Advantages, Algorithm, RolloutBatch
    from harness.config import RunConfig
    from harness.records import RunRecord
    from tasks.base import Example, Task, Verdict


class Step:
    """One run's training step (see the module docstring), built once per run."""

    def __init__(self, cfg: RunConfig, task: Task, algorithm: Algorithm, record: RunRecord | None,
                 tokenizer: Any = None, credit: CreditLog | None = None, guard: RelevanceGuard | None = None):
        """``tokenizer``: the policy's (decodes responses for the credit rows and the diagnostics' read
        masks); ``record``: None until a process that did not open the run attaches (:meth:`attach`)."""
        self.cfg, self.task, self.algorithm, self.record = cfg, task, algorithm, record
        self.tokenizer, self.credit, self.guard = tokenizer, credit, guard
        self.position = 0  # index of the next training example in the data order (checkpointed)
        self.family: Callable[[str], str] | None = getattr(task, "reward_family", None)

    def _enter(self, state: StepState, phase: str) -> None:
        """The test probe (``MRBENCH_STEP_PROBE``, :func:`harness.training.phases.probe`): ``phase`` begins."""
        probe(self.record.path if self.record is not None else None, state.n + 1, phase)

    # -- the whole step, for a backend that runs the loop itself -------------------------------
    def run(self, engine: Engine, n: int, examples: Sequence[Example]) -> dict[str, Any]:
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

    def sample(self, engine: Engine, state: StepState, examples: Sequence[Example]) -> list[Rollout]:
        """PLUMBING: the step's prompts from the data position, and G responses each from the engine."""
        s = self.cfg.sampling
        seed = step_seed(self.cfg.seed, state.n)
        torch.manual_seed(seed)  # an interrupted and resumed run draws the same
        chosen = examples_at(examples, self.cfg.seed, self.position, s.prompts_per_step)
        self.position += s.prompts_per_step
        return engine.sample(chosen, state.plan, seed)

    def take(self, state: StepState, rollouts: list[Rollout]) -> None:
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


    # -- the run around the steps: its prologue, written once (harness.training.prologue) --------
    @classmethod
    def open(cls, cfg: RunConfig, task: Task, algorithm: Algorithm, record: RunRecord, tokenizer: Any = None, *,
             extra: dict[str, Any] | None = None) -> tuple[Step, list[Example]]:
        """The run's prologue: the training examples loaded and checked, the record started with
        ``extra`` (how the backend runs), the relevance guard and the credit log built (the last
        needs ``tokenizer``); returns the run's Step and its examples. Every backend calls it."""
        examples, too_long = training_examples(cfg, task, tokenizer)
        start_record(record, cfg, task, examples, too_long, extra or {})
        guard = RelevanceGuard(algorithm, task, record)
        guard.at_start(examples, cfg.schedule.steps)
        credit = credit_log(cfg, task, record, tokenizer)
        return cls(cfg, task, algorithm, record, tokenizer, credit=credit, guard=guard), examples

    def attach(self, record: RunRecord) -> None:
        """Write into ``record``, with this process's own relevance guard and credit log: for a
        process that runs the steps of a run whose prologue (:meth:`open`) ran in another (the
        openrlhf trainer)."""
        self.record = record
        self.guard = RelevanceGuard(self.algorithm, self.task, record)
        self.credit = credit_log(self.cfg, self.task, record, self.tokenizer)

    def resume_at(self, steps: int) -> None:
        """A run resumed after ``steps`` steps: the metrics rows and credit rows of later steps dropped."""
        self.record.truncate_metrics(steps)
        if self.credit is not None:
            self.credit.resume(steps)

@dataclass
class StepState:
    """What one step carries from phase to phase."""

    n: int
    plan: StepPlan
    phases: PhaseTimes
    rollouts: list[Rollout] = field(default_factory=list)
    rewards: torch.Tensor | None = None  # [B, K], NaN where a reward does not apply
    group_ids: torch.Tensor | None = None  # [B]
    mask: torch.Tensor | None = None  # [B, T] response tokens
    T: int = 0
    rep: ReplayResult | None = None
    batch: RolloutBatch | None = None
    result: Advantages | None = None
    upd: UpdateStats | None = None


# -- ALGO LOGIC: the plan and the advantages ----------------------------------------------------
def plan_step(algorithm: Algorithm, step: int) -> StepPlan:
    """The :class:`StepPlan` of ``step``: ``algorithm.needs_replay`` is asked here, once."""
    request = ReplayRequest(algorithm.replay_request)
    replay = request is not ReplayRequest.NONE and bool(algorithm.needs_replay(step))
    return StepPlan(step, request, replay)


def step_advantages(algorithm: Algorithm, batch: RolloutBatch) -> Advantages:
    """The algorithm's :class:`algorithms.Advantages` for ``batch`` (one call; token advantages in
    float32)."""
    from algorithms import Advantages

    result = Advantages.of(algorithm.advantages(batch))
    result.tokens = result.tokens.float()
    return result


# -- PLUMBING: scoring and seeds, importable without a Step (the openrlhf agent scores with it) ---
def score_response(task: Task, example: Example, text: str, timeout_s: float | None) -> list[Verdict]:
    """One response's verdicts under the verifier time budget (:meth:`tasks.base.Task.score_within`):
    the scoring of every backend, in whatever process or thread it samples."""
    return task.score_within(example, text, timeout_s)


def step_seed(seed: int, step: int) -> int:
    """The seed of step ``step``'s sampling (the ``sampling`` stream of :mod:`mrbench_core.seeds`)."""
    return stream_seed(SAMPLING, seed, step)
