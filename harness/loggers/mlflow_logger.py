"""MLflow: to ``MLFLOW_TRACKING_URI`` when set, else a local file store under ``<record>/mlruns``
(read it with ``mlflow ui --backend-store-uri <record>/mlruns``). The experiment is
``MLFLOW_EXPERIMENT_NAME``, else the sweep's name for a sweep cell, else ``mrbench``. The run id is
stored in the record, so a resumed run continues the same MLflow run.

Logged: run name, tags (``task``, ``algorithm``, ``model``, ``seed``, ``git_commit``), the resolved
config as parameters (dotted keys), every metrics scalar at its step and the end-of-run benchmarks
(``eval/<benchmark>/<metric>`` at the last step); a reward's mean ``reward/<r>`` is
``reward/<r>/mean`` there (:func:`metric_key`). MLflow's file store is in maintenance mode; for
the local default the harness opts in to it (``MLFLOW_ALLOW_FILE_STORE``) for this process.
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from harness.loggers.base import Logger, RunInfo, flat_config
from harness.metric_names import reward_mean_name

BATCH = 500  # entries per log_batch call (MLflow caps a batch at 1000 metrics / 100 params)
PARAM_BATCH = 100
PARAM_MAX = 6000


def metric_key(key: str) -> str:
    """A metrics name as MLflow keeps it: a reward's mean ``reward/<r>`` becomes ``reward/<r>/mean``
    (the file store keeps a metric in a file named by its key, and ``reward/<r>/std`` needs a
    directory of that name), and characters MLflow does not accept become ``_``."""
    if reward_mean_name(key) is not None:
        key = f"{key}/mean"
    return _allowed(key)


def _allowed(name: str) -> str:
    return re.sub(r"[^\w\-. /:]", "_", name)


def tracking_uri(info: RunInfo | None = None) -> str | None:
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri or info is None:
        return uri
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    return (info.record / "mlruns").resolve().as_uri()


class MLflowLogger(Logger):
    name = "mlflow"
    extra = "mlflow"

    @classmethod
    def missing(cls, cfg: Any) -> str | None:
        try:
            from mlflow.tracking import MlflowClient
        except ImportError:
            return "logger mlflow needs the mlflow package: pip install 'mrbench[mlflow]'"
        uri = tracking_uri()
        if uri:
            try:
                MlflowClient(uri).tracking_uri  # resolves the store; contacts no server
            except Exception as exc:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                return f"logger mlflow: MLFLOW_TRACKING_URI={uri!r} is not usable: {first}"
        return None

    def start(self, info: RunInfo, run_id: str | None) -> str | None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri(info))
        if run_id is not None:
            self.run_id = run_id
            self.client.update_run(run_id, status="RUNNING")
            return run_id
        experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or info.group or "mrbench"
        found = self.client.get_experiment_by_name(experiment)
        exp_id = found.experiment_id if found is not None else self.client.create_experiment(experiment)
        tags = {("git_commit" if k == "commit" else k): str(v) for k, v in info.tags.items()}
        if info.group:
            tags["group"] = info.group
        run = self.client.create_run(exp_id, run_name=info.name, tags=tags)
        self.run_id = run.info.run_id
        params = [Param(_allowed(k), str(v)[:PARAM_MAX]) for k, v in flat_config(info.config).items()]
        for i in range(0, len(params), PARAM_BATCH):
            self.client.log_batch(self.run_id, params=params[i:i + PARAM_BATCH])
        return self.run_id

    def log_scalars(self, step: int, values: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(metric_key(k), v, now, step) for k, v in values.items()]
        for i in range(0, len(metrics), BATCH):
            self.client.log_batch(self.run_id, metrics=metrics[i:i + BATCH])

    def close(self, summary: dict[str, Any] | None) -> None:
        self.client.set_terminated(self.run_id, "FINISHED" if summary is not None else "FAILED")
