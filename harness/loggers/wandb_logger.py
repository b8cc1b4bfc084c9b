"""Weights & Biases, with its usual environment: ``WANDB_PROJECT`` (default ``mrbench``),
``WANDB_MODE`` (``offline`` works with no network: the run lands under ``<record>/wandb/`` and
``wandb sync`` uploads it later), ``WANDB_ENTITY``, ``WANDB_DIR`` (where the run directory goes; default:
the record's folder). The run id is stored in the record, so a
resumed run continues the same W&B run; a sweep's cells share its name as their group.

Logged: name, group, tags (``task:``, ``algorithm:``, ``model:``, ``seed:``, ``commit:``), the
resolved config, every metrics scalar at its step, a ``samples`` table per step (example, each
reward, response) and the end-of-run benchmarks (history and summary).

Bounded: online (``WANDB_MODE`` unset, ``online`` or ``run``), the W&B server (``WANDB_BASE_URL``,
default :data:`DEFAULT_BASE_URL`) must accept a connection within
:data:`~harness.loggers.base.REACH_TIMEOUT_S` seconds, else the logger is off with one warning;
``wandb.init`` waits at most ``WANDB_INIT_TIMEOUT`` seconds (default :data:`INIT_TIMEOUT_S`).
"""

from __future__ import annotations

import os
import uuid
from typing import Any

from harness.loggers.base import Logger, RunInfo, check_reachable

DEFAULT_BASE_URL = "https://api.wandb.ai"
INIT_TIMEOUT_S = 30.0
MODES = ("online", "offline", "disabled", "dryrun", "run", "shared")
TAG_MAX = 64  # W&B's limit on one tag


def run_dir(info: RunInfo) -> str:
    """Where W&B puts its ``wandb/`` run directory: ``WANDB_DIR`` when set, else the record."""
    return os.environ.get("WANDB_DIR") or str(info.record)


class WandbLogger(Logger):
    name = "wandb"
    extra = "wandb"

    @classmethod
    def missing(cls, cfg: Any) -> str | None:
        try:
            import wandb  # noqa: F401
        except ImportError:
            return "logger wandb needs the wandb package: pip install 'mrbench[wandb]'"
        mode = os.environ.get("WANDB_MODE")
        if mode and mode not in MODES:
            return f"logger wandb: WANDB_MODE={mode!r} is not one of {', '.join(MODES)}"
        return None

    def start(self, info: RunInfo, run_id: str | None) -> str | None:
        import wandb

        if (os.environ.get("WANDB_MODE") or "online") in ("online", "run"):
            check_reachable(os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL, "W&B server")
        run_id = run_id or uuid.uuid4().hex[:12]
        tags = [f"{k}:{v}"[:TAG_MAX] for k, v in info.tags.items()]
        timeout = float(os.environ.get("WANDB_INIT_TIMEOUT") or INIT_TIMEOUT_S)
        settings = wandb.Settings(console="off", silent=True, x_disable_stats=True, x_disable_meta=True,
                                  init_timeout=timeout)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT") or "mrbench", id=run_id, resume="allow",
                              name=info.name, group=info.group, tags=tags, config=info.config,
                              dir=run_dir(info), reinit="create_new", settings=settings)
        self.columns: list[str] | None = None
        return run_id

    def log_scalars(self, step: int, values: dict[str, float]) -> None:
        self.run.log(values, step=step)

    def log_samples(self, step: int, rows: list[dict[str, Any]]) -> None:
        import wandb

        names = sorted({k for r in rows for k in (r.get("rewards") or {})})
        table = wandb.Table(columns=["step", "example", *[f"reward/{n}" for n in names], "response"])
        for r in rows:
            rewards = r.get("rewards") or {}
            table.add_data(step, str(r.get("example")), *[rewards.get(n) for n in names], str(r.get("response")))
        self.run.log({"samples": table}, step=step)

    def log_benchmarks(self, step: int, values: dict[str, float], results: dict[str, Any]) -> None:
        self.run.summary.update(values)

    def close(self, summary: dict[str, Any] | None) -> None:
        self.run.finish(exit_code=0 if summary is not None else 1)
