"""--output.loggers end to end on the tiny model: TensorBoard, W&B (offline) and MLflow (the record's
SQLite store, opened by a stock MLflow client) read back with their own libraries, resume into the same logger run, pre-flight refusals,
and the no-learning-signal warning of a toolcall run whose rewards never vary."""

from __future__ import annotations

import json
import math
import struct
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.config import resolve
from harness.loggers.base import Logger, LoggerSet, RunInfo
from harness.loggers.mlflow_logger import metric_key
from harness.preflight import PreflightError, preflight
from harness.records import load_record
from harness.training.run_loop import RunLoop

RECORD = ("toolcall", "gdpo", "tiny-random", "seed0")


@pytest.fixture(autouse=True)
def offline_loggers(tmp_path, monkeypatch):
    """W&B offline with every directory under tmp (no network, nothing in the home directory)."""
    for var, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": tmp_path / "wbcfg",
                       "WANDB_CACHE_DIR": tmp_path / "wbcache", "WANDB_DATA_DIR": tmp_path / "wbdata",
                       "WANDB_PROJECT": "mrbench-test"}.items():
        monkeypatch.setenv(var, str(value))
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_EXPERIMENT_NAME", raising=False)


def _args(root: Path, *extra: str) -> list[str]:
    return ["run", "--task", "toolcall", "--model", "tiny-random", "--algo", "gdpo", "--output.root", str(root),
            "--sampling.prompts_per_step", "1", "--sampling.group_size", "2", "--sampling.max_new_tokens", "6",
            "--schedule.eval_limit", "1", "--schedule.eval_max_new_tokens", "4", "--output.credit_groups", "0",
            "--output.loggers", "tensorboard,wandb,mlflow", *extra]


# -- reading each library's files back ------------------------------------------------------------


def tensorboard_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def _wandb_records(path: Path):
    """The records of a ``.wandb`` transaction log (W&B's LevelDB-style log: 7-byte header, 32 KiB
    blocks of chunks with a 7-byte crc/length/type header each)."""
    data, block = path.read_bytes(), 32 * 1024
    assert data[:4] == b":W&B"
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            pos += left
            continue
        body, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        if kind == 1:
            yield body
        elif kind == 2:
            pending = body
        elif kind == 3:
            pending += body
        elif kind == 4:
            yield pending + body
            pending = b""


def wandb_history(record: Path) -> tuple[set[str], list[dict]]:
    """(the run ids, every history row) of the offline runs under ``record/wandb``."""
    from wandb.proto import wandb_internal_pb2 as pb

    ids, rows = set(), []
    for path in sorted(record.glob("wandb/offline-run-*/run-*.wandb")):
        ids.add(path.stem[len("run-"):])
        for body in _wandb_records(path):
            rec = pb.Record()
            rec.ParseFromString(body)
            if rec.WhichOneof("record_type") == "history":
                rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in rec.history.item})
    return ids, rows


def mlflow_runs(record: Path):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{(record / 'mlflow.db').resolve()}")
    runs = [r for e in client.search_experiments() for r in client.search_runs([e.experiment_id])]
    return client, runs


def numbers(row: dict) -> dict[str, float]:
    return {k: float(v) for k, v in row.items() if k != "step" and isinstance(v, (int, float))
            and not isinstance(v, bool) and math.isfinite(float(v))}


# -- one two-step run shared by the read-back tests -----------------------------------------------


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("logged")
    mp = pytest.MonkeyPatch()
    for var, value in {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": root / "wbcfg",
                       "WANDB_CACHE_DIR": root / "wbcache", "WANDB_DATA_DIR": root / "wbdata"}.items():
        mp.setenv(var, str(value))
    mp.delenv("MLFLOW_TRACKING_URI", raising=False)
    err = []
    mp.setattr(sys, "stderr", _Tee(sys.stderr, err))
    try:
        code = cli.main(_args(root, "--schedule.steps", "3", "--schedule.stop_without_signal", "true",
                              "--algo.weights", '{"format": {"linear": [1.0, 0.2, 5]}, "correctness": 2.0}'))
    finally:
        mp.undo()
    assert code == 0
    path = root.joinpath(*RECORD)
    return path, load_record(path), "".join(err)


class _Tee:
    def __init__(self, stream, into):
        self.stream, self.into = stream, into

    def write(self, text):
        self.into.append(text)
        return self.stream.write(text)

    def flush(self):
        self.stream.flush()

    def __getattr__(self, name):
        return getattr(self.stream, name)


def test_a_run_without_signal_warns_within_two_steps_records_it_and_stops(logged_run):
    path, rec, err = logged_run
    steps = [m["step"] for m in rec["metrics"]]
    assert steps == [1, 2]  # three planned, stopped after the warning (schedule.stop_without_signal)
    assert all(m["frac_groups_no_signal"] == 1.0 for m in rec["metrics"])
    assert all(m["reward/format/frac_groups_no_signal"] == 1.0 for m in rec["metrics"])
    assert "no learning signal" in err and "2 consecutive steps" in err
    summary = rec["provenance"]["summary"]
    assert summary["no_signal_warning_step"] == 2 and summary["stopped_without_signal"] == 2
    assert summary["steps_without_signal"] == 2 and summary["frac_groups_no_signal_mean"] == 1.0


def test_the_weight_in_force_is_logged_per_step(logged_run):
    _, rec, _ = logged_run
    assert [m["reward/format/weight"] for m in rec["metrics"]] == pytest.approx([1.0, 0.8])
    assert [m["reward/correctness/weight"] for m in rec["metrics"]] == [2.0, 2.0]


def test_docs_logging_md_names_every_key_the_run_wrote(logged_run):
    doc = (Path(__file__).resolve().parents[1] / "docs" / "logging.md").read_text()
    for key in {k for row in logged_run[1]["metrics"] for k in row}:
        parts = key.split("/")
        if parts[0] in ("reward", "adv", "credit") and len(parts) > 1:
            parts[1] = "<r>"
        if key.startswith("algo/reward_weight_"):
            parts = ["algo", "reward_weight_<k>"]
        assert f"`{'/'.join(parts)}`" in doc, key


def test_tensorboard_event_file_holds_every_scalar_at_both_steps(logged_run):
    path, rec, _ = logged_run
    assert list((path / "tb").glob("events.out.tfevents.*"))
    scalars = tensorboard_scalars(path / "tb")
    for key in ("reward/format", "reward/format/std", "reward/correctness/frac_groups_varying",
                "adv/format/abs_mean", "credit/correctness/replay_share", "frac_groups_no_signal"):
        assert [s for s, _ in scalars[key]] == [1, 2], key
    for row in rec["metrics"]:
        for key, value in numbers(row).items():
            got = dict(scalars[key])[row["step"]]
            assert got == pytest.approx(value, rel=1e-5, abs=1e-6), key


def test_wandb_offline_history_holds_the_same_values(logged_run):
    path, rec, _ = logged_run
    ids, rows = wandb_history(path)
    assert len(ids) == 1 and json.loads((path / "loggers.json").read_text())["wandb"]["id"] in ids
    by_step = {r["_step"]: r for r in rows if "_step" in r}
    assert sorted(by_step) == [1, 2]
    for row in rec["metrics"]:
        logged = by_step[row["step"]]
        for key, value in numbers(row).items():
            assert logged[key] == pytest.approx(value), key
        assert logged["samples/_type"] == "table-file"  # the sampled responses with their rewards


def test_mlflow_store_metrics_equal_metrics_jsonl(logged_run):
    path, rec, _ = logged_run
    client, runs = mlflow_runs(path)
    assert len(runs) == 1
    run = runs[0]
    assert run.data.tags["task"] == "toolcall" and run.data.tags["algorithm"] == "gdpo"
    assert run.data.params["algo.name"] == "gdpo" and run.data.params["sampling.group_size"] == "2"
    assert run.info.status == "FINISHED"
    for key in numbers(rec["metrics"][0]):
        history = {m.step: m.value for m in client.get_metric_history(run.info.run_id, metric_key(key))}
        expected = {r["step"]: float(r[key]) for r in rec["metrics"] if key in numbers(r)}
        assert history == pytest.approx(expected), key
    bench = [k for k in run.data.metrics if k.startswith("eval/bfcl-v4/")]
    assert bench  # the end-of-run benchmarks


def test_a_resumed_run_logs_step_two_once_to_the_same_logger_runs(tmp_path, monkeypatch):
    original = RunLoop.run_step

    def killed_at_step_two(self, n, *args, **kwargs):
        if n == 1:
            raise KeyboardInterrupt("killed")
        return original(self, n, *args, **kwargs)

    monkeypatch.setattr(RunLoop, "run_step", killed_at_step_two)
    assert cli.main(_args(tmp_path, "--schedule.steps", "2")) == cli.INTERRUPTED_EXIT  # one line, no traceback
    path = tmp_path.joinpath(*RECORD)
    first = json.loads((path / "loggers.json").read_text())
    assert {n: s["last_step"] for n, s in first.items()} == {"tensorboard": 1, "wandb": 1, "mlflow": 1}
    monkeypatch.setattr(RunLoop, "run_step", original)
    assert cli.main(_args(tmp_path, "--schedule.steps", "2")) == 0
    again = json.loads((path / "loggers.json").read_text())
    assert {n: s["id"] for n, s in again.items()} == {n: s["id"] for n, s in first.items()}
    assert [m["step"] for m in load_record(path)["metrics"]] == [1, 2]
    assert [s for s, _ in tensorboard_scalars(path / "tb")["reward/format"]] == [1, 2]
    ids, rows = wandb_history(path)
    assert ids == {first["wandb"]["id"]}
    assert sorted(r["_step"] for r in rows if "reward/format" in r) == [1, 2]
    client, runs = mlflow_runs(path)
    assert [r.info.run_id for r in runs] == [first["mlflow"]["id"]]
    assert [m.step for m in client.get_metric_history(runs[0].info.run_id, "reward/format/mean")] == [1, 2]


# -- refusals and failures --------------------------------------------------------------------------


def _cfg(*pairs: tuple[str, str]):
    return resolve(None, [("task", "toolcall"), ("model", "tiny-random"), ("algo", "gdpo"), *pairs])


def test_preflight_refuses_an_unknown_logger_and_a_missing_library_naming_the_extra(monkeypatch):
    with pytest.raises(PreflightError, match="unknown logger 'neptune'; known: tensorboard, wandb, mlflow"):
        preflight(_cfg(("output.loggers", "tensorboard,neptune")), environment=False)
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb raises ImportError
    with pytest.raises(PreflightError, match=r"pip install 'mrbench\[wandb\]'"):
        preflight(_cfg(("output.loggers", "wandb")), environment=False)


def test_preflight_refuses_a_bad_mlflow_uri(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "nosuchscheme://somewhere")
    with pytest.raises(PreflightError, match="MLFLOW_TRACKING_URI='nosuchscheme://somewhere' is not usable"):
        preflight(_cfg(("output.loggers", "mlflow")), environment=False)


def test_cli_refusal_is_one_line_exit_two(tmp_path, capsys):
    assert cli.main(_args(tmp_path, "--output.loggers", "tensorbored")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown logger 'tensorbored'" in err


class _Recording(Logger):
    name = "recording"

    def __init__(self, fail_at: int | None = None):
        self.fail_at, self.steps = fail_at, []

    def start(self, info, run_id):
        return run_id or "r1"

    def log_scalars(self, step, values):
        if step == self.fail_at:
            raise OSError("disk full")
        self.steps.append(step)


def test_a_logger_failing_mid_run_warns_once_and_the_others_go_on(tmp_path, capsys):
    broken, fine = _Recording(fail_at=2), _Recording()
    fine.name = "fine"
    loggers = LoggerSet([broken, fine], RunInfo("n", tmp_path, {}))
    loggers.start([])
    for step in (1, 2, 3):
        loggers.metrics({"step": step, "loss": 0.5})
    loggers.close({})
    err = capsys.readouterr().err
    assert err.count("logger recording failed") == 1 and "disk full" in err
    assert broken.steps == [1] and fine.steps == [1, 2, 3]


def test_a_restarted_logger_set_skips_logged_steps_and_backfills_the_rest(tmp_path):
    first = _Recording()
    s1 = LoggerSet([first], RunInfo("n", tmp_path, {}))
    s1.start([])
    s1.metrics({"step": 1, "loss": 1.0})
    again = _Recording()
    s2 = LoggerSet([again], RunInfo("n", tmp_path, {}))
    s2.start([{"step": 1, "loss": 1.0}, {"step": 2, "loss": 0.5}])  # step 2 written while it was off
    s2.metrics({"step": 3, "loss": 0.2})
    assert first.steps == [1] and again.steps == [2, 3]


def test_sweep_gives_every_cell_the_loggers_and_the_sweep_name_as_group(tmp_path):
    from harness.sweep.command import with_loggers
    from harness.sweep.grid import expand, load_grid

    grid = tmp_path / "g.yaml"
    grid.write_text(f"name: lg\nroot: {tmp_path / 'r'}\nset: {{task: toolcall, model: tiny-random}}\n"
                    "grid: {algo.name: [grpo, gdpo]}\n")
    spec = load_grid(grid)
    cells = with_loggers(expand(spec), "tensorboard,mlflow", spec.name)
    assert [(c.cfg.output.loggers, c.cfg.output.logger_group) for c in cells] == [("tensorboard,mlflow", "lg")] * 2
    assert len({c.record_dir for c in cells}) == 2  # one record, so one logger run, per cell
