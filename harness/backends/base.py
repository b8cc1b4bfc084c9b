"""The backend contract: what the harness gives a backend, and what a backend must do with it.

A backend trains one cell (task x algorithm x model x seed) and generates with the policy. It
does not write the training step: the step is mrbench's, written once (:class:`harness.training.step.Step`:
plan, sample, score under the verifier budget, replay, advantages, credit rows, update, metrics
row and samples). A backend writes an **engine** (:class:`harness.training.engine.Engine`): ``sample``, the
replay's forward passes (``replay``), ``update``, the weight ``sync``, ``save`` and ``load``. The
loop around the steps is mrbench's too (:class:`harness.training.run_loop.RunLoop`: resume,
checkpoints, signals, the no-signal watch, the time estimate, the progress bar): a backend hands
it the Step and its engine. Where a framework owns the loop (openrlhf), its hooks call the Step's
phases one by one, and the backend does what the loop would.

What it receives, in its constructor (``Backend(cfg, task, algorithm)``):

- ``cfg``: the fully resolved :class:`harness.config.RunConfig`. The backend's own options
  come from its section of ``cfg.backend`` (``backend.local.*`` for ``local``; a plugin backend
  reads ``cfg.backend.options[<its name>]``), never from another backend's fields;
- ``task``: the :class:`tasks.base.Task` instance (``None`` when only generating);
- ``algorithm``: the :class:`algorithms.base.Algorithm` instance (``None`` when only generating).

Before a backend is built, :mod:`harness.preflight` has checked that the task, the algorithm and
the backend fit together, using what the backend declares here:

- ``supported_replays``: the replay kinds (:class:`ReplayRequest`) it can run; an algorithm
  asking for another is refused before any model is loaded;
- ``supports_reference``: whether it can keep a frozen initial policy (``algorithm.needs_reference``);
- ``supports_extra_loss``: whether it adds an algorithm's own loss term (``algorithm.has_loss``);
- ``honours``: the run-config fields it acts on (dotted paths such as ``sampling.top_k``, or a
  section only it reads, ``backend.local``), beyond those the harness acts on itself
  (:data:`harness.backends.honours.HARNESS_FIELDS`: the task and algorithm names and options, the
  end-of-run evaluation, the record's place, the loggers). Pre-flight refuses a value other than
  the default (or the field's off value) of any other field, naming it and the backend
  (``ignored(cfg)``): a setting is honoured or refused, never silently ignored. A backend that
  honours a field only for some values lists the field and refuses the rest in ``ignored``. A
  backend that runs the shared step honours what it reads
  (:data:`~harness.backends.honours.STEP_FIELDS`), one that runs the shared loop what the loop
  reads (:data:`~harness.backends.honours.LOOP_FIELDS`). A default that turns a feature on is
  never refused: the features a backend leaves undone (``not_run(cfg)``) are said in one line
  after pre-flight and kept in the record's provenance;
- ``refuses(cfg, algorithm)``: why its own settings cannot run this algorithm (e.g. a parallelism
  that the replay cannot follow), or None;
- ``missing(cfg)``: what this machine lacks to train with it (a GPU, a package), saying how to
  install it, or None. ``mrbench run --dry-run`` skips this check and prints ``dry_run()``: what
  the backend would launch, without launching it.

``train(record)`` must, for a fresh or a resumed record (:class:`harness.records.RunRecord`):

1. run the run's prologue, :meth:`Step.open(cfg, task, algorithm, record, tokenizer, extra=...)
   <harness.training.step.Step.open>`: it loads and checks the data, starts the record with
   ``extra`` saying how the backend runs (precision, devices, generator), and builds the Step with
   its relevance guard and credit log (the task and algorithm: ``run_objects()``);
2. per training step ``n`` (0-based), run the shared step on its engine, which appends one
   metrics row with ``step = n + 1`` and at least the keys of :data:`REQUIRED_STEP_KEYS`
   (rewards, the algorithm's own metrics from ``algorithm.advantages(batch)``, timings), and the
   step's sample rows;
3. checkpoint under ``record.checkpoint_dir`` (the engine's ``save``, with the step's data
   position ``Step.position``) so that rerunning the same command resumes (``load``) and
   reproduces an uninterrupted run; on SIGTERM/SIGINT checkpoint and raise
   :class:`KeyboardInterrupt` (:class:`~harness.training.run_loop.TrainingInterrupted`);
4. return the run summary (a flat dict; :func:`harness.training.step_metrics.run_summary`).

``RunLoop(step, engine, record, started).run(examples)`` does 2 and 3, and its ``summary()`` is 4.
A backend whose framework runs the steps in another process opens the Step there too and attaches
it to the record (:meth:`~harness.training.step.Step.attach`).

It must not write ``eval.json`` or mark the record finished or failed: the runner does.

``reserved_gpus(cfg)``: GPUs a backend reserves for itself (e.g. through its own Ray placement
groups). A sweep's Ray task for such a cell then takes no GPU, and the sweep starts the cell only
while the cluster has that many GPUs to spare. 0 (the default): the sweep gives the cell its GPU.

``generate(messages_list, max_new_tokens)`` returns one greedy response text per chat (the
trained policy after ``train``, else the configured model) for evaluation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from mrbench_core.replay_kinds import ReplayRequest


class BackendRunError(RuntimeError):
    """The backend's training process ended without finishing the run. The message is one line
    naming the cause and where the process's output is; ``mrbench run`` prints it as such."""

#: keys every metrics row carries, whatever the backend
REQUIRED_STEP_KEYS = ("step", "reward_mean", "time_step")


class Backend(ABC):
    """Base class of a backend (see the module docstring for the contract)."""

    name: ClassVar[str] = ""
    supported_replays: ClassVar[frozenset[ReplayRequest]] = frozenset({ReplayRequest.NONE})
    supports_reference: ClassVar[bool] = False
    supports_extra_loss: ClassVar[bool] = False
    #: run-config fields (dotted paths) or sections this backend acts on, beyond the harness's own
    honours: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, cfg: Any, task: Any | None = None, algorithm: Any | None = None):
        self.cfg = cfg
        self.task = task
        self.algorithm = algorithm

    def run_objects(self) -> tuple[Any, Any]:
        """The run's task and algorithm: those the runner gave, else built from the config (a
        backend trained outside the runner); kept on the backend."""
        if self.task is None:
            from tasks.registry import make_task

            self.task = make_task(self.cfg.task.name, **self.cfg.task.options)
        if self.algorithm is None:
            from algorithms import get_algorithm

            self.algorithm = get_algorithm(self.cfg.algo.name, **self.cfg.algo.params)
        return self.task, self.algorithm

    @abstractmethod
    def train(self, record: Any) -> dict[str, Any]:
        """Train (or resume) the cell, writing its record; return the run summary."""

    @abstractmethod
    def generate(self, messages_list: list[list[dict[str, str]]], max_new_tokens: int) -> list[str]:
        """One greedy response per chat."""

    @classmethod
    def reserved_gpus(cls, cfg: Any) -> int:
        """GPUs this backend reserves itself for a run of ``cfg`` (see the module docstring)."""
        return 0

    @classmethod
    def unsupported(cls, algorithm: Any) -> str | None:
        """Why this backend cannot run ``algorithm`` (None when it can)."""
        kind = ReplayRequest(algorithm.replay_request)
        if kind not in cls.supported_replays:
            known = ", ".join(sorted(k.value for k in cls.supported_replays))
            return f"backend {cls.name!r} cannot run the {kind.value} replay (it runs: {known})"
        if algorithm.needs_reference and not cls.supports_reference:
            return f"backend {cls.name!r} keeps no reference policy, which {algorithm.name!r} needs"
        if algorithm.has_loss and not cls.supports_extra_loss:
            return f"backend {cls.name!r} adds no algorithm loss terms, which {algorithm.name!r} needs"
        return None

    @classmethod
    def ignored(cls, cfg: Any) -> list[str]:
        """The settings of ``cfg`` this backend would ignore, each ``path=value`` (with why, where
        the backend says): the fields set away from their defaults that neither it nor the harness
        honours (:func:`harness.backends.honours.ignored_settings`)."""
        from harness.backends.honours import ignored_settings

        return ignored_settings(cfg, cls.honours)

    @classmethod
    def not_run(cls, cfg: Any) -> list[str]:
        """The features ``cfg`` leaves on by default that this backend does not run, each
        ``path=value`` (:func:`harness.backends.honours.features_not_run`): pre-flight says them in
        one line and the record's provenance keeps them (``not_run``)."""
        from harness.backends.honours import features_not_run

        return features_not_run(cfg, cls.honours)

    @classmethod
    def refuses(cls, cfg: Any, algorithm: Any) -> str | None:
        """Why this backend, with ``cfg``'s settings, cannot run ``algorithm`` (None when it can)."""
        return None

    @classmethod
    def missing(cls, cfg: Any) -> str | None:
        """What this machine lacks to train with this backend and how to install it (None: nothing)."""
        return None

    def dry_run(self) -> str:
        """What ``train`` would launch, without launching it (``mrbench run --dry-run``)."""
        return f"backend {self.name!r} trains in the mrbench process; it launches nothing else"
