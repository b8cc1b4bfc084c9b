"""Hypothesis fuzzing: 10,000 arbitrary and near-miss responses never raise; rewards stay in {0, 1}.

4,000 arbitrary texts and 6,000 near-miss responses assembled from the pieces a model writes
(tags, fences, SQL keywords, quotes, semicolons, comments), scored by the training verifiers and
by the benchmark evaluator's lenient reader on a hand-written database.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from text2sql_fixtures import make_db

from evals.base import EvalCase
from evals.text2sql import spider_dev
from tasks.base import Example
from tasks.text2sql.sandbox import SandboxLimits
from tasks.text2sql.sqltext import clause_spans, normalize_for_match
from tasks.text2sql.task import Text2SQLTask

PIECES = [
    "<think>", "</think>", "<answer>", "</answer>", "```sql\n", "```sqlite\n", "```\n", "```", "\n", " ",
    "SELECT", "select", "DISTINCT", "name", "age", "*", "count(*)", "FROM", "emp", "dept", "telefone",
    "WHERE", "age > 30", "age > = 30", "AND", "OR", "JOIN", "ON", "emp.dept_id = dept.id", "GROUP BY",
    "ORDER BY", "DESC", "LIMIT 2", "HAVING", "count(*) > 1", "UNION", "(", ")", ",", ";", "'", '"', "`",
    "'Ann'", "NULL", "1.5", "--", "/*", "*/", "DROP TABLE emp", "PRAGMA query_only=0", "ATTACH 'x' AS y",
    "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 50)", "é", "\x00", "🙂",
]

VALID = [
    "SELECT name FROM emp WHERE age > 30",
    "SELECT name FROM emp WHERE age >= 31 ORDER BY name",
    "SELECT DISTINCT name FROM emp WHERE age > 30",
    "SELECT count(*) FROM emp",
    "SELECT e.name , d.name FROM emp e JOIN dept d ON e.dept_id = d.id WHERE e.age > 30",
    "SELECT name FROM emp WHERE age > 30 UNION SELECT name FROM dept",
    "SELECT name , age FROM emp GROUP BY name HAVING count(*) > 0",
]


def _mutate(query: str, ops: list[tuple[str, int, str]]) -> str:
    toks = query.split(" ")
    for op, i, piece in ops:
        i %= max(1, len(toks))
        if op == "drop" and len(toks) > 1:
            del toks[i]
        elif op == "dup":
            toks.insert(i, toks[i])
        elif op == "insert":
            toks.insert(i, piece)
        elif op == "swap" and len(toks) > 1:
            j = (i + 1) % len(toks)
            toks[i], toks[j] = toks[j], toks[i]
    return " ".join(toks)


mutation = st.tuples(st.sampled_from(["drop", "dup", "insert", "swap"]), st.integers(0, 40), st.sampled_from(PIECES))
near_miss_sql = st.one_of(
    st.builds(_mutate, st.sampled_from(VALID), st.lists(mutation, max_size=3)),
    st.lists(st.sampled_from(PIECES), max_size=40).map(" ".join),
)
wrapped = st.tuples(st.sampled_from(["<think>x</think>", "<think>x</think>", "", "<think>", "</think><think>"]),
                    st.sampled_from(["<answer>", "<answer>", "", "<answer><answer>"]),
                    st.sampled_from(["```sql\n", "```sql\n", "```\n", ""]), near_miss_sql,
                    st.sampled_from(["\n```", "\n```", ""]),
                    st.sampled_from(["</answer>", "</answer>", "", "</answer> tail"])
                    ).map(lambda parts: "".join(parts))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    db = str(make_db(tmp_path_factory.mktemp("fuzz")))
    task = Text2SQLTask(limits=SandboxLimits(timeout_s=0.5, max_rows=10_000))
    ex = Example(id="f", messages=[{"role": "user", "content": "q"}],
                 reward_names=["format", "executable", "execution"],
                 meta={"db_path": db, "query": "SELECT name FROM emp WHERE age > 30"})
    ev = spider_dev()
    case = EvalCase(id="f", messages=ex.messages, meta={"db_path": db, "query": ex.meta["query"], "db_id": "toy"})
    return task, ex, ev, case


def _check(setup, response: str) -> None:
    task, ex, ev, case = setup
    verdicts = task.score(ex, response)
    assert [v.reward for v in verdicts] == ["format", "executable", "execution"]
    for v in verdicts:
        assert v.value in (0.0, 1.0), (v.reward, v.value, response)
        assert isinstance(v.block, str) and v.block
        assert all(0 <= s <= e <= len(response) for s, e in v.spans)
    if verdicts[1].value == 0.0:
        assert verdicts[2].value == 0.0
    row = ev.score_case(case, response)
    assert row["correct"] in (True, False)
    normalize_for_match(response)
    clause_spans(response)


_SETTINGS = {"deadline": None, "database": None, "derandomize": True,
                 "suppress_health_check": [HealthCheck.function_scoped_fixture, HealthCheck.too_slow]}


@settings(max_examples=4000, **_SETTINGS)
@given(text=st.text(max_size=300))
def test_arbitrary_text(setup, text):
    _check(setup, text)


@settings(max_examples=6000, **_SETTINGS)
@given(response=wrapped)
def test_near_miss_responses(setup, response):
    _check(setup, response)
