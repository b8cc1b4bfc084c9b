"""The verifier budget in a worker process, on the main thread as in any other (reliability probe
5: V2, V3, V5, V6; issue 47): the budget is the verifier's own CPU time, so a verifier that waits
keeps its verdict until a wall-clock cap several times the budget; a timed-out verifier's processes
and a verifier stuck inside one C call are ended with its worker; a child a verifier leaves behind
is ended when the pool closes; a worker that dies gives failure verdicts with a reason instead of
an exception. ``mrbench score`` and ``mrbench eval`` warm up outside the budget and try a timed-out
response twice.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
from test_verifier_linear_time import EXAMPLE, StallingTask

from evals.base import EvalCase
from mrbench_core.budget_worker import pool_for
from mrbench_core.time_budget import WALL_FACTOR
from tasks.base import TIMEOUT_REASON, Verdict

DIED_REASON = "verifier process ended"  # tasks.verifier_budget.DIED_REASON

#: the processes a test's verifier started write their pid here
PID_FILE = "MRBENCH_TEST_PID_FILE"
#: far past every budget below: a wait that reaches it means the budget did not hold
NEVER_S = 600


class HostileTask(StallingTask):
    """A verifier that misbehaves as the response says (the probe's ``hostile`` plugin task)."""

    def __init__(self, pid_file: Path | None = None):
        self.pid_file = str(pid_file) if pid_file else ""

    def _child(self) -> None:
        child = subprocess.Popen(["sleep", str(NEVER_S)])
        Path(self.pid_file).write_text(str(child.pid))

    def score(self, example, response):
        if response == "wait":  # off the CPU for twice the budget, as on a machine whose cores are taken
            time.sleep(float(example.meta["wait_s"]))
        elif response == "hang":
            time.sleep(NEVER_S)
        elif response == "fork_hang":
            self._child()
            time.sleep(NEVER_S)
        elif response == "fork_return":
            self._child()
        elif response == "hang_c":  # one C call for hours: no signal handler runs before it returns
            import hashlib

            hashlib.pbkdf2_hmac("sha256", b"x", b"y", 2**31 - 1, dklen=2048)
        elif response == "exit":
            os._exit(3)
        elif response == "stall":  # computes until stopped
            return super().score(example, response)
        return [Verdict(reward=n, value=1.0, reason="ok") for n in example.reward_names]


def _gone(pid: int) -> bool:
    """Wait until process ``pid`` has ended (a zombie counts: its parent has not reaped it yet); False
    if it still runs a minute on (a killed process is gone at once)."""
    deadline = time.monotonic() + 60
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _example(wait_s: float = 0.0):
    from dataclasses import replace

    return replace(EXAMPLE, meta={"wait_s": wait_s})


def test_a_verifier_kept_off_the_cpu_for_twice_its_budget_keeps_its_verdict():
    task = HostileTask()
    verdicts = task.score_within(_example(wait_s=2.0), "wait", 1.0)
    assert [(v.value, v.reason) for v in verdicts] == [(1.0, "ok"), (1.0, "ok")]
    pool_for(task).close()


def test_a_verifier_that_waits_past_the_wall_clock_cap_times_out():
    task = HostileTask()
    started = time.monotonic()
    verdicts = task.score_within(_example(), "hang", 0.25)
    assert [v.reason for v in verdicts] == [TIMEOUT_REASON] * 2
    assert time.monotonic() - started >= WALL_FACTOR * 0.25  # the cap, not the CPU budget, ended it
    pool_for(task).close()


def test_a_verifier_that_computes_past_its_budget_times_out():
    task = HostileTask()
    assert [v.reason for v in task.score_within(_example(), "stall", 0.3)] == [TIMEOUT_REASON] * 2
    assert [v.value for v in task.score_within(_example(), "fine", 0.3)] == [1.0, 1.0]
    pool_for(task).close()


def test_on_the_main_thread_a_timed_out_verifier_leaves_no_process(tmp_path):
    task = HostileTask(tmp_path / "pid")
    verdicts = task.score_within(_example(), "fork_hang", 0.5)  # what the local backend's step calls
    assert [v.reason for v in verdicts] == [TIMEOUT_REASON] * 2
    assert _gone(int((tmp_path / "pid").read_text())), "the verifier's child outlived its timed-out response"
    pool_for(task).close()


def test_a_verifier_inside_one_c_call_is_stopped_at_its_budget():
    code = ("import sys; sys.path[:0] = {path!r}\n"
            "from test_verifier_budget_process import HostileTask, _example\n"
            "print([v.reason for v in HostileTask().score_within(_example(), 'hang_c', 0.5)])\n")
    path = [str(Path(__file__).parent), str(Path(__file__).parents[1])]
    out = subprocess.run([sys.executable, "-c", code.format(path=path)], capture_output=True, text=True, check=False,
                         timeout=120)  # the C call alone would take hours
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str([TIMEOUT_REASON] * 2)


def test_a_child_left_by_a_verifier_that_returned_in_time_ends_with_the_pool(tmp_path):
    task = HostileTask(tmp_path / "pid")
    assert [v.value for v in task.score_within(_example(), "fork_return", 5.0)] == [1.0, 1.0]
    pid = int((tmp_path / "pid").read_text())
    pool_for(task).close()
    assert _gone(pid), "the verifier's child outlived the closed pool"


def test_a_worker_that_dies_gives_failure_verdicts_with_the_reason_and_the_pool_recovers():
    from test_verifier_budget_threads import in_thread

    task = HostileTask()
    verdicts = in_thread(task.score_within, _example(), "exit", 5.0)  # as the openrlhf agent calls it
    assert [(v.reward, v.value, v.reason) for v in verdicts] == [("signed", -1.0, DIED_REASON),
                                                                 ("plain", 0.0, DIED_REASON)]
    assert verdicts[0].detail == {"exit_code": 3}
    assert [v.value for v in task.score_within(_example(), "fine", 5.0)] == [1.0, 1.0]
    pool_for(task).close()


class CountingTask(StallingTask):
    """Times out on its first try of each response (``tries`` counts them in a file), then answers."""

    def __init__(self, tries: Path):
        self.tries = str(tries)

    def score(self, example, response):
        path = Path(self.tries)
        n = int(path.read_text()) if path.exists() else 0
        path.write_text(str(n + 1))
        if n == 0:
            return super().score(example, "stall")
        return [Verdict(reward=name, value=1.0, reason="ok") for name in example.reward_names]


def test_mrbench_score_tries_a_timed_out_response_twice(tmp_path, monkeypatch):
    from harness import scoring

    task = CountingTask(tmp_path / "tries")
    monkeypatch.setattr(scoring, "make_task", lambda name: task)
    monkeypatch.setattr(type(task), "example_from_row", lambda self, row, **kw: EXAMPLE, raising=False)
    (tmp_path / "in.jsonl").write_text('{"response": "x"}\n')
    result = scoring.score_file("counting", str(tmp_path / "in.jsonl"), str(tmp_path / "out.jsonl"),
                                time_budget_s=0.3)
    assert result.timeouts == [] and (tmp_path / "tries").read_text() == "2"
    pool_for(task).close()


def test_an_evaluator_warms_up_outside_the_budget_and_tries_twice(monkeypatch):
    from evals import ifollow as ifollow_evals
    from evals.registry import make_evaluator

    evaluator = make_evaluator("ifeval")
    evaluator.verifier_timeout_s = 0.3
    calls = []

    def slow_warm_up():
        calls.append("warm")
        end = time.process_time() + 1.0  # a CPU second: three budgets
        while time.process_time() < end:
            pass

    def first_try_stalls(cid, text, kw, **_):
        calls.append("check")
        if calls.count("check") == 1:
            end = time.process_time() + 10
            while time.process_time() < end:
                pass
        return type("R", (), {"ok": True, "reason": ""})()

    monkeypatch.setattr(evaluator, "warm_up", slow_warm_up)
    monkeypatch.setattr(ifollow_evals, "check", first_try_stalls)
    case = EvalCase(id="c1", messages=[{"role": "user", "content": "x"}], category="punctuation",
                    meta={"prompt": "x", "constraints": [["punctuation:no_comma", {}]]})
    report = evaluator.score([case], {"c1": "fine"})
    assert report.summary["verifier_timeouts"] == 0 and report.rows[0]["strict"] == [True]
    assert calls[0] == "warm" and calls.count("warm") == 1
