"""Pre-flight: check that a run's task, algorithm, backend and benchmarks fit together before
any model is loaded, and say in one line why not and what would fit.

Checked, in order: the backend resolves and honours every setting given (``Backend.ignored``:
a field set away from its default that the backend would ignore is refused, naming each such
field, the backend and the backends that would honour them); the names resolve; the algorithm's
parameters validate; the task can build
the contexts of the replay the algorithm asks for (``Task.supported_replays``); the backend runs
that replay and whatever else the algorithm declares (``Backend.unsupported``), with its own
settings (``Backend.refuses``); the training data is where ``task.data_dir`` says
(``Task.data_problem``, without reading it); each end-of-run benchmark evaluates this task
(another task's benchmark only with ``schedule.eval_other_tasks: true``); this machine has what the backend
needs to train (``Backend.missing``; skipped by a dry run). A feature on by default that the backend
does not run is not refused but said (``Plan.note``, ``Backend.not_run``). The benchmarks default to the task's
own (``Task.default_benchmarks``). Reward weights by name (``--algo.weights``) must name rewards
of the task; each logger of ``--output.loggers`` must be able to start (its library installed,
its tracking URI usable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mrbench_core.registry import RegistryError, UnknownNameError
from mrbench_core.replay_kinds import ReplayRequest

#: what a task must define for each replay kind beyond the verifiers' blocks
TASK_HOOKS = {
    ReplayRequest.RUBRIC: "a prompt without its rubric (Task.without_rubric)",
    ReplayRequest.TEACHER: "a teacher context with privileged information (Task.teacher_messages)",
    ReplayRequest.FEEDBACK: "verifier feedback beyond its prompt (P_all of Task.replay_contexts, SDPO's "
                            "self-teacher context; a task whose verifier blocks are its prompt's own text has none)",
}


class PreflightError(ValueError):
    """The run cannot start; the message is one line saying why and what would fit."""


@dataclass
class Plan:
    """What pre-flight resolved: the objects the run uses and its end-of-run benchmarks
    (name -> data directory, None for the evaluator's own default)."""

    task: Any
    algorithm: Any
    backend_class: type
    benchmarks: dict[str, str | None]
    #: the features on by default that the backend does not run (``Backend.not_run``: said, not refused)
    not_run: list[str]

    def note(self) -> str | None:
        """The one line that says :attr:`not_run`, or None."""
        if not self.not_run:
            return None
        return (f"backend {self.backend_class.name!r} does not run what these defaults turn on: "
                f"{', '.join(self.not_run)}")


def fitting_algorithms(task: Any) -> list[str]:
    from algorithms.catalog import list_algorithms, resolve

    kinds = task.supported_replays()
    return [n for n in list_algorithms() if ReplayRequest(resolve(n).replay_request) in kinds]


def check_replay(task: Any, algorithm: Any, backend_class: type, cfg: Any) -> None:
    kind = ReplayRequest(algorithm.replay_request)
    if kind not in task.supported_replays():
        need = TASK_HOOKS.get(kind, f"the {kind.value} replay")
        raise PreflightError(f"--task {cfg.task.name} --algo {cfg.algo.name}: {cfg.algo.name} needs {need}, which "
                             f"task {cfg.task.name!r} does not define; algorithms that fit {cfg.task.name}: "
                             f"{', '.join(fitting_algorithms(task))}")
    why = backend_class.unsupported(algorithm) or backend_class.refuses(cfg, algorithm)
    if why:
        raise PreflightError(f"--algo {cfg.algo.name} --backend {cfg.backend.name}: {why}")


def check_settings(backend_class: type, cfg: Any) -> None:
    """Refuse the settings of ``cfg`` that ``backend_class`` would ignore (``Backend.ignored``),
    all of them in one line, in field order, with the other backends that honour them."""
    from harness.backends import BACKENDS
    from harness.backends.honours import field_paths

    def path(entry: str) -> str:
        return entry.split("=", 1)[0]

    ignored = backend_class.ignored(cfg)
    if not ignored:
        return
    order = {p: i for i, p in enumerate(field_paths())}
    ignored = sorted(ignored, key=lambda e: order.get(path(e), order.get(path(e).rsplit(".", 1)[0], len(order))))
    paths = {path(entry) for entry in ignored}

    def honours_them(name: str) -> bool:
        try:
            other = BACKENDS.get(name)
        except (RegistryError, ImportError):  # a plugin that cannot load is reported when it is chosen
            return False
        return not paths & {path(entry) for entry in other.ignored(cfg)}

    others = [name for name in BACKENDS.names() if name != backend_class.name and honours_them(name)]
    them = "it" if len(ignored) == 1 else "them"
    fits = f" or use a backend that honours {them} ({', '.join(others)})" if others else ""
    raise PreflightError(f"--backend {cfg.backend.name}: backend {backend_class.name!r} does not honour "
                         f"{'; '.join(ignored)}; leave {them} at the default{fits}")


def plan_benchmarks(task: Any, cfg: Any) -> dict[str, str | None]:
    from evals.registry import make_evaluator

    schedule = cfg.schedule
    if schedule.eval_benchmarks is None:
        chosen = dict(task.default_benchmarks(cfg.task.data_dir))
    else:
        chosen = {name: None for name in schedule.eval_benchmarks}
    if schedule.eval_data_dir is not None:
        chosen = {name: schedule.eval_data_dir for name in chosen}
    for name in chosen:
        evaluator_task = make_evaluator(name).task
        if evaluator_task != cfg.task.name and not schedule.eval_other_tasks:
            raise PreflightError(f"--schedule.eval_benchmarks: {name!r} evaluates task {evaluator_task!r}, not "
                                 f"{cfg.task.name!r}; {cfg.task.name}'s own: "
                                 f"{', '.join(task.default_benchmarks(cfg.task.data_dir)) or '(none)'}; set "
                                 f"--schedule.eval_other_tasks true to evaluate it anyway")
    return chosen


def check_weights(task: Any, algorithm: Any, cfg: Any) -> None:
    """Weights by reward name must name rewards the task emits (a list is checked against K at the step)."""
    from algorithms.weights import weight_names

    config = getattr(getattr(algorithm, "aggregator", None), "config", None) or algorithm.config
    named = weight_names(getattr(config, "weights", None))
    if not named:
        return
    known = [spec.name for spec in task.reward_specs()]
    for name in named:
        if name not in known:
            raise PreflightError(f"--algo.weights: unknown reward {name!r} for task {cfg.task.name!r}; known rewards: "
                                 f"{', '.join(known) or '(none declared)'}")


def preflight(cfg: Any, environment: bool = True) -> Plan:
    """Resolve and check everything a run needs except the model; raise :class:`PreflightError`.
    ``environment=False`` (a dry run) skips what only training needs: the backend's
    :meth:`~harness.backends.base.Backend.missing` check of this machine."""
    from algorithms.base import ConfigError
    from algorithms.catalog import get_algorithm
    from harness.backends import BACKENDS
    from harness.loggers import LoggerError, check_loggers
    from tasks.registry import make_task

    try:
        backend_class = BACKENDS.get(cfg.backend.name)
        check_settings(backend_class, cfg)
        try:
            task = make_task(cfg.task.name, **cfg.task.options)
        except TypeError as exc:  # a task option its constructor does not take
            raise PreflightError(f"--task.options: {exc}") from exc
        algorithm = get_algorithm(cfg.algo.name, **cfg.algo.params)
        check_replay(task, algorithm, backend_class, cfg)
        check_weights(task, algorithm, cfg)
        missing = task.data_problem(cfg.task.split, cfg.task.data_dir)
        if missing:
            raise PreflightError(f"--task {cfg.task.name} --task.data_dir: {missing}")
        benchmarks = plan_benchmarks(task, cfg)
        check_loggers(cfg)
        lacking = backend_class.missing(cfg) if environment else None
        if lacking:
            raise PreflightError(f"--backend {cfg.backend.name}: {lacking}")
    except (UnknownNameError, RegistryError, ConfigError, LoggerError) as exc:
        raise PreflightError(str(exc)) from exc
    except TypeError as exc:  # an algorithm or backend value of the wrong type
        raise PreflightError(f"--algo {cfg.algo.name}: {exc}") from exc
    return Plan(task, algorithm, backend_class, benchmarks, backend_class.not_run(cfg))
