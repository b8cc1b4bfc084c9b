"""The single-run path: Ctrl-C prints one line (no traceback) and leaves the record ``interrupted``;
rerunning resumes; rerunning a finished run prints its summary and its evaluation."""

from __future__ import annotations

import json
import os
import signal

import pytest
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)
from toy_task import register

from harness.cli import INTERRUPTED_EXIT, main
from harness.training.run_loop import RunLoop

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _args(out_dir):
    return ["run", "--task", "toy", "--algo", "mrtpo", "--model", "tiny-random", "--model.dtype", "float32",
            "--sampling.prompts_per_step", "2", "--sampling.group_size", "4", "--sampling.max_new_tokens", "8",
            "--schedule.steps", "3", "--schedule.eval_benchmarks", "[]", "--output.dir", str(out_dir)]


def _status(out_dir):
    return json.loads((out_dir / "provenance.json").read_text())


def test_ctrl_c_prints_one_line_and_marks_the_record_interrupted_then_resumes(tmp_path, monkeypatch, capsys):
    register()
    out = tmp_path / "run"
    step = RunLoop.run_step

    def ctrl_c_in_step_one(self, n, *a, **k):
        if n == 0:
            os.kill(os.getpid(), signal.SIGINT)  # the handler notes it; the step finishes and checkpoints
        return step(self, n, *a, **k)

    monkeypatch.setattr(RunLoop, "run_step", ctrl_c_in_step_one)
    assert main(_args(out)) == INTERRUPTED_EXIT
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("mrbench")]
    assert lines == [("mrbench run: interrupted (SIGINT: checkpoint written after step 1; rerun the same command "
                     "to resume)")]
    assert "Traceback" not in err
    prov = _status(out)
    assert prov["status"] == "interrupted" and "checkpoint written after step 1" in prov["interruption"]
    monkeypatch.setattr(RunLoop, "run_step", step)
    assert main(_args(out)) == 0
    assert _status(out)["status"] == "finished" and len(_status(out)["resumed"]) == 1


def test_rerunning_a_finished_run_prints_its_summary_and_evaluation(tmp_path, capsys):
    register()
    out = tmp_path / "run"
    args = _args(out)[:-4] + ["--schedule.eval_benchmarks", "[ifollow-heldout]", "--schedule.eval_other_tasks",
                              "true", "--schedule.eval_limit", "1", "--schedule.eval_max_new_tokens", "4",
                              "--output.dir", str(out)]
    args[args.index("--schedule.steps") + 1] = "1"
    assert main(args) == 0
    first = capsys.readouterr().out
    assert main(args) == 0
    again = capsys.readouterr().out
    assert "already finished" in again
    table = first[first.index("eval ifollow-heldout"):].strip()
    assert "eval ifollow-heldout (1 cases):" in again and table in again
