"""Damaged or unusual inputs get one clear line (reliability probe 3: 1j, 3b, 3e, 7b, 7e, and the
strict JSON of evaluation outputs).

Each damaged file is named with its line (or byte) and what to do, exit code 2, no traceback:
a torn ``metrics.jsonl`` or ``samples.jsonl`` line on resume, half a ``state.pt``, a ``--config``
that is not UTF-8. A UTF-8 byte-order mark is accepted wherever text is read; predictions are
streamed (memory follows the cases matched, not the file); a killed checkpoint write leaves no
temporary file after the next start.
"""

from __future__ import annotations

import json
import math
import os
import tracemalloc
from pathlib import Path

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
import torch

from evals.prediction_formats import read_prediction_file, stream_prediction_file
from evals.prediction_match import match_predictions
from harness import cli
from harness.backends import checkpoint
from harness.config import resolve
from harness.records import RunRecord
from harness.runner import run
from mrbench_core.errors import DataError
from mrbench_core.jsonio import atomic_write_json, iter_jsonl

BOM = "\ufeff"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- records and checkpoints on resume ---------------------------------------------------------------
def _tiny_cfg(tmp_path: Path):
    return resolve(None, [("model.name", "tiny-random"), ("model.dtype", "float32"), ("schedule.steps", "2"),
                          ("sampling.prompts_per_step", "1"), ("sampling.group_size", "2"),
                          ("sampling.max_new_tokens", "4"), ("schedule.eval_limit", "1"),
                          ("output.dir", str(tmp_path / "rec"))])


def _interrupted_record(cfg) -> Path:
    """A record that stopped after step 1 (as a kill leaves it)."""
    rec = RunRecord.open(cfg)
    rec.start(seed=0, task_version="1", data_hash="x")
    rec.append_metrics({"step": 1, "reward_mean": 0.5})
    rec.append_samples([{"step": 1, "response": "a"}])
    rec.unlock()
    return rec.path


@pytest.mark.parametrize("name", ["metrics.jsonl", "samples.jsonl"])
def test_a_torn_record_line_on_resume_is_one_line_naming_file_and_line(tmp_path, capsys, name):
    cfg = _tiny_cfg(tmp_path)
    path = _interrupted_record(cfg)
    with open(path / name, "a") as fh:
        fh.write('{"step": 2, "reward_mean": 0.')  # torn: an outside edit or a copy cut short
    assert run(cfg) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{path / name}, line 2: corrupt or truncated JSON line" in line
    assert "repair or delete that line" in line and f"remove {path}" in line
    assert json.loads((path / "provenance.json").read_text())["status"] == "failed"


def test_half_a_checkpoint_is_one_line_naming_it(tmp_path, capsys):
    cfg = _tiny_cfg(tmp_path)
    path = _interrupted_record(cfg)
    model = torch.nn.Linear(4, 4)
    checkpoint.save(path / "checkpoint", step=1, model=model, optimizer=torch.optim.AdamW(model.parameters()),
                    data_position=1, fingerprint="f")
    state = path / "checkpoint" / "state.pt"
    data = state.read_bytes()
    state.write_bytes(data[: len(data) // 2])
    assert run(cfg) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{state}: unreadable checkpoint ({len(data) // 2} bytes" in line
    assert f"remove {state.parent} to restart the run from step 0" in line


def test_a_killed_checkpoint_write_leaves_no_temporary_file(tmp_path, monkeypatch):
    directory = tmp_path / "checkpoint"
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.AdamW(model.parameters())
    checkpoint.save(directory, step=1, model=model, optimizer=opt, data_position=0, fingerprint="f")
    assert json.loads((directory / "step.json").read_text()) == {"step": 1}
    # a write interrupted in this process (a signal's KeyboardInterrupt) removes its own temporary file
    real_save = torch.save

    def torn(payload, path):
        Path(path).write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(torch, "save", torn)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save(directory, step=2, model=model, optimizer=opt, data_position=0, fingerprint="f")
    monkeypatch.setattr(torch, "save", real_save)
    assert sorted(p.name for p in directory.iterdir()) == ["state.pt", "step.json"]
    # a kill -9 mid-write leaves one behind: the next start (load) removes it
    (directory / f".state.pt.tmp-{os.getpid() + 1}").write_bytes(b"half")
    state = checkpoint.load(directory)
    assert state["step"] == 1 and sorted(p.name for p in directory.iterdir()) == ["state.pt", "step.json"]


def test_a_file_that_is_not_a_checkpoint_is_refused_by_name(tmp_path):
    directory = tmp_path / "checkpoint"
    directory.mkdir()
    torch.save({"weights": 1}, directory / "state.pt")
    with pytest.raises(checkpoint.CheckpointError, match=r"state\.pt: not a mrbench checkpoint"):
        checkpoint.load(directory)


# -- configs and grids ---------------------------------------------------------------------------------
def test_a_config_that_is_not_utf8_is_named_with_line_and_byte(tmp_path, capsys):
    bad = tmp_path / "cfg.yaml"
    bad.write_bytes(b"seed: 1\nmodel: {name: \xff\xfe}\n")
    assert cli.main(["config", "show", "--config", str(bad)]) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"{bad}, row 2: not UTF-8 text" in line and "at byte 22" in line


def test_a_byte_order_mark_is_accepted_in_configs_grids_and_json_lines(tmp_path, capsys):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(BOM + "seed: 3\n", encoding="utf-8")
    assert cli.main(["config", "show", "--config", str(cfg)]) == 0
    assert "seed: 3" in capsys.readouterr().out
    rows = tmp_path / "rows.jsonl"
    rows.write_text(BOM + '{"a": 1}\r\n{"a": 2}\n', encoding="utf-8")
    assert [row for _, row in iter_jsonl(rows)] == [{"a": 1}, {"a": 2}]
    from harness.sweep.grid import load_grid

    grid = tmp_path / "g.yaml"
    grid.write_text(BOM + "grid: {seed: [0, 1]}\n", encoding="utf-8")
    assert load_grid(grid).axes == {"seed": [0, 1]}


# -- predictions --------------------------------------------------------------------------------------
@pytest.mark.parametrize("text,fmt", [
    (BOM + '{"id": "q0", "response": "A"}\n', "jsonl"),
    (BOM + '{"prompt": "p", "response": "A"}\n', "ifeval-responses"),
    (BOM + "SELECT 1\n", "sql-lines"),
    (BOM + '{"0": "SELECT 1"}', "bird-json"),
    (BOM + '{"id": "x", "result": "[]"}\n', "bfcl-result"),
])
def test_a_byte_order_mark_is_accepted_in_every_predictions_format(tmp_path, text, fmt):
    path = tmp_path / "pred.txt"
    path.write_text(text, encoding="utf-8")
    file = read_prediction_file(path)
    assert file.format == fmt and len(file.predictions) == 1


def test_predictions_that_are_not_utf8_name_the_line_and_byte(tmp_path):
    path = tmp_path / "pred.jsonl"
    path.write_bytes(b'{"id": "a", "response": "x"}\n{"id": "b", "response": "\xff"}\n')
    with pytest.raises(DataError, match=r"pred\.jsonl, row 2: not UTF-8 text \(invalid start byte at byte 54\)"):
        read_prediction_file(path)


def test_predictions_stream_with_memory_bounded_by_the_cases_used(tmp_path):
    from evals.base import EvalCase

    path = tmp_path / "big.jsonl"
    filler = "x" * 200
    with open(path, "w") as fh:
        # 8.5 MB, two rows of which match a case
        fh.writelines(json.dumps({"id": f"q{i}", "response": filler}) + "\n" for i in range(40_000))
    cases = [EvalCase(id="q7", messages=[], meta={}), EvalCase(id="q39999", messages=[], meta={})]
    file = stream_prediction_file(path)
    assert not isinstance(file.predictions, list)
    tracemalloc.start()
    result = match_predictions(file, cases)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert set(result.responses) == {"q7", "q39999"} and result.read == 40_000
    assert result.unmatched_count == 39_998 and len(result.unmatched) == 20
    assert peak < 2_000_000, peak  # the file is 8.5 MB


def test_sql_lines_stream_keeps_inner_blanks_and_drops_trailing_ones(tmp_path):
    path = tmp_path / "pred.sql"
    path.write_text("SELECT 1\n\nSELECT 2\r\n\n\n")
    preds = list(stream_prediction_file(path).predictions)
    assert [(p.position, p.response, p.where) for p in preds] == [(0, "SELECT 1", "line 1"), (1, "", "line 2"),
                                                                 (2, "SELECT 2", "line 3")]


# -- strict JSON in evaluation outputs ------------------------------------------------------------------
def _strict(text: str):
    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_evaluation_outputs_are_strict_json(tmp_path):
    atomic_write_json(tmp_path / "s.json", {"acc": math.nan, "inf": [math.inf], "ok": 0.5}, strict=True)
    assert _strict((tmp_path / "s.json").read_text()) == {"acc": None, "inf": [None], "ok": 0.5}

    data = os.environ.get("MRBENCH_DATA_DIR")
    if not data or not (Path(data) / "bird").is_dir():
        pytest.skip("MRBENCH_DATA_DIR has no BIRD data")
    from evals.runner import run_eval

    pred = tmp_path / "pred.jsonl"
    pred.write_text("".join(json.dumps({"id": i, "response": "SELECT 1"}) + "\n" for i in range(3)))
    summary = run_eval("bird-dev", out_dir=tmp_path / "out", predictions=str(pred), data_dir=data, limit=3)
    written = _strict((tmp_path / "out" / "summary.json").read_text())
    if isinstance(summary.get("execution_accuracy"), float) and math.isnan(summary["execution_accuracy"]):
        assert written["execution_accuracy"] is None  # no databases: undefined, null
    for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines():
        _strict(line)
