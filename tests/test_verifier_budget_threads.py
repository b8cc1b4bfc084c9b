"""The verifier time budget in a worker process (issue 32, item 2; issue 47): ``Task.score_within``
called from a worker thread (the openrlhf backend's vLLM engines score in ``asyncio.to_thread``),
where SIGALRM cannot fire, and on the main thread alike, runs the verifiers in a worker process that
is killed past the budget. The verdicts are the task's own, bit for bit; a stalled verifier gets the
timeout verdicts; no process is left behind. A task that does not pickle is scored in the calling
process, on the main thread under the alarm."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from test_verifier_linear_time import EXAMPLE, StallingTask

from mrbench_core.budget_worker import WorkerPool, pool_for
from mrbench_core.time_budget import TimeBudgetExceeded
from tasks.base import TIMEOUT_REASON, Verdict
from tasks.data_source import load_examples
from tasks.registry import make_task


def in_thread(fn, *args):
    """``fn(*args)`` in a fresh thread (not the main one), its result or exception."""
    out = {}

    def run():
        try:
            out["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001  (handed to the caller)
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["value"]


def children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def test_a_stalled_verifier_in_a_thread_gets_the_timeout_verdicts_and_its_process_is_killed():
    task = StallingTask()
    before = children()
    verdicts = in_thread(task.score_within, EXAMPLE, "stall", 0.5)
    assert [(v.reward, v.value, v.reason) for v in verdicts] == [("signed", -1.0, TIMEOUT_REASON),
                                                                 ("plain", 0.0, TIMEOUT_REASON)]
    assert [v.to_json() for v in verdicts] == [v.to_json() for v in task.timeout_verdicts(EXAMPLE, 0.5)]
    assert children() == before  # the stalled worker was killed and reaped, none kept in its place
    fine = in_thread(task.score_within, EXAMPLE, "fine", 0.5)  # a fresh worker answers the next call
    assert [v.value for v in fine] == [1.0, 1.0]
    assert len(children() - before) == 1  # one idle worker, kept for the next call
    pool_for(task).close()
    assert children() == before


def test_the_main_thread_scores_in_a_worker_too():
    task = StallingTask()
    before = children()
    assert [v.reason for v in task.score_within(EXAMPLE, "stall", 0.2)] == [TIMEOUT_REASON] * 2
    assert [v.value for v in task.score_within(EXAMPLE, "fine", 0.2)] == [1.0, 1.0]
    assert len(children() - before) == 1  # one idle worker, as off the main thread
    pool_for(task).close()
    assert children() == before


class LocalTask(StallingTask):
    """Not picklable (a lock): scored in this process, on the main thread under the alarm."""

    def __init__(self):
        self.lock = threading.Lock()


def test_a_task_that_does_not_pickle_is_scored_here_with_one_warning(capsys):
    task = LocalTask()
    before = children()
    assert [v.reason for v in task.score_within(EXAMPLE, "stall", 0.2)] == [TIMEOUT_REASON] * 2
    assert [v.value for v in task.score_within(EXAMPLE, "fine", 0.2)] == [1.0, 1.0]
    assert children() == before
    err = capsys.readouterr().err
    assert err.count("is scored in this process") == 1 and "cannot stop a verifier inside one C call" in err


def test_no_budget_in_a_thread_scores_in_the_thread():
    task = StallingTask()
    before = children()
    assert [v.value for v in in_thread(task.score_within, EXAMPLE, "fine", 0)] == [1.0, 1.0]
    assert children() == before


@pytest.mark.parametrize("name", ["ifollow", "toolcall"])
def test_verdicts_in_a_worker_equal_the_tasks_own_bit_for_bit(name):
    task = make_task(name)
    examples = load_examples(task, "train", None, 4, 0)
    responses = ["", "Sure. " * 40, '<tool_call>\n{"name": "x", "arguments": {}}\n</tool_call>',
                 "<think>ok</think> HELLO, WORLD! " + "*word* " * 30]
    for ex in examples:
        for response in responses:
            here = [v.to_json() for v in task.score(ex, response)]  # this process, no budget
            main = task.score_within(ex, response, 120.0)  # a worker, from the main thread
            there = in_thread(task.score_within, ex, response, 120.0)  # a worker, from another thread
            assert TIMEOUT_REASON not in {v.reason for v in main}
            assert json.dumps([v.to_json() for v in main]) == json.dumps(here)
            assert json.dumps([v.to_json() for v in there]) == json.dumps(here)
    pool_for(task).close()


def test_under_asyncio_to_thread_as_the_agent_scores():
    task = StallingTask()

    async def score_both():
        return await asyncio.gather(asyncio.to_thread(task.score_within, EXAMPLE, "stall", 0.5),
                                    asyncio.to_thread(task.score_within, EXAMPLE, "fine", 0.5))

    stalled, fine = asyncio.run(score_both())
    assert [v.reason for v in stalled] == [TIMEOUT_REASON] * 2 and [v.value for v in fine] == [1.0, 1.0]
    pool_for(task).close()


class Broken:
    def fail(self):
        raise ValueError("a checker's own error")

    def echo(self, x):
        return x


def test_the_work_s_own_exception_comes_back_and_the_worker_stays():
    pool = WorkerPool(Broken(), size=1)
    try:
        with pytest.raises(ValueError, match="a checker's own error"):
            pool.call("fail", (), 30)
        assert pool.call("echo", ({"a": [1, 2]},), 30) == {"a": [1, 2]}
    finally:
        pool.close()


def test_an_object_that_cannot_be_copied_says_so():
    with pytest.raises(TypeError, match="cannot be copied into a worker process"):
        WorkerPool(threading.Lock())


def test_past_the_budget_the_call_raises_and_the_pool_recovers():
    pool = WorkerPool(StallingTask(), size=1)
    try:
        with pytest.raises(TimeBudgetExceeded):
            pool.call("score", (EXAMPLE, "stall"), 0.3)
        assert [v.value for v in pool.call("score", (EXAMPLE, "fine"), 30)] == [1.0, 1.0]
    finally:
        pool.close()


def test_a_text2sql_task_copies_into_a_worker_without_its_processes_or_locks():
    import pickle

    task = make_task("text2sql")
    copy = pickle.loads(pickle.dumps(task))
    assert copy.sandbox._pool is None and copy.sandbox.limits == task.sandbox.limits
    assert copy.reference_cache._lock is not task.reference_cache._lock


def test_the_openrlhf_label_carries_the_budget_to_the_agent():
    from harness.backends.openrlhf.labels import Label, decode_label, encode_label

    label = Label("toy", {}, EXAMPLE, [2], 12, verifier_timeout_s=1.5)
    assert decode_label(encode_label(label)).verifier_timeout_s == 1.5
    assert decode_label(encode_label(Label("toy", {}, EXAMPLE, [2], 12))).verifier_timeout_s is None


class WarmingTask(StallingTask):
    """Scores 1.0 only once its ``warm_up`` ran: in a worker, warm-up comes before any call."""

    warmed = False

    def warm_up(self):
        self.warmed = True

    def score(self, example, response):
        return [Verdict(reward=n, value=1.0 if self.warmed else 0.0, reason="ok") for n in example.reward_names]


def test_a_worker_warms_its_task_up_before_the_first_budgeted_call():
    task = WarmingTask()
    assert [v.value for v in task.score_within(EXAMPLE, "x", 0)] == [0.0, 0.0]  # no budget: scored here, as is
    assert [v.value for v in task.score_within(EXAMPLE, "x", 5)] == [1.0, 1.0]
    assert [v.value for v in in_thread(task.score_within, EXAMPLE, "x", 5)] == [1.0, 1.0]
    pool_for(task).close()


def test_ifollow_warms_up_the_tokenizers_and_language_profiles_its_checks_load():
    task = make_task("ifollow")
    task.warm_up()
    from tasks.ifollow import textutil

    assert textutil._sentence_tokenizer.cache_info().currsize == 1
    assert textutil._treebank.cache_info().currsize == 1


class SpawningTask(StallingTask):
    """Its verifier starts a process of its own, then stalls."""

    def __init__(self, pid_file):
        self.pid_file = str(pid_file)

    def score(self, example, response):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        Path(self.pid_file).write_text(str(child.pid))
        return super().score(example, "stall")


def test_a_worker_killed_past_the_budget_takes_the_processes_it_started_with_it(tmp_path):
    task = SpawningTask(tmp_path / "pid")
    verdicts = in_thread(task.score_within, EXAMPLE, "x", 1.0)
    assert [v.reason for v in verdicts] == [TIMEOUT_REASON] * 2
    pid = int((tmp_path / "pid").read_text())
    deadline = time.monotonic() + 60  # killed with its group: wait for the kernel to say it is gone
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, f"the verifier's own process {pid} outlived its killed worker"
        time.sleep(0.05)
    pool_for(task).close()
