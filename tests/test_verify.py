"""Determinism, guarded: the same tiny configuration run twice (in one process, and in another
process) records identical rows; ``mrbench verify`` says a fresh record reproduces bit for bit,
catches a one-ulp change planted in the update or in one stored metrics row and names its step and
key, and refuses a record whose data is not here.

The record verified is the session's shared tiny MRTPO run (``trained("mrtpo", steps=2)``: 2 steps,
replaying every step, one credit group); its twins are this module's. The twin in this process
computes no fingerprint and the one in another process probes with an empty cache, so together
they also show that probing beside a run moves none of its numbers."""

from __future__ import annotations

import importlib
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

from harness import fingerprint, verify
from harness.cli import main

TESTS = Path(__file__).parent
ROOT = TESTS.parent
STEPS = 2
CHILD = ("import sys, torch; torch.set_num_threads(1); from toy_task import register; register(); "
         "from harness.cli import main; sys.exit(main(sys.argv[1:]))")

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def record(trained) -> Path:
    """The shared finished tiny run's record (read only; tests that write copy it)."""
    from toy_task import register

    register()  # verify builds the task by its name
    return trained("mrtpo", steps=STEPS).path


def _copy(record: Path, tmp_path: Path) -> Path:
    out = tmp_path / "copy"
    shutil.copytree(record, out)
    return out


def test_the_ignored_keys_are_the_steps_wall_clock_seconds():
    from harness.training.phases import TIMED_PHASES

    assert verify.IGNORED_KEYS == {f"time_{p}" for p in TIMED_PHASES} | {"time_step"}


def test_twin_runs_in_one_process_record_identical_rows(record, tmp_path, monkeypatch):
    from toy_task import tiny_config, train_run

    from harness.numerics_probe import PROBING_ENV

    monkeypatch.setenv(PROBING_ENV, "1")  # this twin computes no fingerprint
    twin = train_run(tiny_config(str(tmp_path / "twin"), "mrtpo", steps=STEPS), finish=True)[1].path
    assert json.loads((twin / "provenance.json").read_text())["numerics"]["fingerprint"] is None
    result = verify.compare(record, twin, STEPS)
    assert result.files == ["metrics.jsonl", "samples.jsonl", "credit.jsonl"]
    assert result.compared > 100 and result.differences == []


@pytest.mark.timeout(900)  # the second process may take up to 600 s
def test_twin_runs_in_two_processes_record_identical_rows(record, tmp_path):
    out = tmp_path / "other-process"
    args = ["run", "--task", "toy", "--algo", "mrtpo", "--model", "tiny-random", "--model.dtype", "float32",
            "--sampling.prompts_per_step", "2", "--sampling.group_size", "4", "--sampling.max_new_tokens", "12",
            "--optim.lr", "0.01", "--optim.micro_batch_size", "3", "--schedule.steps", str(STEPS),
            "--schedule.checkpoint_every", "1", "--schedule.log_samples", "2", "--algo.warmup_steps", "0",
            "--output.dir", str(out)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH")) if p),
           fingerprint.CACHE_ENV: str(tmp_path / "empty-cache")}  # it probes beside its run
    done = subprocess.run([sys.executable, "-c", CHILD, *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    from harness.records import same_configuration

    mine, theirs = (json.loads((p / "config.json").read_text()) for p in (record, out))
    assert same_configuration(mine, {**theirs, "output": mine["output"]})  # the same run, another folder
    assert json.loads((out / "provenance.json").read_text())["numerics"]["probe"]["cached"] is False
    result = verify.compare(record, out, STEPS)
    assert result.compared > 100 and result.differences == []


def test_verify_says_a_fresh_record_reproduces_bit_for_bit(record, capsys):
    before = sorted(p.name for p in record.iterdir())
    assert main(["verify", str(record)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and out[0].startswith(f"reproduces bit for bit: steps 1-2 of {record}"), out
    assert "metrics.jsonl, samples.jsonl, credit.jsonl" in out[0] and "numerics fingerprint" in out[0]
    assert sorted(p.name for p in record.iterdir()) == before


def test_verify_names_the_step_and_key_of_a_planted_change_in_one_metrics_row(record, tmp_path, capsys):
    copy = _copy(record, tmp_path)
    rows = [json.loads(line) for line in (copy / "metrics.jsonl").read_text().splitlines()]
    rows[1]["loss"] = math.nextafter(rows[1]["loss"], math.inf)  # one ulp, step 2
    (copy / "metrics.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    assert main(["verify", str(copy)]) == 1
    line = capsys.readouterr().out.strip()
    assert line.startswith("does not reproduce: ") and "first at step 2, metrics.jsonl 'loss'" in line, line
    assert "(1 of " in line and "the record and this machine share commit" in line


def test_verify_catches_a_one_ulp_change_planted_in_the_update_and_names_its_step(record, monkeypatch, capsys):
    """Before the second step's update, every policy weight moves by one ulp: that step's update
    computes other numbers than the record's, and verify says so at step 2."""
    from harness.backends.local import LocalBackend

    update_class = importlib.import_module(LocalBackend._load_policy.__module__).PolicyUpdate  # the engine's
    update = update_class.__call__
    calls = []

    def planted(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            with torch.no_grad():
                for p in self.policy.parameters():
                    p.copy_(torch.nextafter(p, torch.full_like(p, math.inf)))
        return update(self, *args, **kwargs)

    monkeypatch.setattr(update_class, "__call__", planted)
    assert main(["verify", str(record)]) == 1
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"does not reproduce: steps 1-2 of {record}: first at step 2, "), line


def test_verify_refuses_when_the_data_differs_or_is_missing(record, tmp_path, capsys):
    copy = _copy(record, tmp_path)
    prov = json.loads((copy / "provenance.json").read_text())
    (copy / "provenance.json").write_text(json.dumps({**prov, "data_hash": "0" * 16}))
    assert main(["verify", str(copy)]) == 2
    err = capsys.readouterr().err
    assert "the training data here (task toy's own data" in err and "0000000000000000" in err, err
    gone = tmp_path / "data-gone"
    config = json.loads((copy / "config.json").read_text())
    config["task"]["data_dir"] = str(gone)
    (copy / "config.json").write_text(json.dumps(config))
    assert main(["verify", str(copy)]) == 2
    assert f"the record's training data is missing here: {gone}: no such file or folder" in capsys.readouterr().err


@pytest.mark.parametrize(("setup", "said"), [
    (lambda p: (p / "config.json").unlink(), "config.json: missing"),
    (lambda p: None, "holds 2 steps, fewer than --steps 3"),
])
def test_verify_refuses_what_it_cannot_rerun(record, tmp_path, capsys, setup, said):
    copy = _copy(record, tmp_path)
    setup(copy)
    assert main(["verify", str(copy), "--steps", "3"]) == 2
    assert said in capsys.readouterr().err


BLOCK = {"fingerprint": "f" * 16, "commit": "a" * 40, "dirty": False, "device_class": "cpu/A/avx2",
         "versions": {"torch": "2.13.0", "transformers": "5.19.0", "vllm": None}, "dtypes": {}}


@pytest.mark.parametrize(("here", "differences", "code", "start"), [
    (BLOCK, [], 0, "reproduces bit for bit"),
    ({**BLOCK, "device_class": "cpu/B/avx512"}, [("loss", 0.5, 0.5 + 1e-9)], 0, "reproduces within tolerance"),
    ({**BLOCK, "device_class": "cpu/B/avx512"}, [("loss", 0.5, 0.6)], 1, "does not reproduce"),
    ({**BLOCK, "device_class": "cpu/B/avx512"}, [("response", "ab", "ac")], 1, "does not reproduce"),
    (BLOCK, [("loss", 0.5, 0.5 + 1e-9)], 1, "does not reproduce"),  # the same device should give the same bits
    ({**BLOCK, "fingerprint": "e" * 16, "device_class": "cpu/B"}, [("loss", 0.5, 0.5 + 1e-9)], 1, "does not reproduce"),
])
def test_the_verdict_allows_a_tolerance_only_for_the_same_arithmetic_on_another_device(here, differences, code, start):
    result = verify.Comparison(compared=10, files=["metrics.jsonl"],
                               differences=[verify.Difference(1, "metrics.jsonl", k, a, b) for k, a, b in differences])
    got, line = verify.verdict(Path("r"), 2, result, BLOCK, here, (1.0, 1.2), ("1", "1"))
    assert (got, line.split(":")[0]) == (code, start), line


def test_the_rerun_takes_the_thread_count_an_auto_run_chose(record, tmp_path):
    """``backend.local.threads 0`` picks by the host's load; the rerun takes the count the record ran with."""
    assert json.loads((record / "config.json").read_text())["backend"]["local"]["threads"] == 0
    assert verify._config(record, tmp_path, 2, {"rollout": {"threads": 3}}).backend.local.threads == 3
    assert verify._config(record, tmp_path, 2, {}).backend.local.threads == 0
    copy = _copy(record, tmp_path)
    config = json.loads((copy / "config.json").read_text())
    config["backend"]["local"]["threads"] = 2
    (copy / "config.json").write_text(json.dumps(config))
    assert verify._config(copy, tmp_path, 2, {"rollout": {"threads": 3}}).backend.local.threads == 2
