"""Kill a run (SIGKILL or SIGTERM) and rerun the same command: no metrics step lost or repeated, and
the resumed run reproduces the uninterrupted one; a finished run is not rerun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import process_sessions
import pytest
import torch
from torch_fixtures import one_torch_thread  # noqa: F401  (a fixture)

TESTS = Path(__file__).parent
ROOT = TESTS.parent
STEPS = 5

# The child runs the real CLI; the toy task is registered first. With WAIT_ENV set, it waits before
# its second step until the parent's signal has arrived (the stop flag is set, or SIGKILL ends it),
# so the parent's signal lands between the first checkpoint and the end however fast the host is.
WAIT_ENV = "MRBENCH_TEST_WAIT_FOR_SIGNAL"
CHILD = """
import os, sys, time
import torch
torch.set_num_threads(1)
from toy_task import register
register()
from harness.training.run_loop import RunLoop
run_step = RunLoop.run_step
def waiting_step(self, n, *a, **k):
    if n >= 1 and os.environ.get("%s"):
        end = time.monotonic() + 600
        while not self.stop and time.monotonic() < end:
            time.sleep(0.02)
    return run_step(self, n, *a, **k)
RunLoop.run_step = waiting_step
from harness.cli import main
sys.exit(main(sys.argv[1:]))
""" % WAIT_ENV


#: a signalled run and its rerun, each wait capped at 240 s, 120 s and 300 s: above the default limit
pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.timeout(900)]


def _args(out_dir: Path) -> list[str]:
    return ["run", "--task", "toy", "--algo", "mrtpo", "--model", "tiny-random",
            "--model.dtype", "float32", "--sampling.prompts_per_step", "2", "--sampling.group_size", "4",
            "--sampling.max_new_tokens", "12", "--optim.lr", "0.01", "--schedule.steps", str(STEPS),
            "--schedule.checkpoint_every", "1", "--algo.warmup_steps", "0", "--output.dir", str(out_dir)]


def _child_env() -> dict[str, str]:
    """The child imports the test helpers the way pytest does (``pythonpath`` in pyproject)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS), env.get("PYTHONPATH", "")) if p)
    return env


def _command(out_dir: Path) -> list[str]:
    return [sys.executable, "-c", CHILD, *_args(out_dir)]


def _run_in_process(out_dir: Path) -> int:
    """The same command through the CLI entry point, in this process (cheaper than a new interpreter)."""
    from toy_task import register

    from harness.cli import main

    register()
    return main(_args(out_dir))


def _metrics(out_dir: Path) -> list[dict]:
    path = out_dir / "metrics.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _comparable(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time_")} for r in rows]


def _run(out_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run(_command(out_dir), check=False, cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env=_child_env())


def _start_and_signal(out_dir: Path, sig: int) -> subprocess.Popen:
    proc = process_sessions.track(subprocess.Popen(_command(out_dir), cwd=ROOT, stdout=subprocess.PIPE,
                                                   stderr=subprocess.PIPE, text=True,
                                                   env={**_child_env(), WAIT_ENV: "1"}))
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            if (out_dir / "checkpoint" / "state.pt").exists() and len(_metrics(out_dir)) >= 1:
                break
            if proc.poll() is not None:
                raise AssertionError(f"child ended early: {proc.communicate()}")
            time.sleep(0.05)
        os.kill(proc.pid, sig)
        proc.communicate(timeout=120)
    finally:
        process_sessions.stop(proc)  # nothing of it left, however the wait ended
    return proc


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("whole") / "run"
    assert _run_in_process(out) == 0
    return _metrics(out)


def test_kill_9_then_rerun_completes_without_lost_or_repeated_steps(tmp_path, uninterrupted):
    out = tmp_path / "run"
    proc = _start_and_signal(out, signal.SIGKILL)
    assert proc.returncode == -signal.SIGKILL
    done_before = [m["step"] for m in _metrics(out)]
    assert 1 <= len(done_before) < STEPS, done_before
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["status"] == "running"
    res = _run(out)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = _metrics(out)
    assert [m["step"] for m in rows] == list(range(1, STEPS + 1))
    assert _comparable(rows) == _comparable(uninterrupted)
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["status"] == "finished" and len(prov["resumed"]) == 1
    print(f"killed after steps {done_before}; resumed to {STEPS} steps, metrics identical to an uninterrupted run")


def test_sigterm_checkpoints_then_rerun_resumes_and_finished_run_is_not_rerun(tmp_path, uninterrupted, capsys):
    out = tmp_path / "run"
    proc = _start_and_signal(out, signal.SIGTERM)
    assert proc.returncode != 0
    done = [m["step"] for m in _metrics(out)]
    assert 1 <= len(done) < STEPS

    state = torch.load(out / "checkpoint" / "state.pt", weights_only=False)
    assert state["step"] == done[-1]  # the interrupted step was checkpointed before exiting
    assert state["data_position"] == done[-1] * 2
    assert _run_in_process(out) == 0
    assert _comparable(_metrics(out)) == _comparable(uninterrupted)
    capsys.readouterr()
    assert _run_in_process(out) == 0
    assert "already finished" in capsys.readouterr().out
    assert _comparable(_metrics(out)) == _comparable(uninterrupted)
