"""The sandbox's hard stop: a query stuck inside one SQLite function call is killed with its process.

The progress handler cannot stop these (it runs between virtual-machine instructions, and each of
them is one instruction): ``instr`` / ``replace`` of long strings (O(n * m) comparisons) and
``printf``'s ``%c`` repeated two billion times. :class:`WorkerSandbox` must stop each within the
time limit plus one second, keep every database byte, and answer the next query normally.
"""

from __future__ import annotations

import time

import pytest
from test_text2sql_sandbox import ATTACKS, KILL_SLACK_S, LIMITS, TIMEOUT, _listing
from text2sql_fixtures import answer, make_db

from evals.text2sql import spider_dev
from tasks.base import Example
from tasks.text2sql.sandbox import Sandbox, file_checksum
from tasks.text2sql.task import Text2SQLTask
from tasks.text2sql.worker import WorkerSandbox

_LONG_A = "replace(hex(zeroblob({n})), '0', 'a')"  # a string of 2n letters 'a'; under LIMITS.max_value_bytes
SINGLE_CALL_ATTACKS = [
    ("instr of long strings", f"SELECT instr({_LONG_A.format(n=500_000)}, {_LONG_A.format(n=250_000)} || 'b')"),
    ("replace of long strings",
     f"SELECT length(replace({_LONG_A.format(n=500_000)}, {_LONG_A.format(n=250_000)} || 'b', 'x'))"),
    ("printf repeating one character", "SELECT length(printf('%.*c', 2000000000, 'x'))"),
]


@pytest.fixture()
def db(tmp_path):
    return make_db(tmp_path / "db")


@pytest.mark.parametrize("name,sql", SINGLE_CALL_ATTACKS, ids=[a[0] for a in SINGLE_CALL_ATTACKS])
def test_single_call_attack_is_stopped_in_time(db, name, sql):
    before, files = file_checksum(str(db)), _listing(db.parent)
    sandbox = WorkerSandbox(LIMITS)
    assert sandbox.run(str(db), "SELECT count(*) FROM emp").rows == [(5,)]  # child started
    start = time.perf_counter()
    result = sandbox.run(str(db), sql)
    elapsed = time.perf_counter() - start
    assert not result.ok and result.error_kind == "timeout", (name, result.error_kind, result.error)
    assert elapsed < TIMEOUT + KILL_SLACK_S, name
    assert sandbox.kills == 1
    after = sandbox.run(str(db), "SELECT name FROM emp WHERE id = 2")  # a fresh child answers
    assert after.ok and after.rows == [("Bob",)]
    sandbox.close()
    assert file_checksum(str(db)) == before and _listing(db.parent) == files


def test_every_attack_gets_the_same_outcome_as_in_process(db):
    inproc, worker = Sandbox(LIMITS), WorkerSandbox(LIMITS)
    for name, sql, kinds in ATTACKS:
        start = time.perf_counter()
        got = worker.run(str(db), sql.format(other=db.parent / "x.db"))
        assert time.perf_counter() - start < TIMEOUT + 1.0, name
        assert not got.ok and got.error_kind in kinds, (name, got.error_kind)
        if kinds <= {"denied", "sqlite"}:
            assert got.error == inproc.run(str(db), sql.format(other=db.parent / "x.db")).error, name
    assert worker.kills == 0  # the progress handler stopped every one of them inside the child
    worker.close()


@pytest.mark.parametrize("sql", [
    "SELECT * FROM emp ORDER BY id",
    "SELECT name, age * 1.5, NULL, x'00ff', 7 FROM emp WHERE age > 30",
    "SELECT d.name, count(*) FROM emp e JOIN dept d ON e.dept_id = d.id GROUP BY d.name",
    "SELECT nothing FROM nowhere",
])
def test_results_equal_the_in_process_sandbox(db, sql):
    a, b = Sandbox(LIMITS).run(str(db), sql), WorkerSandbox(LIMITS).run(str(db), sql)
    assert (a.ok, a.rows, a.columns, a.error, a.error_kind) == (b.ok, b.rows, b.columns, b.error, b.error_kind)
    assert [[type(v) for v in r] for r in a.rows] == [[type(v) for v in r] for r in b.rows]


def test_a_dead_or_closed_child_is_replaced(db):
    sandbox = WorkerSandbox(LIMITS)
    assert sandbox.run(str(db), "SELECT 1").rows == [(1,)]
    (worker,) = sandbox._pool._idle  # its one worker process (mrbench_core.budget_worker)
    worker.proc.kill()
    worker.proc.wait()
    assert sandbox.run(str(db), "SELECT 2").rows == [(2,)]
    sandbox.close()
    assert sandbox._pool is None and worker.proc.poll() is not None
    assert sandbox.run(str(db), "SELECT 3").rows == [(3,)]
    sandbox.close()


def test_in_a_scoring_worker_a_stuck_query_is_stopped_by_its_own_limit(db):
    """A task is scored in a budget worker (tasks.verifier_budget); its sandbox's worker runs inside
    that one, so a query stuck in one SQLite call ends as a query past its limit, without spending
    the scoring worker's budget (its own CPU time), which would fail every reward of the response."""
    from mrbench_core.budget_worker import WorkerPool

    pool = WorkerPool(WorkerSandbox(LIMITS), size=1)  # the scoring worker's copy of the sandbox
    try:
        start = time.perf_counter()
        result = pool.call("run", (str(db), SINGLE_CALL_ATTACKS[2][1]), 2.0)  # a 2 s CPU budget, as a verifier's
        assert not result.ok and result.error_kind == "timeout" and "its process was killed" in result.error
        assert time.perf_counter() - start < TIMEOUT + KILL_SLACK_S
        assert pool.call("run", (str(db), "SELECT count(*) FROM emp"), 2.0).rows == [(5,)]  # the same worker
    finally:
        pool.close()


def test_the_task_and_the_evaluators_use_the_hard_stop(db):
    task = Text2SQLTask(limits=LIMITS)
    assert isinstance(task.sandbox, WorkerSandbox) and isinstance(spider_dev().sandbox, WorkerSandbox)
    ex = Example(id="a", messages=[{"role": "user", "content": "q"}],
                 reward_names=["format", "executable", "execution"],
                 meta={"db_path": str(db), "query": "SELECT name FROM emp"})
    start = time.perf_counter()
    verdicts = task.score(ex, answer(SINGLE_CALL_ATTACKS[2][1]))
    assert time.perf_counter() - start < TIMEOUT + 1.0
    assert [v.value for v in verdicts] == [1.0, 0.0, 0.0]
    assert verdicts[1].block.startswith("When this query was executed on this database, it was stopped: query "
                                        "stopped after the 0.5 s time limit")
    assert [v.value for v in task.score(ex, answer("SELECT name FROM emp"))] == [1.0, 1.0, 1.0]
    task.sandbox.close()


@pytest.mark.slow
def test_the_in_process_sandbox_cannot_stop_a_single_call(db):
    """Why the worker exists: in process, the printf attack overruns the limit by seconds."""
    start = time.perf_counter()
    Sandbox(LIMITS).run(str(db), SINGLE_CALL_ATTACKS[2][1])
    assert time.perf_counter() - start > TIMEOUT + 1.0
