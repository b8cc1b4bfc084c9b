"""Every logger start is bounded, and MLflow's stores are ones a stock client opens (reliability
probe 4, L3 and L4, and WANDB_DIR): a tracking server that is down costs one TCP connection
attempt and one warning, not MLflow's minutes of retries; the default MLflow store is
``sqlite:///<record>/mlflow.db``; a ``file:`` URI MLflow refuses gets the two ways out; W&B
honours ``WANDB_DIR`` and a W&B server that is down is handled like MLflow's.
"""

from __future__ import annotations

import io
import os
import sys
import types

import pytest

from harness.config import resolve
from harness.loggers.base import LoggerSet, RunInfo
from harness.loggers.mlflow_logger import MLflowLogger
from harness.loggers.wandb_logger import WandbLogger
from harness.preflight import PreflightError, preflight

DOWN = "http://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for var in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE", "MLFLOW_EXPERIMENT_NAME", "WANDB_DIR",
                "WANDB_MODE", "WANDB_BASE_URL", "WANDB_INIT_TIMEOUT"):
        monkeypatch.delenv(var, raising=False)


def _start(logger, record) -> str:
    out = io.StringIO()
    loggers = LoggerSet([logger], RunInfo("n", record, {"seed": 0}), out=out)
    loggers.start([])
    return out.getvalue()


def test_an_mlflow_server_that_is_down_is_one_warning_and_no_client_call(tmp_path, monkeypatch):
    import mlflow.tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", DOWN)
    calls = []

    class Client:  # MLflow's client would retry for minutes against the server
        def __init__(self, uri):
            calls.append(uri)
            raise AssertionError("the client was reached")

    monkeypatch.setattr(mlflow.tracking, "MlflowClient", Client)
    err = _start(MLflowLogger(), tmp_path)
    assert calls == []
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"MLflow tracking server {DOWN} did not answer within 3 s" in lines[0]
    assert "logger mlflow failed (start" in lines[0]


def test_the_default_mlflow_store_is_sqlite_a_stock_client_opens(tmp_path):
    from mlflow.tracking import MlflowClient

    logger = MLflowLogger()
    assert _start(logger, tmp_path) == ""
    logger.log_scalars(1, {"loss": 0.25})
    logger.close({})
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    assert [r.info.run_id for r in runs] == [logger.run_id] and runs[0].data.metrics == {"loss": 0.25}
    assert not (tmp_path / "mlruns").exists()


def test_a_writable_file_uri_refused_by_mlflow_names_both_ways_out(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlok").as_uri())
    cfg = resolve(None, [("task", "toolcall"), ("model", "tiny-random"), ("output.loggers", "mlflow")])
    with pytest.raises(PreflightError) as info:
        preflight(cfg, environment=False)
    message = str(info.value)
    assert "\n" not in message and "sqlite:///" in message and "MLFLOW_ALLOW_FILE_STORE=true" in message
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    preflight(cfg, environment=False)  # the second way out works


class _FakeWandb(types.ModuleType):
    def __init__(self):
        super().__init__("wandb")
        self.inits = []
        self.Settings = lambda **kw: kw

    def init(self, **kwargs):
        self.inits.append(kwargs)
        return types.SimpleNamespace(finish=lambda **kw: None)


def test_wandb_honours_wandb_dir_and_bounds_its_init(tmp_path, monkeypatch):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "elsewhere"))
    assert _start(WandbLogger(), tmp_path / "rec") == ""
    (call,) = fake.inits
    assert call["dir"] == str(tmp_path / "elsewhere") and call["settings"]["init_timeout"] <= 30
    monkeypatch.delenv("WANDB_DIR")
    _start(WandbLogger(), tmp_path / "rec")
    assert fake.inits[1]["dir"] == str(tmp_path / "rec")


def test_a_wandb_server_that_is_down_is_one_warning_and_no_init(tmp_path, monkeypatch):
    fake = _FakeWandb()
    monkeypatch.setitem(sys.modules, "wandb", fake)
    monkeypatch.setenv("WANDB_MODE", "online")
    monkeypatch.setenv("WANDB_BASE_URL", DOWN)
    err = _start(WandbLogger(), tmp_path)
    assert fake.inits == [] and len(err.strip().splitlines()) == 1
    assert f"W&B server {DOWN} did not answer within 3 s" in err
    assert os.environ.get("WANDB_MODE") == "online"
