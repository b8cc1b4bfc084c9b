"""MLflow: to ``MLFLOW_TRACKING_URI`` when set, else a SQLite store ``<record>/mlflow.db``, which a
stock MLflow 3 client opens as it is (``mlflow ui --backend-store-uri sqlite:///<record>/mlflow.db``).
A record that an earlier release logged to a file store ``<record>/mlruns`` keeps it (with
``MLFLOW_ALLOW_FILE_STORE`` for this process), so a resumed run continues its MLflow run. The
experiment is ``MLFLOW_EXPERIMENT_NAME``, else the sweep's name for a sweep cell, else
``mrbench``. The run id is stored in the record, so a resumed run continues the same MLflow run.

Logged: run name, tags (``task``, ``algorithm``, ``model``, ``seed``, ``git_commit``), the resolved
config as parameters (dotted keys), every metrics scalar at its step and the end-of-run benchmarks
(``eval/<benchmark>/<metric>`` at the last step); a reward's mean ``reward/<r>`` is
``reward/<r>/mean`` there (:func:`metric_key`).

Bounded: an ``http(s)`` tracking server is first reached with a plain TCP connection of at most
:data:`~harness.loggers.base.REACH_TIMEOUT_S` seconds; one that does not answer turns the logger off with one warning
(instead of MLflow's retry backoff, minutes per run). MLflow's HTTP retries and timeout are kept
short unless ``MLFLOW_HTTP_REQUEST_MAX_RETRIES`` / ``MLFLOW_HTTP_REQUEST_TIMEOUT`` are set.
"""

from __future__ import annotations

import logging
import os
import re
import time
from typing import Any
from urllib.parse import urlsplit

from harness.loggers.base import Logger, RunInfo, check_reachable, flat_config
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


HTTP_DEFAULTS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                 "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
DB_FILE = "mlflow.db"
OLD_FILE_STORE = "mlruns"


def tracking_uri(info: RunInfo | None = None) -> str | None:
    """``MLFLOW_TRACKING_URI``; else (with a record) its SQLite store, or the file store of a record
    an earlier release logged to."""
    uri = os.environ.get("MLFLOW_TRACKING_URI")
    if uri or info is None:
        return uri
    record = info.record.resolve()
    if (record / OLD_FILE_STORE).is_dir() and not (record / DB_FILE).exists():
        os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        return (record / OLD_FILE_STORE).as_uri()
    return f"sqlite:///{record / DB_FILE}"


def _is_file_store(uri: str) -> bool:
    scheme = urlsplit(uri).scheme
    return scheme in ("", "file") or (len(scheme) == 1 and uri[1:3] in (":\\", ":/"))


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
                way_out = ""
                if _is_file_store(uri) and "maintenance mode" in str(exc):
                    first = "MLflow keeps file stores in maintenance mode and refuses them by default"
                    way_out = (f"; use a database store (MLFLOW_TRACKING_URI=sqlite:///<dir>/{DB_FILE}), or set "
                               f"MLFLOW_ALLOW_FILE_STORE=true to keep this file store")
                return f"logger mlflow: MLFLOW_TRACKING_URI={uri!r} is not usable: {first}{way_out}"
        return None

    def start(self, info: RunInfo, run_id: str | None) -> str | None:
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        uri = tracking_uri(info)
        check_reachable(uri, "MLflow tracking server")
        for var, value in HTTP_DEFAULTS.items():
            os.environ.setdefault(var, value)
        for name in ("mlflow.store.db.utils", "alembic"):  # the new database's table creation, not news
            logging.getLogger(name).setLevel(logging.WARNING)
        self.client = MlflowClient(uri)
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
