"""The three text-to-SQL rewards, their blocks and spans, on a hand-written database."""

from __future__ import annotations

import math
import sqlite3

import pytest
from text2sql_fixtures import answer, make_db

from tasks.base import Example
from tasks.text2sql import templates
from tasks.text2sql.match import bird_results_match, spider_results_match
from tasks.text2sql.refcache import ReferenceCache
from tasks.text2sql.sandbox import Sandbox
from tasks.text2sql.task import Text2SQLTask

pytestmark = pytest.mark.torchfree  # runs where torch is not installed (.ci/run)


@pytest.fixture(scope="module")
def task() -> Text2SQLTask:
    return Text2SQLTask()


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    return str(make_db(tmp_path_factory.mktemp("t2s")))


def example(db: str, reference: str, match: str = "spider") -> Example:
    return Example(id="x", messages=[{"role": "user", "content": "q"}],
                   reward_names=["format", "executable", "execution"],
                   meta={"db_path": db, "query": reference, "match": match})


def values(task: Text2SQLTask, ex: Example, response: str) -> tuple[float, float, float]:
    return tuple(v.value for v in task.score(ex, response))  # type: ignore[return-value]


# (case, reference, predicted SQL, expected (format, executable, execution))
EXECUTION_TABLE = [
    ("join, same columns", "SELECT e.name, d.name FROM emp e JOIN dept d ON e.dept_id = d.id",
     "SELECT emp.name, dept.name FROM dept JOIN emp ON emp.dept_id = dept.id", (1, 1, 1)),
    ("join, columns permuted", "SELECT e.name, d.name FROM emp e JOIN dept d ON e.dept_id = d.id",
     "SELECT d.name, e.name FROM emp e JOIN dept d ON e.dept_id = d.id", (1, 1, 1)),
    ("join, wrong join kind", "SELECT d.name, e.name FROM dept d JOIN emp e ON e.dept_id = d.id",
     "SELECT d.name, e.name FROM dept d LEFT JOIN emp e ON e.dept_id = d.id", (1, 1, 0)),
    ("aggregation", "SELECT dept_id, count(*) FROM emp GROUP BY dept_id",
     "SELECT count(*), dept_id FROM emp GROUP BY dept_id", (1, 1, 1)),
    ("aggregation, wrong function", "SELECT max(salary) FROM emp", "SELECT avg(salary) FROM emp", (1, 1, 0)),
    ("reference orders, prediction reversed", "SELECT name FROM emp ORDER BY age DESC, id",
     "SELECT name FROM emp ORDER BY age ASC, id", (1, 1, 0)),
    ("reference orders, same order", "SELECT name FROM emp ORDER BY age DESC, id",
     "SELECT name FROM emp ORDER BY age DESC, id ASC", (1, 1, 1)),
    ("reference unordered, prediction ordered", "SELECT name FROM emp",
     "SELECT name FROM emp ORDER BY name DESC", (1, 1, 1)),
    ("order by in a subquery makes order count", ("SELECT name FROM emp WHERE id IN "
     "(SELECT id FROM emp ORDER BY age LIMIT 5)"), "SELECT name FROM emp ORDER BY name DESC", (1, 1, 0)),
    ("NULL equals NULL", "SELECT bonus FROM emp WHERE id = 2", "SELECT NULL", (1, 1, 1)),
    ("NULL is not 0", "SELECT bonus FROM emp WHERE id = 2", "SELECT 0", (1, 1, 0)),
    ("int equals float of the same value", "SELECT count(*) FROM emp", "SELECT 5.0", (1, 1, 1)),
    ("no float tolerance", "SELECT 0.3", "SELECT 0.1 + 0.2", (1, 1, 0)),
    ("text '5' is not integer 5", "SELECT code FROM emp WHERE id = 1", "SELECT 5", (1, 1, 0)),
    ("duplicates count in the multiset", "SELECT age FROM emp",
     "SELECT age FROM emp UNION SELECT age FROM emp", (1, 1, 0)),
    ("DISTINCT removed on both sides (official)", "SELECT age FROM emp", "SELECT DISTINCT age FROM emp",
     (1, 1, 1)),
    ("COUNT(DISTINCT x) becomes COUNT(x) (official)", "SELECT count(age) FROM emp",
     "SELECT count(DISTINCT age) FROM emp", (1, 1, 1)),
    ("duplicate columns", "SELECT name, name FROM emp", "SELECT name, name FROM emp", (1, 1, 1)),
    ("duplicate column is not another column", "SELECT name, age FROM emp", "SELECT name, name FROM emp",
     (1, 1, 0)),
    ("column count differs", "SELECT name FROM emp", "SELECT name, age FROM emp", (1, 1, 0)),
    ("both empty, different column counts", "SELECT name FROM emp WHERE age > 1000",
     "SELECT id, name FROM emp WHERE 0", (1, 1, 1)),
    ("empty vs non-empty", "SELECT name FROM emp WHERE age > 1000", "SELECT name FROM emp", (1, 1, 0)),
    ("unknown table", "SELECT name FROM emp", "SELECT name FROM telefone", (1, 0, 0)),
    ("syntax error", "SELECT name FROM emp", "SELEC name FROM emp", (1, 0, 0)),
    ("spaced >= only valid after normalisation: raw query fails", "SELECT name FROM emp WHERE age >= 40",
     "SELECT name FROM emp WHERE age > = 40", (1, 0, 0)),
    ("two queries in one block: the first one is judged", "SELECT name FROM emp",
     "SELECT name FROM emp; DROP TABLE emp", (1, 1, 1)),
    ("two queries, the first wrong", "SELECT name FROM emp", "SELECT age FROM emp; SELECT name FROM emp",
     (1, 1, 0)),
    ("write attempt is not executable", "SELECT name FROM emp", "DELETE FROM emp", (1, 0, 0)),
]


@pytest.mark.parametrize("case,reference,predicted,expected", EXECUTION_TABLE, ids=[r[0] for r in EXECUTION_TABLE])
def test_execution_table(task, db, case, reference, predicted, expected):
    assert values(task, example(db, reference), answer(predicted)) == tuple(float(x) for x in expected)


# (case, response, expected format, expected executable-block kind)
FORMAT_TABLE = [
    ("well formed", answer("SELECT 1"), 1),
    ("leading and trailing whitespace", "\n  " + answer("SELECT 1") + "\n\n", 1),
    ("sqlite language tag, upper case", "<think>x</think><answer>```SQLite\nSELECT 1\n```</answer>", 1),
    ("prose around the block inside the answer", ("<think>x</think><answer>Query:\n```sql\nSELECT 1\n```\nDone."
     "</answer>"), 1),
    ("no answer tag", "<think>x</think>\n```sql\nSELECT 1\n```", 0),
    ("no think tag", "<answer>```sql\nSELECT 1\n```</answer>", 0),
    ("answer tag twice", answer("SELECT 1") + "<answer></answer>", 0),
    ("tags out of order", "<answer>```sql\nSELECT 1\n```</answer><think>x</think>", 0),
    ("text before think", "Sure! " + answer("SELECT 1"), 0),
    ("text between think and answer", "<think>x</think> so <answer>```sql\nSELECT 1\n```</answer>", 0),
    ("text after answer", answer("SELECT 1") + " bye", 0),
    ("bare SQL in the answer", "<think>x</think><answer>SELECT 1</answer>", 0),
    ("python block instead of sql", "<think>x</think><answer>```python\nSELECT 1\n```</answer>", 0),
    ("empty sql block", "<think>x</think><answer>```sql\n\n```</answer>", 0),
    ("unclosed fence", "<think>x</think><answer>```sql\nSELECT 1</answer>", 0),
    ("empty response", "", 0),
]


@pytest.mark.parametrize("case,response,expected", FORMAT_TABLE, ids=[r[0] for r in FORMAT_TABLE])
def test_format_table(task, db, case, response, expected):
    fmt = task.score(example(db, "SELECT 1"), response)[0]
    assert fmt.value == expected
    assert fmt.block == templates.FORMAT_BLOCK


def test_no_sql_block_message_and_zero_rewards(task, db):
    verdicts = task.score(example(db, "SELECT name FROM emp"), "<think>x</think>\nSELECT name FROM emp")
    assert [v.value for v in verdicts] == [0.0, 0.0, 0.0]
    assert verdicts[1].block == "This response contains no SQL code block inside <answer>."
    assert verdicts[2].block == "The reference query for this question is: SELECT name FROM emp."


def test_executability_blocks(task, db):
    ex = example(db, "SELECT name FROM emp")
    bad = task.score(ex, answer("SELECT name FROM nope"))[1]
    assert bad.block == "When this query was executed on this database, SQLite raised: no such table: nope."
    assert bad.detail["error_kind"] == "sqlite" and bad.detail["sql"] == "SELECT name FROM nope"
    good = task.score(ex, answer("SELECT name FROM emp"))[1]
    assert good.block == templates.EXECUTABLE_OK_BLOCK and good.detail["rows"] == 5


def test_spans_point_at_what_each_verifier_read(task, db):
    sql = "SELECT name, age FROM emp WHERE age > 30"
    response = answer(sql, think="look at emp")
    fmt, exe, res = task.score(example(db, "SELECT name, age FROM emp WHERE age > 30"), response)
    assert [response[s:e] for s, e in fmt.spans] == ["<think>", "</think>", "<answer>", "</answer>"]
    assert [response[s:e] for s, e in exe.spans] == [sql]
    assert [response[s:e] for s, e in res.spans] == ["name, age", "age > 30"]


def test_two_statements_reported(task, db):
    exe = task.score(example(db, "SELECT 1"), answer("SELECT 1; SELECT 2;"))[1]
    assert exe.detail["extra_statements"] == 1 and exe.detail["sql"] == "SELECT 1"


def test_bird_semantics_is_set_equality(task, db):
    ref = "SELECT age FROM emp"
    assert values(task, example(db, ref, "bird"), answer("SELECT age FROM emp UNION SELECT age FROM emp")) \
        == (1.0, 1.0, 1.0)
    # column order counts for BIRD
    assert values(task, example(db, "SELECT name, age FROM emp", "bird"), answer("SELECT age, name FROM emp"))[2] == 0


def test_reference_failure_is_nan_not_an_exception(task, db):
    verdict = task.score(example(db, "SELECT nothing FROM nowhere"), answer("SELECT 1"))[2]
    assert math.isnan(verdict.value) and "reference" in verdict.reason


def test_reference_results_are_cached(db):
    task = Text2SQLTask()
    ex = example(db, "SELECT name FROM emp")
    for _ in range(3):
        task.score(ex, answer("SELECT name FROM emp"))
    assert task.reference_cache.misses == 1 and task.reference_cache.hits == 2


@pytest.mark.parametrize("reference,predicted,ordered,expected", [
    ([], [], True, True),
    ([(1, 2)], [(2, 1)], False, True),
    ([(1, 2)], [(2, 1)], True, True),  # columns may be permuted even when order counts
    ([(1, 2), (3, 4)], [(4, 3), (2, 1)], False, True),
    ([(1, 2), (3, 4)], [(4, 3), (2, 1)], True, False),
    ([(1, 1), (1, 1)], [(1, 1)], False, False),
    ([(1, 2), (2, 1)], [(1, 1), (2, 2)], False, False),  # each column alone matches, rows do not
    ([(None,)], [(None,)], False, True),
    ([(1,)], [(1.0,)], False, True),
    ([("a", 1, "a")], [("a", "a", 1)], True, True),
])
def test_spider_result_equality(reference, predicted, ordered, expected):
    assert spider_results_match(reference, predicted, ordered) is expected
    assert spider_results_match(predicted, reference, ordered) is expected


def test_bird_result_equality():
    assert bird_results_match([(1, 2), (1, 2)], [(1, 2)])
    assert not bird_results_match([(1, 2)], [(2, 1)])


def test_replay_contexts_hold_the_three_blocks_in_reward_order(task, db):
    ex = example(db, "SELECT name FROM emp")
    verdicts = task.score(ex, answer("SELECT name FROM nope"))
    ctx = task.replay_contexts(ex, verdicts, [0, 1, 2])
    text = ctx.all[-1]["content"]
    blocks = [v.block for v in verdicts]
    assert text.index(blocks[0]) < text.index(blocks[1]) < text.index(blocks[2])
    for k in range(3):
        without = ctx.without[k][-1]["content"]
        assert blocks[k] not in without and all(blocks[j] in without for j in range(3) if j != k)


def test_teacher_messages_show_the_reference_as_an_earlier_answer(task, db):
    ex = Example(id="x", messages=[{"role": "system", "content": "S"}, {"role": "user", "content": "Q"}],
                 reward_names=["format", "executable", "execution"],
                 meta={"db_path": db, "query": "SELECT name FROM emp"})
    msgs = task.teacher_messages(ex)
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    assert msgs[1]["content"] == msgs[3]["content"] == "Q"
    # the teacher's earlier answer is itself a perfect response
    assert [v.value for v in task.score(ex, msgs[2]["content"])] == [1.0, 1.0, 1.0]


def test_question_without_database_is_not_applicable(task):
    ex = Example(id="x", messages=[{"role": "user", "content": "q"}], reward_names=["format", "executable",
                 "execution"], meta={"db_path": None, "query": "SELECT 1", "skip_reason": "database 'gone' is missing"})
    fmt, exe, res = task.score(ex, answer("SELECT 1"))
    assert fmt.value == 1.0 and math.isnan(exe.value) and math.isnan(res.value)
    assert exe.block is None and "database 'gone' is missing" in exe.reason
    assert [v.value for v in task.score(ex, "no sql")] == [0.0, 0.0, 0.0]


def test_execution_block_drops_a_trailing_semicolon(task, db):
    block = task.score(example(db, "SELECT name FROM emp ;"), answer("SELECT 1"))[2].block
    assert block == "The reference query for this question is: SELECT name FROM emp."


def test_disk_cache_round_trips_values_and_follows_the_file_bytes(tmp_path):
    db = str(make_db(tmp_path / "dbs"))
    sql = "SELECT name, salary, bonus, x'00ff', 2 FROM emp ORDER BY id"
    first = ReferenceCache(Sandbox(), disk_dir=tmp_path / "cache")
    fresh = first.get(db, sql)
    assert first.misses == 1 and fresh.ok
    again = ReferenceCache(Sandbox(), disk_dir=tmp_path / "cache")
    cached = again.get(db, sql)
    assert (again.disk_hits, again.misses) == (1, 0)
    assert cached.rows == fresh.rows and [type(v) for v in cached.rows[1]] == [str, float, type(None), bytes, int]
    assert again.get(db, "SELECT * FROM nope").error_kind == "sqlite"  # errors are cached too
    # a database with other bytes at another path does not share entries
    other = make_db(tmp_path / "other")
    conn = sqlite3.connect(other)
    conn.execute("UPDATE emp SET name = 'Zed' WHERE id = 1")
    conn.commit()
    conn.close()
    third = ReferenceCache(Sandbox(), disk_dir=tmp_path / "cache")
    assert third.get(str(other), sql).rows[0][0] == "Zed" and third.misses == 1
