"""Which run-config settings a backend acts on, and the walk that finds the ones it would ignore.

Every field of :class:`harness.config.RunConfig` is one of:

- **the harness's own** (:data:`HARNESS_FIELDS`): pre-flight, the runner, the record, the
  end-of-run evaluation and the loggers act on it, whatever the backend;
- **honoured by the backend**: named in its ``Backend.honours``, a set of dotted field paths
  (``sampling.top_k``) or of whole sections that only it reads (``backend.local``);
- **ignored by the backend**: everything else. Pre-flight then refuses any value other than the
  field's default (or its "off" value, :data:`OFF_VALUES`, which a backend that lacks the feature
  runs as anyway), naming the field and the backend (:func:`ignored_settings`). A default that
  turns a feature on is never refused: pre-flight says instead, in one line and in the record's
  provenance, which of those features the backend does not run (:func:`features_not_run`).

A backend that runs the shared step honours what the step reads (:data:`STEP_FIELDS`), and one that
hands its engine to the shared run loop what the loop reads (:data:`LOOP_FIELDS`): its ``honours``
is those sets and its engine's own fields.

A new field is therefore refused by every backend until a backend declares it. The plugin
backends' options, ``backend.options.<name>``, are one field per name: a backend honours its own
by naming ``backend.options.<its name>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from typing import Any

#: fields the harness acts on itself, for every backend (pre-flight builds the task and the
#: algorithm from them; the runner opens the record, evaluates, logs and cleans up)
HARNESS_FIELDS = frozenset({
    "task.name", "task.options", "algo.name", "algo.params", "backend.name",
    "schedule.eval_benchmarks", "schedule.eval_other_tasks", "schedule.eval_limit", "schedule.eval_max_new_tokens",
    "schedule.eval_max_minutes", "schedule.eval_data_dir",
    "output.root", "output.dir", "output.keep_checkpoint", "output.loggers", "output.logger_group",
})

#: fields the shared step acts on (:class:`harness.training.step.Step` and its prologue,
#: :mod:`harness.training.prologue`): every backend that runs the Step honours them
STEP_FIELDS = frozenset({
    "task.data_dir", "task.split", "task.limit", "task.verifier_timeout_s", "sampling.prompts_per_step",
    "sampling.max_prompt_tokens", "schedule.steps", "schedule.log_samples", "output.credit_groups", "seed",
})

#: fields the shared run loop acts on (:class:`harness.training.run_loop.RunLoop`): every backend
#: that hands its engine to the loop honours them
LOOP_FIELDS = frozenset({"schedule.checkpoint_every", "schedule.no_signal_steps", "schedule.stop_without_signal"})

#: the value that switches a feature off: a backend without the feature runs as if it were set,
#: so that value is never refused (``--output.credit_groups 0`` on a backend that writes no credit log)
OFF_VALUES: dict[str, Any] = {
    "task.verifier_timeout_s": 0.0, "task.limit": None,
    "model.lora": False, "model.gradient_checkpointing": False,
    "sampling.top_k": None, "sampling.top_p": 1.0,
    "optim.kl_coef": 0.0, "optim.entropy_coef": 0.0, "optim.weight_decay": 0.0, "optim.grad_clip": 0.0,
    "schedule.checkpoint_every": 0, "schedule.log_samples": 0, "schedule.stop_without_signal": False,
    "output.credit_groups": 0, "output.save_model": False, "output.save_merged": False,
}

OPTIONS = "backend.options"


def settings(cfg: Any, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every leaf field of the run config ``cfg`` as ``(dotted path, value, default)``, in
    definition order. ``backend.options`` gives one ``backend.options.<name>`` per plugin backend
    named in it (default: absent, ``None``)."""
    defaults = type(cfg)()
    for f in dataclasses.fields(cfg):
        path, value = f"{prefix}{f.name}", getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            yield from settings(value, path + ".")
        elif path == OPTIONS:
            for name, options in value.items():
                yield f"{OPTIONS}.{name}", options, None
        else:
            yield path, value, getattr(defaults, f.name)


def field_paths() -> list[str]:
    """The dotted path of every run-config field (``backend.options`` as one)."""
    from harness.config import RunConfig

    def walk(cls: type, prefix: str) -> Iterator[str]:
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            if dataclasses.is_dataclass(default):
                yield from walk(type(default), f"{prefix}{f.name}.")
            else:
                yield f"{prefix}{f.name}"

    return list(walk(RunConfig, ""))


def covers(declared: Iterable[str], path: str) -> bool:
    """Whether ``path`` is one of ``declared``, or lies in a declared section."""
    return any(path == d or path.startswith(d + ".") for d in declared)


def is_off(path: str, value: Any) -> bool:
    """Whether ``value`` is the off value of field ``path`` (:data:`OFF_VALUES`)."""
    if path not in OFF_VALUES:
        return False
    off = OFF_VALUES[path]
    if isinstance(off, bool) or off is None:
        return value is off
    return not isinstance(value, bool) and value == off


def shown(value: Any) -> str:
    """A value as it is written on the command line (``float32``, ``3``, ``true``, ``[a, b]``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(shown(v) for v in value) + "]"
    return str(value)


def ignored_settings(cfg: Any, honours: Iterable[str]) -> list[str]:
    """``path=value`` of every setting of ``cfg`` set away from its default (and from its off
    value) that neither the harness nor ``honours`` covers, in field order."""
    declared = HARNESS_FIELDS | frozenset(honours)
    return [f"{path}={shown(value)}" for path, value, default in settings(cfg)
            if value != default and not is_off(path, value) and not covers(declared, path)]


def features_not_run(cfg: Any, honours: Iterable[str]) -> list[str]:
    """``path=value`` of every feature ``cfg`` leaves on by default (a field at a default other than
    its off value, :data:`OFF_VALUES`) that neither the harness nor ``honours`` covers: what a backend
    would silently not do, since a default is never refused. In field order."""
    declared = HARNESS_FIELDS | frozenset(honours)
    return [f"{path}={shown(value)}" for path, value, default in settings(cfg)
            if path in OFF_VALUES and value == default and not is_off(path, value) and not covers(declared, path)]


def unknown_declarations(honours: Iterable[str]) -> list[str]:
    """Entries of ``honours`` (or of :data:`HARNESS_FIELDS`) that name no run-config field or
    section: a misspelt declaration would otherwise refuse the field it meant to honour (a checker:
    the tests run it on every backend's declaration)."""
    paths = field_paths()

    def known(entry: str) -> bool:
        if entry.startswith(OPTIONS + ".") and entry.count(".") == 2:
            return True
        return any(p == entry or p.startswith(entry + ".") for p in paths)

    return sorted(e for e in set(honours) | HARNESS_FIELDS | set(OFF_VALUES) if not known(e))
