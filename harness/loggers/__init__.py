"""Training logs where researchers already look: ``--output.loggers tensorboard,wandb,mlflow``.

One module per library behind :class:`~harness.loggers.base.Logger`; each library comes in its
extra (``mrbench[tensorboard]``, ``[wandb]``, ``[mlflow]``). Pre-flight (:func:`check_loggers`)
refuses a logger that cannot start in one line naming the extra; :func:`open_loggers` attaches the
chosen ones to a run record, which tells them every metrics and samples row after writing it.
docs/logging.md lists what is logged.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from harness.loggers.base import Logger, LoggerSet, RunInfo

#: logger name -> (module, class)
LOGGERS = {
    "tensorboard": ("harness.loggers.tensorboard_logger", "TensorBoardLogger"),
    "wandb": ("harness.loggers.wandb_logger", "WandbLogger"),
    "mlflow": ("harness.loggers.mlflow_logger", "MLflowLogger"),
}


class LoggerError(ValueError):
    """An unknown logger name or a logger that cannot start; the message is one line."""


def logger_names(value: Any) -> list[str]:
    """``output.loggers`` (a comma-separated string or a list) -> the names, checked, in order."""
    items = value.split(",") if isinstance(value, str) else list(value or [])
    names: list[str] = []
    for item in items:
        name = str(item).strip().lower()
        if not name or name == "none":
            continue
        if name not in LOGGERS:
            raise LoggerError(f"--output.loggers: unknown logger {name!r}; known: {', '.join(LOGGERS)}")
        if name not in names:
            names.append(name)
    return names


def logger_class(name: str) -> type[Logger]:
    module, cls = LOGGERS[name]
    return getattr(importlib.import_module(module), cls)


def check_loggers(cfg: Any) -> None:
    """Pre-flight: raise :class:`LoggerError` naming the first chosen logger that cannot start."""
    for name in logger_names(cfg.output.loggers):
        why = logger_class(name).missing(cfg)
        if why:
            raise LoggerError(f"--output.loggers: {why}")


def run_info(cfg: Any, record: Any) -> RunInfo:
    from harness.config import model_slug
    from harness.records import git_commit

    tags = {"task": cfg.task.name, "algorithm": cfg.algo.name, "model": cfg.model.name, "seed": str(cfg.seed)}
    commit = git_commit().get("commit")
    if commit:
        tags["commit"] = commit
    name = f"{cfg.task.name}-{cfg.algo.name}-{model_slug(cfg.model.name)}-seed{cfg.seed}"
    try:  # a record under the root (every sweep cell): its path there, variant directory included
        name = Path(record.path).resolve().relative_to(Path(cfg.output.root).resolve()).as_posix().replace("/", "-")
    except ValueError:
        pass
    return RunInfo(name=name, record=record.path, config=cfg.to_dict(), tags=tags, group=cfg.output.logger_group)


def open_loggers(cfg: Any, record: Any) -> LoggerSet | None:
    """Start the chosen loggers on ``record`` (None when there are none): they log the rows already
    in ``metrics.jsonl`` that they have not logged, then every new one."""
    names = logger_names(cfg.output.loggers)
    if not names:
        return None
    loggers = LoggerSet([logger_class(n)() for n in names], run_info(cfg, record))
    loggers.start(record.metrics())
    record.observers.append(loggers)
    return loggers
